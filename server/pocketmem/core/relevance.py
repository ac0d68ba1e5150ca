"""Whether a memory is relevant to a message: a small fitted decision over lexical and semantic evidence.

For a candidate memory, with rarity(t) from core.termstats (per user, smoothed by a background frequency)
and w(t) the query term's weight (message words and agent keywords 1.0, the characters of a two-character
word and context-line terms 0.5), counted as evidence by `QueryWords` (the query's side, once per query) and
`Weighing.evidence` (each memory):

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

    words     = sigmoid(B0 + B_STRONGEST*strongest + B_MATCHED*matched + B_COVERAGE*coverage
                        + B_SEMANTIC*semantic + B_LENGTH*length)
    meaning   = sigmoid(M0 + M1*semantic)            (embedders that capture meaning only: `Model.meaning_slope`)
    relevance = 1 - (1 - words) * (1 - meaning)      either kind of evidence can make a memory relevant

One rule sits beside the fitted words part: a memory that holds every word of the message (`complete`: each
term of weight 1, characters standing in for words aside), together distinctive enough
(matched >= FULL_MATCH_RARITY), has words at least FULL_MATCH_RELEVANCE; so does a memory that holds every
whole word of every keyword the agent sent, together at least FULL_MATCH_RARITY (the agent named what the
message is about: `What is my cat called?` with ["猫"]), and so does a memory that holds every whole word of
one keyword the agent inferred beyond the message's own words, at least FULL_MATCH_RARITY by itself (the agent
named a thing the message involves: `晚饭想吃火锅，有什么推荐的吗` with ["香菜", "火锅"], where 火锅 only repeats
the message and the user never wrote it; a keyword that repeats the message is its topic, and the fitted part
weighs it as it weighs the message). A follow-up that names nothing the store holds (no word of the message
naming something the store holds with at least FULL_MATCH_RARITY by the weights above, a single character only as
a noun: 那我能吃吗, 好的就按你说的办, can we afford it?) is about its earlier lines: they weigh as the message
does, as one more side of the evidence (`Weighing`, `recent`, `follows_up`). A one-word message (成都, 香菜) names
what it wants, and in a large store the one memory holding a person, an action and a thing together is the
answer even when each word alone is common; the evaluation sets, made of long messages over a few hundred
memories, cannot teach the model either.

A memory is recalled when relevance reaches the bar (service/fallback.threshold: Settings.relevance_threshold,
0.40; a core memory's bar lower by `core_lift` in logit). Every coefficient on evidence is >= 0 and each
lexical feature is the larger of the message's own (`base`) and the whole query's, so adding keywords never
lowers relevance: what recall returns with keywords includes what it returns without them.

Two models: LEXICAL for the built-in `hash` embedder (its similarity is shared wording) and NEURAL for every
embedder that captures meaning. The words' weights were fitted by bench/fit_relevance.py on
bench/data/eval_a.json alone (candidates of every query with the hash embedder, with and without agent
keywords; gold memories positive, other candidates negative, stale versions of changed facts left out), by
logistic regression with non-negative evidence weights; LEXICAL's B0 and WEAK_WORD_FACTOR by its earlier
objective on eval_a. NEURAL keeps those weights; its B0, the meaning part (M0, M1) and core_lift were chosen
on eval_a with the `use` encoder by the cost of what recall injects (a miss 1, a missed core memory 5, an
unrelated line 0.1, with the one-sided 90% Clopper-Pearson lower bound of eval_a's negative precision >= 0.85
in each mode: eval_a has only 28 questions with no answer); eval_b to eval_e were not used for them. The
inferred-keyword form of the full-match rule was chosen among three on eval_a to eval_g and judged once on the
held-out eval_h. Results: docs/benchmarks.md; the rule in words, its cost and each constant's source:
docs/ranking.md, section 3.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from pocketmem.core.termstats import is_weak_word
from pocketmem.core.text import is_cjk_char

MATCHED_SATURATION = 1.0
FULL_MATCH_RARITY = 0.4
WEAK_WORD_FACTOR = 0.3
FULL_MATCH_RELEVANCE = 0.5


@dataclass(frozen=True)
class Evidence:
    strongest: float = 0.0
    matched: float = 0.0
    coverage: float = 0.0
    semantic: float = 0.0
    length: float = 0.0
    complete: bool = False  # the memory holds every word of the message, or every agent keyword (not fitted)

    def features(self) -> tuple[float, ...]:
        return (self.strongest, self.matched, self.coverage, self.semantic, self.length)

    @property
    def keyword(self) -> float:
        """The keyword part of the ranking score, in [0, 1)."""
        return self.matched / (self.matched + MATCHED_SATURATION)


@dataclass(frozen=True)
class Model:
    """The fitted decision for one kind of embedder.

    words    = sigmoid(b0 + strongest·Strongest + matched·Matched + coverage·Coverage + semantic·Semantic
                       + length·Length)                      (at least FULL_MATCH_RELEVANCE on a full match)
    meaning  = sigmoid(meaning_b0 + meaning_slope·Semantic)   (embedders that capture meaning; else absent)
    relevance = 1 − (1 − words)·(1 − meaning)                 either kind of evidence can make a memory relevant

    A core memory's bar is the threshold's logit lowered by `core_lift` (fallback.threshold)."""

    b0: float
    strongest: float
    matched: float
    coverage: float
    semantic: float
    length: float
    meaning_b0: float = 0.0
    meaning_slope: float = 0.0  # 0: no meaning part (the built-in lexical embedder)
    core_lift: float = 0.0

    def probability(self, ev: Evidence) -> float:
        z = (
            self.b0
            + self.strongest * ev.strongest
            + self.matched * ev.matched
            + self.coverage * ev.coverage
            + self.semantic * ev.semantic
            + self.length * ev.length
        )
        p = _sigmoid(z)
        if ev.complete and ev.matched >= FULL_MATCH_RARITY:
            p = max(p, FULL_MATCH_RELEVANCE)
        if self.meaning_slope > 0.0:
            p = 1.0 - (1.0 - p) * (1.0 - _sigmoid(self.meaning_b0 + self.meaning_slope * ev.semantic))
        return p

    def semantic_needed(self, bar: float) -> float:
        """The semantic score with which a memory sharing no word with the query reaches `bar` (a lower bound:
        its length only lowers its relevance); infinite when meaning alone never can."""
        if bar <= 0.0:
            return 0.0
        if bar >= 1.0:
            return math.inf
        if self.meaning_slope <= 0.0:
            return (_logit(bar) - self.b0) / self.semantic if self.semantic > 0.0 else math.inf
        words = _sigmoid(self.b0 + self.semantic)  # the most the words part gives a memory sharing no word
        needed = 1.0 - (1.0 - bar) / (1.0 - words)
        return 0.0 if needed <= 0.0 else max(0.0, (_logit(needed) - self.meaning_b0) / self.meaning_slope)


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


# The built-in embedder (`hash`): its similarity is shared wording, so the words decide.
LEXICAL = Model(b0=-2.475, strongest=1.204, matched=2.355, coverage=0.672, semantic=0.134, length=-0.364)
# Embedders that capture meaning (`use`, local, OpenAI-compatible): the words part keeps LEXICAL's weights with
# its own intercept, and the calibrated similarity is evidence of its own (chosen on eval_a by cost with `use`).
NEURAL = replace(LEXICAL, b0=-3.5, meaning_b0=-2.75, meaning_slope=5.0, core_lift=0.5)


def model_for(meaning: bool) -> Model:
    """The decision for the embedder in use; `meaning` is False for the built-in lexical embedder, and on a
    path where no similarity could be computed (the words decide alone there)."""
    return NEURAL if meaning else LEXICAL


@lru_cache(maxsize=64)
def _parents_of(words: tuple[str, ...]) -> dict[str, list[str]]:
    """The query's two-character Chinese words that each single character of the query belongs to."""
    parents: dict[str, list[str]] = {}
    written = set(words)
    for word in words:
        if len(word) == 2 and all(is_cjk_char(ch) for ch in word):
            for ch in word:
                if ch in written:
                    parents.setdefault(ch, []).append(word)
    return parents


