"""PostgreSQL's part of the upkeep queries (store/sql/upkeep.py): the current importance written out in SQL
with scoring.py's constants bound, and moving the event id sequence past ids given on import.

A mixin of `PostgresTx` (store/postgres/tx.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pocketmem.store.policy import DECAY_RATE_PER_DAY, TIME_COEF_FLOOR
from pocketmem.store.sql.upkeep import UpkeepQueries as SharedUpkeepQueries


class UpkeepQueries(SharedUpkeepQueries):
    def _current_importance(self, now: datetime) -> tuple[str, list[Any]]:
        """info_importance * scoring.time_coef(P, days), with time_coef =
        max(TIME_COEF_FLOOR, exp(-DECAY_RATE_PER_DAY * (1 - P) * max(0, days))) bound from scoring.py."""
        return (
            "info_importance * greatest(%s::float8, exp(-%s::float8 * (1 - persistence) * greatest(0, "
            "extract(epoch from (%s - coalesce(last_active_at, created_at))) / 86400.0)))",
            [TIME_COEF_FLOOR, DECAY_RATE_PER_DAY, self.dialect.ts(now)],
        )

    async def _event_id_given(self) -> None:
        # An id given explicitly does not move the identity sequence; keep it past every id in use.
        await self._exec(
            "select setval(pg_get_serial_sequence('memory_events', 'id'), "
            "greatest((select max(id) from memory_events), 1))"
        )
