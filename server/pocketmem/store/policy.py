"""The rules SQL has to apply, taken from core/scoring.py so that they are written once.

Both backends bind these numbers as query parameters (the core rule, the decay floor and rate); SQLite
also registers `time_coef` itself as the SQL function `pm_time_coef`, so its eviction order is computed
by the same Python function as every other importance.
"""

from __future__ import annotations

from pocketmem.core.scoring import CORE_PERSISTENCE, DECAY_RATE_PER_DAY, TIME_COEF_FLOOR, time_coef

__all__ = ["CORE_PERSISTENCE", "DECAY_RATE_PER_DAY", "TIME_COEF_FLOOR", "sql_time_coef"]


def sql_time_coef(persistence: float | None, days: float | None) -> float | None:
    """`scoring.time_coef` for SQL (NULL in, NULL out)."""
    if persistence is None or days is None:
        return None
    return time_coef(persistence, days)
