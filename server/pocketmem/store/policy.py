"""The rules SQL has to apply, taken from core/scoring.py so that they are written once.

Both backends bind these numbers as query parameters (the core rule, the decay floor and rate). The decay
of importance, `scoring.time_coef`, reaches SQL in one of two forms, both here: SQLite registers the Python
function itself (`sql_time_coef`, as `pm_time_coef`); PostgreSQL, which cannot call Python, evaluates
`pg_time_coef`, the same formula with the floor and the rate bound as parameters. tests/test_store_policy.py
holds both eviction orders to scoring.py.
"""

from __future__ import annotations

from pocketmem.core.scoring import CORE_PERSISTENCE, DECAY_RATE_PER_DAY, TIME_COEF_FLOOR, time_coef

__all__ = ["CORE_PERSISTENCE", "pg_time_coef", "sql_time_coef"]


def sql_time_coef(persistence: float | None, days: float | None) -> float | None:
    """`scoring.time_coef` for SQL (NULL in, NULL out)."""
    if persistence is None or days is None:
        return None
    return time_coef(persistence, days)


def pg_time_coef(days: str) -> tuple[str, list[float]]:
    """`scoring.time_coef` of a non-core row as PostgreSQL SQL over the expression `days`, and its parameters:
    max(TIME_COEF_FLOOR, exp(-DECAY_RATE_PER_DAY * (1 - persistence) * max(0, days)))."""
    return (
        f"greatest(%s::float8, exp(-%s::float8 * (1 - persistence) * greatest(0, {days})))",
        [TIME_COEF_FLOOR, DECAY_RATE_PER_DAY],
    )
