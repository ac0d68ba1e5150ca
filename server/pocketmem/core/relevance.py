"""Whether a memory is relevant to a message: a small logistic model over lexical and semantic evidence.

For a candidate memory, with rarity(t) from core.termstats (per user, smoothed by a background frequency)
and w(t) the query term's weight (message words and agent keywords 1.0, the characters of a two-character
word and context-line terms 0.5), counted as evidence by `counted_weights` and `lexical`:

    - a word and its own characters are one piece of evidence: when the memory holds 公司, its 公 and 司 add
      nothing more (several pieces of one common word must not add up to relevance);
    - when the user never wrote a two-character query word and the memory holds both its characters, they take
      that word's weight: jieba reads 我的猫叫什么 as 猫叫, the memory says 猫，叫小白;
    - a weak word (termstats.is_weak_word: numerals, measure, time and place words, pronouns, adverbs ... by
      jieba's dictionary tags: 一家, 一天, 今天, 最近) counts at WEAK_WORD_FACTOR of its weight.

    strongest = max  w(t) * rarity(t)   over the query terms the memory holds (content or its keywords)
    matched   = sum  w(t) * rarity(t)   over the same terms
    coverage  = the message's own matched rarity / the rarity of the message's terms found in the user's store
                (agent keywords are left out here, so sending more keywords can never dilute it, nor can a
                word the user never wrote)
    semantic  = the calibrated embedding similarity (ranking.semantic_score), 0 when no vector
    length    = ln(1 + number of distinct index terms of the memory)

    relevance = sigmoid(B0 + B_STRONGEST*strongest + B_MATCHED*matched + B_COVERAGE*coverage
                        + B_SEMANTIC*semantic + B_LENGTH*length)

One rule sits beside the fitted model: a memory that holds every word of the message (`complete`: each
term of weight 1, characters standing in for words aside), together distinctive enough
(matched >= FULL_MATCH_RARITY), is relevant, with
relevance at least FULL_MATCH_RELEVANCE; so is a memory that holds every whole word of every keyword the
agent sent, together at least FULL_MATCH_RARITY (the agent named what the message is about: `What is my
cat called?` with ["猫"]). A one-word message (成都, 香菜) names what it wants, and in a large
store the one memory holding a person, an action and a thing together is the answer even when each word
alone is common; the evaluation sets, made of long messages over a few hundred memories, cannot teach
the model either.

With an embedder that captures meaning (local, OpenAI-compatible), its calibrated similarity is combined
with the model's answer as a noisy-or, 1 - (1 - relevance) * (1 - semantic): a paraphrase with no shared
word is found by meaning alone.

A memory is recalled when relevance >= Settings.relevance_threshold (0.40). Every coefficient on
evidence is >= 0 and each lexical feature is the larger of the message's own (`base`) and the whole
query's, so adding keywords never lowers relevance: what recall returns with keywords includes what it
returns without them.

The coefficients were fitted by bench/fit_relevance.py on bench/data/eval_a.json alone (candidates of
every query, with and without agent keywords; gold memories positive, other candidates negative, the
stale versions of changed facts left out), by logistic regression with non-negative evidence weights.
The operating point (B0, and WEAK_WORD_FACTOR) was then chosen on eval_a by an objective weighing both
goals: first the smallest of hit@3 with keywords / 0.92 and negative precision / 0.85 with and without
keywords, then hit@3 + negative precision summed over both modes, each averaged over neighbouring cuts
(B0 within 0.05). eval_b, eval_c and the small-store scenarios were never used.
Results: docs/benchmarks.md; the rule in words: docs/ranking.md.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from pocketmem.core.termstats import is_weak_word
from pocketmem.core.text import is_cjk_char

B0 = -2.475
B_STRONGEST = 1.204
B_MATCHED = 2.355
B_COVERAGE = 0.672
B_SEMANTIC = 0.134
B_LENGTH = -0.364
MATCHED_SATURATION = 1.0
FULL_MATCH_RARITY = 0.4
WEAK_WORD_FACTOR = 0.3
FULL_MATCH_RELEVANCE = 0.5  # keyword evidence for ordering: matched / (matched + this)


@dataclass(frozen=True)
class Evidence:
    strongest: float = 0.0
    matched: float = 0.0
    coverage: float = 0.0
    semantic: float = 0.0
    length: float = 0.0
    complete: bool = False  # the memory holds every word of the message, or every agent keyword (not fitted)
    meaning: float = 0.0  # semantic score of an embedder that captures meaning (0 for the lexical built-in)

    def features(self) -> tuple[float, ...]:
        return (self.strongest, self.matched, self.coverage, self.semantic, self.length)

    @property
    def keyword(self) -> float:
        """The keyword part of the ranking score, in [0, 1)."""
        return self.matched / (self.matched + MATCHED_SATURATION)


def _parents(query: Mapping[str, float]) -> dict[str, list[str]]:
    """The query's two-character Chinese words that each single character of the query belongs to (read-only:
    shared by every memory weighed against the same query, so computed once per query)."""
    return _parents_of(tuple(query))


@lru_cache(maxsize=64)
def _parents_of(words: tuple[str, ...]) -> dict[str, list[str]]:
    parents: dict[str, list[str]] = {}
    written = set(words)
    for word in words:
        if len(word) == 2 and all(is_cjk_char(ch) for ch in word):
            for ch in word:
                if ch in written:
                    parents.setdefault(ch, []).append(word)
    return parents


def counted_weights(
    query: Mapping[str, float], rarities: Mapping[str, float], present: Collection[str]
) -> dict[str, float]:
    """The query's weights as evidence against a memory holding `present`: when the user never wrote a
    two-character query word but the memory holds both its characters, they stand in for it and take the
    word's weight (jieba reads 我的猫叫什么 as 猫叫; the memory says 猫，叫小白); one shared character of an
    unwritten word (新开 / 开发) stays at its own weight. A weak word (termstats.is_weak_word: 一家, 一天,
    今天) counts at WEAK_WORD_FACTOR."""
    weights = dict(query)
    for ch, words in _parents(query).items():
        standing_in = [query[w] for w in words if w not in rarities and all(c in present for c in w)]
        if standing_in:
            weights[ch] = max(weights[ch], *standing_in)
    for term in weights:
        if is_weak_word(term):
            weights[term] *= WEAK_WORD_FACTOR
    return weights


def lexical(
    query: Mapping[str, float],
    message: Iterable[str],
    memory_terms: Iterable[str],
    rarities: Mapping[str, float],
) -> tuple[float, float, float]:
    """(strongest, matched, coverage) of a memory's terms against the query's weighted terms.

    A word and its own characters are one piece of evidence: when the memory holds the word, its characters
    add nothing (公司 is not 公司 + 公 + 司), and coverage is over words the user has written."""
    present = set(memory_terms)
    parents = _parents(query)
    weights = counted_weights(query, rarities, present)
    strongest = matched = 0.0
    for term, weight in weights.items():
        if term in present and not any(word in present for word in parents.get(term, ())):
            value = weight * rarities.get(term, 0.0)
            strongest = max(strongest, value)
            matched += value
    message_terms = [
        t for t in message
        if t in query and t in rarities and not any(word in rarities for word in parents.get(t, ()))
    ]
    whole = sum(weights[t] * rarities.get(t, 0.0) for t in message_terms)
    found = sum(weights[t] * rarities.get(t, 0.0) for t in message_terms if t in present)
    return strongest, matched, (found / whole if whole > 0 else 0.0)


def evidence(
    query: Mapping[str, float],
    message: Iterable[str],
    memory_terms: Iterable[str],
    rarities: Mapping[str, float],
    semantic: float,
    meaning: bool = False,
    keywords: Sequence[Sequence[str]] = (),
    base: Mapping[str, float] | None = None,
) -> Evidence:
    """`meaning`: the embedder captures meaning (not lexical), so its similarity counts on its own too.
    `keywords`: the words of each agent keyword (keyword_words); `base`: the query's terms without them.
    Keywords only add evidence: each lexical feature is the larger of the message's own and the whole query's."""
    terms = frozenset(memory_terms)
    message = list(message)
    strongest, matched, coverage = lexical(query, message, terms, rarities)
    if base is not None and base != query:
        own = lexical(base, message, terms, rarities)
        strongest, matched, coverage = max(strongest, own[0]), max(matched, own[1]), max(coverage, own[2])
    words = [t for t in message if query.get(t, 0.0) >= 1.0]
    complete = bool(words) and all(t in terms for t in words)
    named = {t for words_of in keywords for t in words_of}
    if named and named <= terms and sum(rarities.get(t, 0.0) for t in named) >= FULL_MATCH_RARITY:
        complete = True  # the memory holds every keyword the agent named: what the message is about
    return Evidence(
        strongest, matched, coverage, semantic, math.log1p(len(terms)), complete, semantic if meaning else 0.0
    )


def keyword_words(weighted: Iterable[Mapping[str, float]]) -> list[list[str]]:
    """The whole words (weight 1, not the characters standing beside them) of each agent keyword."""
    return [[t for t, w in terms.items() if w >= 1.0] for terms in weighted]


def probability(ev: Evidence) -> float:
    z = (
        B0
        + B_STRONGEST * ev.strongest
        + B_MATCHED * ev.matched
        + B_COVERAGE * ev.coverage
        + B_SEMANTIC * ev.semantic
        + B_LENGTH * ev.length
    )
    p = 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))
    if ev.complete and ev.matched >= FULL_MATCH_RARITY:
        p = max(p, FULL_MATCH_RELEVANCE)
    # An embedder that captures meaning (not fitted here: eval_a was fitted with the lexical built-in) is
    # evidence of its own: either kind can make a memory relevant, both together more so (noisy-or).
    return 1.0 - (1.0 - p) * (1.0 - ev.meaning)
