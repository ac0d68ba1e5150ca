"""Ranking of recall candidates. Pure: numbers in, ordered hits out.

For each candidate memory:

    semantic  = the cosine similarity on the embedder's calibrated scale (similarity.Scale):
                0 for what unrelated texts score, PARAPHRASE_SCORE for a typical paraphrase, capped at 1
    evidence  = relevance.Evidence: strongest matched term's rarity, matched rarity sum, coverage of the
                message's own terms, semantic, memory length (rarity per user: core.termstats)
    relevance = the fitted decision (core/relevance.py), computed once per candidate by service/recall/candidates.py,
                which also admits only the candidates that reach the bar
    keyword   = matched / (matched + relevance.MATCHED_SATURATION)
    freshness = exp(-age_days / FRESHNESS_DAYS), age from valid_from
    importance = the memory's current importance (scoring.py)

    score     = w_sem * semantic + w_kw * keyword + w_fresh * freshness + w_imp * importance
                (x OUTDATED_FACTOR for superseded memories, shown only with include_history)

Questions about the past (timeexpr.py: 上次…什么时候, "what did we talk about last week"):
episodes and events get TEMPORAL_BONUS, and those dated inside a named window (上周, 3天前) are
relevant by their date alone, as are every memory of a named day and the todos due in a window asked about
(candidates.py chooses them). A todo due inside the window an agenda question names (下周六有什么安排) gets the
same two bonuses, so one due on another day (这周六) that shares the words does not come first.

Relevance decides *whether* a memory is recalled (so a fresh, important but unrelated memory
is not); the score decides the order (so among relevant ones the newer fact wins).

Unlinked contradictions (the agent forgot `supersedes`): when two recalled memories say nearly the
same thing (calibrated similarity >= SHADOW_SIMILARITY, or the same category with the same query
terms matched, Jaccard >= SHADOW_OVERLAP), the older one's score is multiplied by SHADOW_FACTOR
(`shadow_older`), so the newer statement comes first. Both stay recallable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from pocketmem.base.models import Category, Memory, Status
from pocketmem.core.relevance import Evidence
from pocketmem.core.scoring import importance_now
from pocketmem.core.similarity import Scale

TEMPORAL_BONUS = 0.2
WINDOW_BONUS = 0.15
SHADOW_SIMILARITY = 0.45
SHADOW_OVERLAP = 0.5
SHADOW_FACTOR = 0.8
TIMED_CATEGORIES = frozenset({Category.episode, Category.event})
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
    in_window: bool  # dated inside the window the query names (上周, 3天前)
    evidence: Evidence  # message terms, best of two query vectors (service/recall/candidates.py)
    relevance: float  # the decision's answer on that evidence (core/relevance.py)


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
    earlier: bool = False  # a newer memory states a changed value of the same fact (service/recall/versions.py)

    @property
    def outdated(self) -> bool:
        return self.memory.status == Status.superseded or self.earlier


def semantic_score(cosine: float | None, scale: Scale) -> float:
    if cosine is None or math.isnan(cosine):
        return 0.0
    return scale.score(cosine)


def freshness(age_days: float) -> float:
    return math.exp(-max(0.0, age_days) / FRESHNESS_DAYS)


def rank(candidates: Sequence[Candidate], query: Mapping[str, float], *, weights: Weights, now: datetime,
         temporal: bool = False, agenda: bool = False) -> list[Ranked]:
    """Score every (admitted) candidate, best first. `temporal`: the query asks about the past; `agenda`: it asks
    what lies in the window it names; when it does not ask about the past (下周六有什么安排, not 上周六来了哪些人),
    a todo due inside the window is timed as an episode is."""
    out: list[Ranked] = []
    for candidate in candidates:
        memory, ev = candidate.memory, candidate.evidence
        timed = (temporal and memory.category in TIMED_CATEGORIES) or (
            agenda and not temporal and memory.category == Category.todo and candidate.in_window
        )
        age = (now - memory.valid_from).total_seconds() / 86400.0
        fresh = freshness(age)
        imp = importance_now(memory, now)
        score = (weights.semantic * ev.semantic + weights.keyword * ev.keyword + weights.freshness * fresh
                 + weights.importance * imp)
        if timed:
            score += TEMPORAL_BONUS + (WINDOW_BONUS if candidate.in_window else 0.0)
        if memory.status == Status.superseded:
            score *= OUTDATED_FACTOR
        out.append(Ranked(memory, score, candidate.relevance, ev.semantic, ev.keyword, fresh, imp,
                          candidate.terms.intersection(query)))
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
