"""PostgreSQL's part of the upkeep queries (store/sql/upkeep.py): the current importance (the days since last
activity; the decay from store/policy.py), and moving the event id sequence past ids given on import.

A mixin of `PostgresTx` (store/postgres/tx.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pocketmem.store.policy import time_coef_sql
from pocketmem.store.sql.upkeep import UpkeepQueries as SharedUpkeepQueries


class UpkeepQueries(SharedUpkeepQueries):
    def _current_importance(self, now: datetime) -> tuple[str, list[Any]]:
        """info_importance * scoring.time_coef(P, days), the decay as store/policy.py writes it for SQL."""
        days = "extract(epoch from (%s - coalesce(last_active_at, created_at))) / 86400.0"
        coef, params = time_coef_sql(self.dialect, days)
        return f"info_importance * {coef}", [*params, self.dialect.ts(now)]

    async def _event_id_given(self) -> None:
        # An id given explicitly does not move the identity sequence; keep it past every id in use.
        await self._exec(
            "select setval(pg_get_serial_sequence('memory_events', 'id'), "
            "greatest((select max(id) from memory_events), 1))"
        )
