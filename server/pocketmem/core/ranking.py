"""Ranking of recall candidates. Pure: numbers in, ordered hits out.

For each candidate memory:

    semantic  = the cosine similarity on the embedder's calibrated scale (similarity.Scale):
                0 for what unrelated texts score, PARAPHRASE_SCORE for a typical paraphrase, capped at 1
    evidence  = relevance.Evidence: strongest matched term's rarity, matched rarity sum, coverage of the
                message's own terms, semantic, memory length (rarity per user: core.termstats)
    relevance = relevance.probability(evidence)        (a fitted logistic model) -> must reach the threshold
    keyword   = matched / (matched + relevance.MATCHED_SATURATION)
    freshness = exp(-age_days / FRESHNESS_DAYS), age from valid_from
    importance = the memory's current importance (scoring.py)

    score     = w_sem * semantic + w_kw * keyword + w_fresh * freshness + w_imp * importance
                (x OUTDATED_FACTOR for superseded memories, shown only with include_history)

Questions about the past (timeexpr.py: 上次…什么时候, "what did we talk about last week"):
episodes and events get TEMPORAL_BONUS, and those dated inside a named window (上周, 3天前) are
relevant by their date alone, as are every memory of a named day and the todos due in a window asked about
(candidates.py chooses them).

Relevance decides *whether* a memory is recalled (so a fresh, important but unrelated memory
is not); the score decides the order (so among relevant ones the newer fact wins).

Unlinked contradictions (the agent forgot `supersedes`): when two recalled memories say nearly the
same thing (calibrated similarity >= SHADOW_SIMILARITY, or the same category with the same query
terms matched, Jaccard >= SHADOW_OVERLAP), the older one's score is multiplied by SHADOW_FACTOR
(`shadow_older`), so the newer statement comes first. Both stay recallable.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from pocketmem.base.models import Category, Memory, Status
from pocketmem.core import relevance as model
from pocketmem.core.scoring import importance
from pocketmem.core.similarity import Scale

KEYWORD_SATURATION = 2.0
TEMPORAL_BONUS = 0.2
WINDOW_BONUS = 0.15
SHADOW_SIMILARITY = 0.45
SHADOW_OVERLAP = 0.5
SHADOW_FACTOR = 0.8
TIMED_CATEGORIES = frozenset({Category.episode, Category.event})
COVERAGE_WEIGHT = 0.2
FRESHNESS_DAYS = 30.0
OUTDATED_FACTOR = 0.7


@dataclass(frozen=True)
class Weights:
    semantic: float
    keyword: float
    freshness: float
    importance: float


@dataclass(frozen=True)
class Candidate:
    memory: Memory
    cosine: float | None
    terms: frozenset[str]
    in_window: bool = False  # dated inside the window the query names (上周, 3天前)
    evidence: model.Evidence | None = None  # computed by recall (message terms, best of two query vectors)


@dataclass(frozen=True)
class Ranked:
    memory: Memory
    score: float
    relevance: float
    semantic: float
    keyword: float
    freshness: float
    importance: float
    matched: frozenset[str] = frozenset()  # query terms found in the memory
    earlier: bool = False  # a newer memory states a changed value of the same fact (service/topics.py)

    @property
    def outdated(self) -> bool:
        return self.memory.status == Status.superseded or self.earlier


def idf(document_count: int, total: int) -> float:
    """BM25's inverse document frequency (never negative)."""
    return math.log(1.0 + (total - document_count + 0.5) / (document_count + 0.5))


def rarity(document_count: int, total: int) -> float:
    """IDF scaled so a term found in exactly one memory weighs 1, whatever the store's size."""
    return idf(document_count, total) / idf(1, max(total, 1))


def semantic_score(cosine: float | None, scale: Scale) -> float:
    if cosine is None or math.isnan(cosine):
        return 0.0
    return scale.score(cosine)


