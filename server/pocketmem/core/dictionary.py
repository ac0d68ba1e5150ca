"""jieba's dictionary as one word table (base/wordtable.py), and jieba's own segmenter and tagger over it.

jieba holds its dictionary (dict.txt: 349,046 lines of word, count and part-of-speech tag) twice, in Python
dicts: the segmenter's FREQ (every word with its count and every prefix of a word with 0, 498,113 keys, about
62 MB resident) and the tagger's word_tag_tab (word -> tag, about 42 MB, built when jieba.posseg is
imported). Here both are columns of one trie over FREQ's keys, about 4 MB, and jieba's own Tokenizer and
POSTokenizer run over it: the segmenter reads FREQ only as `frag in FREQ`, `FREQ[frag]` and `FREQ.get(word)`,
the tagger its table only as `word_tag_tab.get(word, 'x')`, and the columns answer these as the dicts do. So
every segmentation and every tag is jieba's (tests/test_dictionary.py compares them on thousands of texts).

The table is read by jieba's own rules (Tokenizer.gen_pfdict, POSTokenizer.load_word_tag): a line is
`word count tag`; of a word listed twice (B超) the later line wins; the total counts every line; a prefix of
a word that is no word itself has count 0 and no tag.
"""

from __future__ import annotations

import logging
import os
import threading
from array import array
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import marisa_trie

from pocketmem.base.wordtable import Column, WordTable, cached, zeros

NO_TAG = 255  # the tag column's value for a prefix that is no word
_LOADING = threading.RLock()  # one load at a time: a second caller waits for the first one's tables


def segmenter() -> Any:
    """A jieba Tokenizer over the table, set up as jieba's `initialize` would set it up (FREQ, total,
    initialized) without building its dict. jieba's module-level functions (jieba.cut) use another one,
    jieba.dt, which would build it: call this one's methods."""
    with _LOADING:
        return _segmenter()


def tagger() -> Any:
    """jieba.posseg's own tagger (jieba.posseg.dt) over the segmenter and the table's tags. Importing
    jieba.posseg builds that tagger's word_tag_tab from jieba.dt's dictionary file (0.4 s, 42 MB): it is imported
    while that file is an empty one, and giving it the segmenter keeps jieba.dt's dict unbuilt."""
    with _LOADING:
        return _tagger()


class Tags:
    """The tag column read as jieba's tagger reads its word_tag_tab: `get(word, default)`, the default for
    what is no word of the dictionary."""

    __slots__ = ("_number", "_codes", "_names")

    def __init__(self, table: WordTable) -> None:
        self._number = table.number
        self._codes = table.columns["tag"]
        self._names = tuple(table.meta["tags"])

    def get(self, word: str, default: str | None = None) -> str | None:
        number = self._number(word)
        if number is None or self._codes[number] == NO_TAG:
            return default
        return self._names[self._codes[number]]


@cache
def table() -> WordTable:
    """jieba's dictionary as a word table, from the cache folder or built from jieba's dict.txt."""
    import jieba

    source = Path(jieba.__file__).with_name(jieba.DEFAULT_DICT_NAME)
    return cached("jieba-dictionary", source, lambda: build(source))


def build(source: Path) -> WordTable:
    """The table of a jieba dictionary file (module doc): keys FREQ's, columns `count` and `tag`."""
    trie = marisa_trie.Trie(word[:end] for word, _, _ in _lines(source) for end in range(1, len(word) + 1))
    counts, tags = zeros("I", len(trie)), array("B", bytes([NO_TAG]) * len(trie))
    names: dict[str, int] = {}
    total = 0
    for word, count, tag in _lines(source):
        number = trie[word]
        counts[number] = int(count)
        total += int(count)
        tags[number] = names.setdefault(tag, len(names))
    if len(names) > NO_TAG:
        raise ValueError(f"{source} has {len(names)} tags; the tag column holds {NO_TAG}")
    return WordTable(trie, {"count": counts, "tag": tags}, {"total": total, "tags": list(names)})


def _lines(source: Path) -> Iterator[list[str]]:
    with source.open("rb") as lines:
        for line in lines:
            yield line.strip().decode("utf-8").split(" ")


@cache
def _segmenter() -> Any:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    words = table()
    tokenizer = jieba.Tokenizer()
    tokenizer.FREQ = Column(words, "count")
    tokenizer.total = words.meta["total"]
    tokenizer.initialized = True
    return tokenizer


@cache
def _tagger() -> Any:
    import jieba

    segmenter = _segmenter()
    shipped, jieba.dt.dictionary = jieba.dt.dictionary, os.devnull  # importing jieba.posseg reads no dict.txt
    try:
        import jieba.posseg
    finally:
        jieba.dt.dictionary = shipped
    jieba.posseg.dt.tokenizer = segmenter
    jieba.posseg.dt.word_tag_tab = Tags(table())
    return jieba.posseg.dt