class QueryWords:
    """The query's side of the lexical evidence, worked out once per query: its weights (weak words at
    WEAK_WORD_FACTOR), the two-character words each character may stand in for, and the message's terms that
    coverage counts. `weights` and `lexical` then weigh one memory against it."""

    def __init__(self, query: Mapping[str, float], message: Iterable[str], rarities: Mapping[str, float]) -> None:
        self.rarities = rarities
        self.parents = _parents_of(tuple(query))
        factor = {t: WEAK_WORD_FACTOR if is_weak_word(t, rarities) else 1.0 for t in query}
        self.base = {t: w * factor[t] for t, w in query.items()}
        # A character stands in for a word the user never wrote, at the word's weight (times its own factor).
        self.stand_ins = {
            ch: [(w, query[w] * factor[ch]) for w in words if w not in rarities]
            for ch, words in self.parents.items()
        }
        self.message_terms = [
            t
            for t in message
            if t in query and t in rarities and not any(word in rarities for word in self.parents.get(t, ()))
        ]

    def weights(self, present: Collection[str]) -> dict[str, float]:
        """The query's weights as evidence against a memory holding `present`: when the user never wrote a
        two-character query word but the memory holds both its characters, they stand in for it and take the
        word's weight (jieba reads 我的猫叫什么 as 猫叫; the memory says 猫，叫小白); one shared character of an
        unwritten word (新开 / 开发) stays at its own weight. A weak word (termstats.is_weak_word: 一家, 一天,
        今天) counts at WEAK_WORD_FACTOR."""
        weights = self.base
        for ch, options in self.stand_ins.items():
            standing_in = [value for word, value in options if all(c in present for c in word)]
            if standing_in:
                weights = dict(weights) if weights is self.base else weights
                weights[ch] = max(weights[ch], *standing_in)
        return weights

    def lexical(self, present: Collection[str]) -> tuple[float, float, float]:
        """(strongest, matched, coverage) of a memory's terms against the query's weighted terms.

        A word and its own characters are one piece of evidence: when the memory holds the word, its characters
        add nothing (公司 is not 公司 + 公 + 司), and coverage is over words the user has written."""
        weights = self.weights(present)
        strongest = matched = 0.0
        for term, weight in weights.items():
            if term in present and not any(word in present for word in self.parents.get(term, ())):
                value = weight * self.rarities.get(term, 0.0)
                strongest = max(strongest, value)
                matched += value
        whole = sum(weights[t] * self.rarities.get(t, 0.0) for t in self.message_terms)
        found = sum(weights[t] * self.rarities.get(t, 0.0) for t in self.message_terms if t in present)
        return strongest, matched, (found / whole if whole > 0 else 0.0)

    def naming(self, term: str) -> float:
        """How strongly the query's `term` names something the user's store holds: its weight as evidence (a weak
        word, 最近, at WEAK_WORD_FACTOR; a character standing in for a word the user never wrote at that word's)
        times its rarity. A single Chinese character names a thing only as a noun of its own (车 in 车该保养了:
        termstats.Rarities.nouns) or standing in for a word; not as a verb or function character (办, 吃, 按) nor
        as a character of a word the store holds (近 of 最近)."""
        standing_in = [value for _, value in self.stand_ins.get(term, ())]
        if standing_in:
            weight = max(self.base[term], *standing_in)
        elif len(term) == 1 and is_cjk_char(term) and term not in getattr(self.rarities, "nouns", ()):
            return 0.0
        else:
            weight = self.base.get(term, 0.0)
        return weight * self.rarities.get(term, 0.0)


