"""Importance scoring (docs/how-it-decides.md, "Importance"). Pure functions; no I/O.

    info_importance = 0.4*I + 0.2*E + 0.2*P + 0.2*J
    time_coef       = 1                                  if P == 1 (core)
                    = max(0.8, exp(-0.01 * (1 - P) * d)) otherwise, d = days since last_active_at (or created_at)
    importance      = info_importance * time_coef

A memory is core when P == 1 (`is_core`); a todo, episode or context is short-lived and never core
(`SHORT_LIVED`, `may_be_core`): review does not promote one, and a rescore that would make one core is refused.
An episode lasts POCKETMEM_EPISODE_DAYS unless its writer gave it an expires_at; no other category expires by
itself (`lifetime_end`).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from pocketmem.base.models import Category, Memory, Scores

INFO_WEIGHT = 0.4
EMOTION_WEIGHT = 0.2
PERSISTENCE_WEIGHT = 0.2
JUDGE_WEIGHT = 0.2
DECAY_RATE_PER_DAY = 0.01
TIME_COEF_FLOOR = 0.8
CORE_PERSISTENCE = 1.0

# E, I, P, J used when the caller leaves a score out. P < 1 everywhere: core is always a decision.
CATEGORY_DEFAULTS: dict[Category, Scores] = {
    Category.preference: Scores(emotion=0.5, info=0.8, persistence=0.8, judge=0.9),
    Category.fact: Scores(emotion=0.3, info=0.8, persistence=0.7, judge=0.8),
    Category.lesson: Scores(emotion=0.6, info=0.9, persistence=0.8, judge=0.85),
    Category.goal: Scores(emotion=0.4, info=0.7, persistence=0.5, judge=0.7),
    Category.person: Scores(emotion=0.4, info=0.8, persistence=0.8, judge=0.8),
    Category.todo: Scores(emotion=0.3, info=0.7, persistence=0.3, judge=0.7),
    Category.event: Scores(emotion=0.5, info=0.6, persistence=0.3, judge=0.6),
    Category.episode: Scores(emotion=0.3, info=0.5, persistence=0.1, judge=0.4),
    Category.context: Scores(emotion=0.2, info=0.4, persistence=0.1, judge=0.4),
    Category.project: Scores(emotion=0.3, info=0.8, persistence=0.5, judge=0.7),
}


def fill_scores(category: Category, given: dict[str, float | None] | None) -> Scores:
    """The caller's scores with the category's defaults for the ones left out."""
    base = CATEGORY_DEFAULTS[category].model_dump()
    for key, value in (given or {}).items():
        if value is not None:
            base[key] = float(value)
    return Scores(**base)


def info_importance(scores: Scores) -> float:
    return (
        INFO_WEIGHT * scores.info
        + EMOTION_WEIGHT * scores.emotion
        + PERSISTENCE_WEIGHT * scores.persistence
        + JUDGE_WEIGHT * scores.judge
    )


def is_core(scores: Scores) -> bool:
    return scores.persistence >= CORE_PERSISTENCE


SHORT_LIVED = frozenset({Category.todo, Category.episode, Category.context})


def may_be_core(category: Category) -> bool:
    """Whether a memory of this category may be core: a todo, episode or context is short-lived, never core."""
    return category not in SHORT_LIVED


def lifetime_end(category: Category, start: datetime, episode_days: int) -> datetime | None:
    """When a memory of `category` that starts to count at `start` expires by its category's rule: an episode (a
    conversation's summary) `episode_days` later; any other category never (None)."""
    return start + timedelta(days=episode_days) if category == Category.episode else None


def time_coef(persistence: float, days: float) -> float:
    if persistence >= CORE_PERSISTENCE:
        return 1.0
    return max(TIME_COEF_FLOOR, math.exp(-DECAY_RATE_PER_DAY * (1.0 - persistence) * max(0.0, days)))


def days_between(earlier: datetime, later: datetime) -> float:
    return (later - earlier).total_seconds() / 86400.0


def importance(scores: Scores, last_active: datetime, now: datetime) -> tuple[float, float, float]:
    """(info_importance, time_coef, importance) for a memory last active at `last_active`."""
    info = info_importance(scores)
    coef = time_coef(scores.persistence, days_between(last_active, now))
    return info, coef, info * coef


def importance_now(memory: Memory, now: datetime) -> float:
    """A memory's importance at `now`: decayed from its last activity (or its creation, if never used)."""
    return importance(memory.scores, memory.last_active_at or memory.created_at, now)[2]
