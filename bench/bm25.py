"""The plain BM25 reference the recall benchmarks print beside pocketmem's figures.

FTS5's bm25() over the same memories, top k, no threshold, no stop words, no per-user statistics: Han text
as characters and character pairs (the usual dictionary-free Chinese indexing), other words through FTS5's
`porter unicode61` tokenizer. Queries OR every token of the message, the context lines and (when the
benchmark uses them) the agent keywords. It answers every question that shares any token with any memory,
so its negative precision is low by design; it is the bar for hit@k.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "server") not in sys.path:
    sys.path.insert(0, str(ROOT / "server"))

from pocketmem.store.sqlite.driver import sqlite_module  # noqa: E402

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_HAN = re.compile(rf"[{_CJK}]")


def tokens(text: str) -> list[str]:
    out: list[str] = []
    for run in _TOKEN.findall(text.lower()):
        if _HAN.match(run):
            out.extend(run)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
        else:
            out.append(run)
    return out


class BM25:
    """An in-memory FTS5 table of (key, text) rows."""

    def __init__(self, rows: Iterable[tuple[str, str]], path: str = ":memory:") -> None:
        module, _ = sqlite_module()
        self.db = module.connect(path)
        self.db.execute("create virtual table if not exists docs using fts5 (key unindexed, body, "
                        "tokenize = 'porter unicode61 remove_diacritics 2')")
        self.db.executemany("insert into docs (key, body) values (?, ?)",
                            ((key, " ".join(tokens(text))) for key, text in rows))
        self.db.commit()

    @classmethod
    def open(cls, path: str) -> BM25:
        self = cls.__new__(cls)
        module, _ = sqlite_module()
        self.db = module.connect(path)
        return self

    def search(self, texts: Sequence[str], k: int) -> list[str]:
        terms = dict.fromkeys(t for text in texts for t in tokens(text))
        if not terms:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        rows = self.db.execute("select key from docs where docs match ? order by rank limit ?", (match, k))
        return [row[0] for row in rows]
