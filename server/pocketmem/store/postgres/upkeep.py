"""PostgreSQL's part of the upkeep queries (store/sql/upkeep.py): moving the event id sequence past ids given
on import.

A mixin of `PostgresTx` (store/postgres/tx.py).
"""

from __future__ import annotations

from pocketmem.store.sql.upkeep import UpkeepQueries as SharedUpkeepQueries


class UpkeepQueries(SharedUpkeepQueries):
    async def _event_id_given(self) -> None:
        # An id given explicitly does not move the identity sequence; keep it past every id in use.
        await self._exec(
            "select setval(pg_get_serial_sequence('memory_events', 'id'), "
            "greatest((select max(id) from memory_events), 1))"
        )
