"""How informative a query term is for one user: their own term counts blended with a shipped background.

    p(t)      = min(MAX_SHARE, WORDS_PER_MEMORY * f(t))   the share of ordinary memories expected to hold t,
                f(t) = frequency per word of running text (data/background.tsv.gz, bench/make_background.py;
                UNSEEN_FREQUENCY for a word the table lacks: names, jargon, 小白, Grafana)
    df'(t)    = df_user(t) + PRIOR_MEMORIES * p(t)      the user's count, plus PRIOR_MEMORIES pseudo-memories
    N'        = N_user + PRIOR_MEMORIES
    rarity(t) = (IDF(df', N') - IDF_c) / (IDF(1, N') - IDF_c), clipped to [0, 1], where IDF_c is the IDF of a
                term held by COMMON_SHARE of the memories: 1 for a term held by one memory and rare elsewhere,
                about 0.4-0.5 for words common in all text (今天, 公司, 北京), 0 for "the" (weak on their own)

A weak word (a numeral, measure or time word ... by jieba's dictionary tags) counts at a fraction of its weight
(core/relevance.py), unless it is one of the user's own words: their store holds it more often than ordinary
text predicts for N' memories (df_user(t) > N' * p(t)). jieba tags 朵朵 as a measure word (朵朵白云); a store
that says 用户的女儿叫朵朵 holds it far more often than that, so it is a name there. 今天 (p = 0.5%) would have
to be in more than 53 memories of a small store, and in more than 0.5% of a large one, to count in full.

So a word in every memory of a six-memory store (咖啡) is still a word the message names (its background
share is small), a word common in all text (公司, 今天, user) is weak evidence even in a tiny store, and in
a store of 100,000 memories the user's own counts dominate. Counts are per user: one user's writes never
move another's rarities (nor, through `explain`, reveal them).
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Collection, Iterator, Mapping
from functools import cache
from pathlib import Path

import marisa_trie

from pocketmem.base.wordtable import Column, WordTable, cached, zeros
from pocketmem.core.text import word_share

PRIOR_MEMORIES = 10000.0
WORDS_PER_MEMORY = 20.0
MAX_SHARE = 0.5
UNSEEN_FREQUENCY = 1e-7
COMMON_SHARE = 0.3
_TABLE = Path(__file__).with_name("data") / "background.tsv.gz"
_WEAK = Path(__file__).with_name("data") / "weak_words.txt.gz"


@cache
def _background() -> Column:
    """The background frequencies as a word table (base/wordtable.py): 102,501 terms in about 1 MB, where a
    dict of them was 16 MB."""
    return Column(cached("background", _TABLE, _background_table), "frequency")


def _background_table() -> WordTable:
    trie = marisa_trie.Trie(term for term, _ in _background_rows())
    frequencies = zeros("d", len(trie))
    for term, frequency in _background_rows():
        frequencies[trie[term]] = frequency
    return WordTable(trie, {"frequency": frequencies})


def _background_rows() -> Iterator[tuple[str, float]]:
    with gzip.open(_TABLE, "rt", encoding="utf-8") as rows:
        for row in rows:
            term, _, frequency = row.rstrip("\n").partition("\t")
            yield term, float(frequency)


@cache
def _weak_words() -> frozenset[str]:
    with gzip.open(_WEAK, "rt", encoding="utf-8") as rows:
        return frozenset(row.strip() for row in rows if row.strip())


class Rarities(dict[str, float]):
    """The rarity of each query term the user has written, which of them are the user's own words, and which
    single characters the message uses as nouns of their own (text.single_nouns)."""

    own: frozenset[str] = frozenset()
    nouns: frozenset[str] = frozenset()


def is_weak_word(term: str, rarities: Mapping[str, float] | None = None) -> bool:
    """A Chinese word or character jieba's dictionary tags as a numeral, measure, time or place word, pronoun,
    adverb, preposition, conjunction, particle or interjection (一家, 一天, 今天, 最近): it says little about
    what a memory is about (data/weak_words.txt.gz, bench/make_background.py). Not when it is one of the
    user's own words (`own_word`: 朵朵 in a store that names a daughter 朵朵)."""
    return term in _weak_words() and term not in getattr(rarities, "own", ())


def own_word(term: str, user_count: int, user_total: int) -> bool:
    """Does the user's store hold `term` more often than ordinary text predicts for N' memories (module doc)?"""
    return user_count > (user_total + PRIOR_MEMORIES) * background_share(term)


def background_share(term: str) -> float:
    """The share of ordinary memories expected to hold `term`."""
    return min(MAX_SHARE, WORDS_PER_MEMORY * _background().get(term, UNSEEN_FREQUENCY))


def idf(document_count: float, total: float) -> float:
    """BM25's inverse document frequency (never negative)."""
    return math.log(1.0 + (total - document_count + 0.5) / (document_count + 0.5))


def rarity(term: str, user_count: int, user_total: int, share: float | None = None) -> float:
    """How strongly one occurrence of `term` marks a memory as about it, in [0, 1] (see module doc); `share`
    stands in for the background share where the query says what `term` is (`rarities`)."""
    total = user_total + PRIOR_MEMORIES
    share = background_share(term) if share is None else share
    count = min(total, user_count + PRIOR_MEMORIES * share)
    common = idf(COMMON_SHARE * total, total)
    return max(0.0, min(1.0, (idf(count, total) - common) / (idf(1.0, total) - common)))


def rarities(
    counts: dict[str, int],
    user_total: int,
    terms: list[str],
    names: Collection[str] = frozenset(),
    nouns: Collection[str] = frozenset(),
) -> Rarities:
    """The rarity of each term. A Latin word the message writes as a name (`names`: Go in Go 的泛型怎么用) has
    the background of a word the table lacks: how often English prose says `go` tells nothing about the
    language Go. A character the message uses as a noun of its own (`nouns`: 车 in 车该保养了) has the
    background of that word, not of every word holding the character (车站, 火车)."""

    def share(term: str) -> float | None:
        if term in names:
            return WORDS_PER_MEMORY * UNSEEN_FREQUENCY
        if term in nouns:
            return min(MAX_SHARE, WORDS_PER_MEMORY * word_share(term))
        return None

    out = Rarities({term: rarity(term, counts.get(term, 0), user_total, share(term)) for term in terms})
    out.own = frozenset(term for term in terms if own_word(term, counts.get(term, 0), user_total))
    out.nouns = frozenset(nouns)
    return out