class Weighing:
    """A query's evidence against each memory (`evidence`), its side computed once: `keywords` are the words
    of each agent keyword (keyword_words), `base` the query's terms without them. Keywords only add evidence:
    each lexical feature is the larger of the message's own and the whole query's."""

    def __init__(
        self,
        query: Mapping[str, float],
        message: Iterable[str],
        rarities: Mapping[str, float],
        keywords: Sequence[Sequence[str]] = (),
        base: Mapping[str, float] | None = None,
        recent: Mapping[str, float] | None = None,
    ) -> None:
        message = list(message)
        self.sides = [QueryWords(query, message, rarities)]
        if base is not None and base != query:
            self.sides.append(QueryWords(base, message, rarities))
        if recent and follows_up(self.sides[-1], message):  # what it is about is in the earlier lines
            follow = dict(base if base is not None else query)
            follow.update({t: max(w, follow.get(t, 0.0)) for t, w in recent.items()})
            self.sides.append(QueryWords(follow, [*message, *recent], rarities))
        self.words = [t for t in message if query.get(t, 0.0) >= 1.0]
        self.named = {t for words_of in keywords for t in words_of}
        self.named_rarity = sum(rarities.get(t, 0.0) for t in self.named)
        # Each keyword the agent inferred beyond the message's own words (香菜 for 晚饭想吃火锅), its words
        # together at least FULL_MATCH_RARITY: the thing the agent says the message involves.
        said = set(message)
        self.inferred = [
            frozenset(words_of)
            for words_of in keywords
            if words_of
            and not set(words_of) <= said
            and sum(rarities.get(t, 0.0) for t in words_of) >= FULL_MATCH_RARITY
        ]

    def evidence(self, memory_terms: Iterable[str], semantic: float) -> Evidence:
        terms = frozenset(memory_terms)
        strongest, matched, coverage = self.sides[0].lexical(terms)
        for side in self.sides[1:]:
            own = side.lexical(terms)
            strongest, matched, coverage = max(strongest, own[0]), max(matched, own[1]), max(coverage, own[2])
        complete = bool(self.words) and all(t in terms for t in self.words)
        if self.named and self.named <= terms and self.named_rarity >= FULL_MATCH_RARITY:
            complete = True  # the memory holds every keyword the agent named: what the message is about
        elif any(words_of <= terms for words_of in self.inferred):
            complete = True  # the memory holds a thing the agent inferred the message involves
        return Evidence(strongest, matched, coverage, semantic, math.log1p(len(terms)), complete)


def follows_up(words: QueryWords, message: Iterable[str]) -> bool:
    """A follow-up names nothing the store holds (那我能吃吗, 好的就按你说的办, 它最近老掉毛, can we afford it?): no
    term of the message names something the store holds with at least FULL_MATCH_RARITY (`QueryWords.naming`, by
    the weights the decision gives the message and its earlier lines, without the agent's keywords: `words`). Its
    earlier lines then weigh as the message does (`Weighing`)."""
    return max((words.naming(t) for t in message), default=0.0) < FULL_MATCH_RARITY


def keyword_words(weighted: Iterable[Mapping[str, float]]) -> list[list[str]]:
    """The whole words (weight 1, not the characters standing beside them) of each agent keyword."""
    return [[t for t, w in terms.items() if w >= 1.0] for terms in weighted]
