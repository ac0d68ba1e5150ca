"""The core rule over rows an older release wrote: a todo, episode or context is short-lived and never core
(core/scoring.py, `may_be_core`), but releases before the rule stored some with persistence 1. Such a row was
listed among the core memories on every message, under the todos as well, and never expired or decayed.

`forbidden` finds them; `demote` gives each the persistence a new write of its category gets
(`scoring.CATEGORY_DEFAULTS`: todo 0.3, episode 0.1, context 0.1), its importance computed again from that, and
`updated_at` now (so sync carries the change rather than the library's older copy winning it back), with one
`rescored` event per memory naming what did it and the persistence before and after. From then on it decays and
expires as its category does. Written once for both backends over a driver connection (aiosqlite's or
psycopg's `execute`): each backend's migration runs it (SQLite m013, PostgreSQL pg009), and so does
`doctor --repair` for a row brought in later (an import of an old export).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pocketmem.base.models import Category, EventKind, Scores
from pocketmem.core.scoring import CATEGORY_DEFAULTS, CORE_PERSISTENCE, SHORT_LIVED, importance
from pocketmem.store.sql.dialect import Dialect, json_text

_SCORED = "id, user_id, category, emotion, info, judge, coalesce(last_active_at, created_at)"


def forbidden(d: Dialect) -> tuple[str, list[Any]]:
    """The condition on `memories` of the rows the core rule forbids, and its parameters."""
    categories, params = d.in_list("category", sorted(c.value for c in SHORT_LIVED))
    return f"{categories} and persistence >= {d.placeholder}", [*params, CORE_PERSISTENCE]


async def demote(conn: Any, d: Dialect, now: datetime, by: str) -> list[str]:
    """Inside the caller's transaction: every forbidden row given its category's persistence; their ids."""
    where, params = forbidden(d)
    cursor = await conn.execute(d.sql(f"select {_SCORED} from memories where {where}"), params)
    rows = await cursor.fetchall()
    for memory_id, user_id, category, emotion, info, judge, active in rows:
        persistence = CATEGORY_DEFAULTS[Category(category)].persistence
        derived = _importance(emotion, info, persistence, judge, active, d, now)
        sets = ", ".join(f"{name} = {d.placeholder}" for name in ("persistence", "updated_at", *derived))
        await conn.execute(
            d.sql(f"update memories set {sets} where id = {{p}}"),
            (persistence, d.ts(now), *derived.values(), memory_id),
        )
        payload = {"by": by, "before": {"persistence": CORE_PERSISTENCE}, "after": {"persistence": persistence},
                   "why": f"a memory of category {category} is short-lived and never core"}
        await conn.execute(
            d.sql("insert into memory_events (user_id, kind, memory_id, payload, created_at) "
                  f"values ({{p}}, {{p}}, {{p}}, {d.json_p()}, {{p}})"),
            (user_id, EventKind.rescored.value, memory_id, json_text(payload), d.ts(now)),
        )
    return [str(row[0]) for row in rows]


def _importance(
    emotion: Any, info: Any, persistence: float, judge: Any, active: Any, d: Dialect, now: datetime
) -> dict[str, float]:
    """info_importance, time_coef and importance with the new persistence (scoring.importance); none when a score
    or the time cannot be read (the doctor lists that row, and maintenance rescores it once mended)."""
    try:
        scores = Scores(emotion=emotion, info=info, persistence=persistence, judge=judge)
        ii, coef, current = importance(scores, d.from_column(active), now)
    except (ValueError, TypeError):
        return {}
    return {"info_importance": ii, "time_coef": coef, "importance": current}