def keyword_score(query: Mapping[str, float], memory_terms: Iterable[str], rarities: Mapping[str, float]) -> float:
    """`rarities` holds only terms found in the store: a query bigram that spans two words (班路) matches
    nothing anywhere and must not dilute coverage."""
    total = sum(weight * rarities.get(term, 0.0) for term, weight in query.items())
    if total <= 0:
        return 0.0
    present = set(memory_terms)
    matched = sum(weight * rarities.get(term, 0.0) for term, weight in query.items() if term in present)
    if matched <= 0:
        return 0.0
    saturation = matched / (matched + KEYWORD_SATURATION)
    coverage = matched / total
    return saturation * ((1 - COVERAGE_WEIGHT) + COVERAGE_WEIGHT * coverage)


def freshness(age_days: float) -> float:
    return math.exp(-max(0.0, age_days) / FRESHNESS_DAYS)


def relevance(sem: float, kw: float) -> float:
    """Either kind of evidence can make a memory relevant; both together make it more so (noisy-or)."""
    return 1.0 - (1.0 - sem) * (1.0 - kw)


def rank(
    candidates: Sequence[Candidate],
    query: Mapping[str, float],
    rarities: Mapping[str, float],
    *,
    scale: Scale,
    weights: Weights,
    threshold: float,
    now: datetime,
    temporal: bool = False,
) -> list[Ranked]:
    """Score every candidate, keep those whose relevance reaches `threshold`, best first."""
    out: list[Ranked] = []
    for candidate in candidates:
        memory = candidate.memory
        ev = candidate.evidence or model.evidence(
            query, query, candidate.terms, rarities, semantic_score(candidate.cosine, scale)
        )
        sem, kw, rel = ev.semantic, ev.keyword, model.probability(ev)
        timed = temporal and memory.category in TIMED_CATEGORIES
        dated_match = candidate.in_window  # service/candidates.py decides what its date alone makes relevant
        if rel < threshold and not dated_match:
            continue
        age = (now - memory.valid_from).total_seconds() / 86400.0
        fresh = freshness(age)
        imp = importance(memory.scores, memory.last_active_at or memory.created_at, now)[2]
        score = weights.semantic * sem + weights.keyword * kw + weights.freshness * fresh + weights.importance * imp
        if timed:
            score += TEMPORAL_BONUS + (WINDOW_BONUS if dated_match else 0.0)
        if memory.status == Status.superseded:
            score *= OUTDATED_FACTOR
        out.append(Ranked(memory, score, rel, sem, kw, fresh, imp, candidate.terms.intersection(query)))
    out.sort(key=lambda r: (r.score, r.memory.valid_from), reverse=True)
    return out


def same_topic(a: Ranked, b: Ranked, pair_similarity: Mapping[tuple[str, str], float], scale: Scale) -> bool:
    """Do two recalled memories say nearly the same thing? Similar vectors, or (same category and) the
    same query terms matched in both — e.g. 博客 in 用户的博客用 Hexo… and in its later replacement."""
    ids = (a.memory.id, b.memory.id)
    cos = pair_similarity.get(ids, pair_similarity.get(ids[::-1]))
    if cos is not None and semantic_score(cos, scale) >= SHADOW_SIMILARITY:
        return True
    if a.memory.category != b.memory.category or not a.matched or not b.matched:
        return False
    overlap = len(a.matched & b.matched) / len(a.matched | b.matched)
    return overlap >= SHADOW_OVERLAP


def shadow_older(
    ranked: Sequence[Ranked], pair_similarity: Mapping[tuple[str, str], float], scale: Scale
) -> list[Ranked]:
    """Demote a memory when a newer recalled memory says nearly the same thing; re-sort."""
    out = list(ranked)
    for i, older in enumerate(out):
        for newer in ranked:
            if newer.memory.valid_from <= older.memory.valid_from:
                continue
            if same_topic(older, newer, pair_similarity, scale):
                out[i] = replace(older, score=older.score * SHADOW_FACTOR)
                break
    out.sort(key=lambda r: (r.score, r.memory.valid_from), reverse=True)
    return out
