"""The rules SQL has to apply, taken from core/scoring.py so that they are written once.

Both backends bind these numbers as query parameters: the core rule (CORE_PERSISTENCE) and the decay of
importance, `scoring.time_coef`, which `time_coef_sql` writes once as SQL for both (the floor and the rate
bound as parameters, the days since last activity given by each backend). tests/test_store_policy.py holds
both eviction orders to scoring.py.
"""

from __future__ import annotations

import math

from pocketmem.core.scoring import CORE_PERSISTENCE, DECAY_RATE_PER_DAY, TIME_COEF_FLOOR
from pocketmem.store.sql.dialect import Dialect

__all__ = ["CORE_PERSISTENCE", "time_coef_sql"]


def time_coef_sql(d: Dialect, days: str) -> tuple[str, list[float]]:
    """`scoring.time_coef` of a non-core row as SQL over the expression `days`, and its parameters:
    max(TIME_COEF_FLOOR, exp(-DECAY_RATE_PER_DAY * (1 - persistence) * max(0, days))), written as
    exp(max(ln TIME_COEF_FLOOR, ...)): the same number, and the exponent never so low that PostgreSQL's exp
    underflows (an error there, not 0) for a memory dated centuries ago."""
    number = d.sql("cast({p} as double precision)")
    return (
        f"exp({d.greatest}({number}, -{number} * (1 - persistence) * {d.greatest}(0, {days})))",
        [math.log(TIME_COEF_FLOOR), DECAY_RATE_PER_DAY],
    )
