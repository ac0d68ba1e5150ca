"""The queries written once (store/sql/), as the one list both backends' transaction classes mix in.

`SQLiteTx` (store/sqlite/tx.py) and `PostgresTx` (store/postgres/tx.py) put their own overrides first
(upkeep, sync, and PostgreSQL's batch writes) and the roles they implement (StoreWriter) last.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pocketmem.store.sql.browse import BrowseQueries
from pocketmem.store.sql.events import EventQueries
from pocketmem.store.sql.memories import MemoryQueries
from pocketmem.store.sql.operations import OperationQueries
from pocketmem.store.sql.pending import PendingQueries
from pocketmem.store.sql.profile import ProfileQueries
from pocketmem.store.sql.revisions import RevisionQueries
from pocketmem.store.sql.row_check import RowCheckQueries
from pocketmem.store.sql.sync import SyncQueries
from pocketmem.store.sql.tokens import TokenQueries
from pocketmem.store.sql.trash import TrashQueries
from pocketmem.store.sql.upkeep import UpkeepQueries
from pocketmem.store.sql.users import UserQueries
from pocketmem.store.sql.writes import MemoryWriteQueries


class SharedQueries(
    MemoryQueries,
    MemoryWriteQueries,
    PendingQueries,
    OperationQueries,
    UserQueries,
    ProfileQueries,
    UpkeepQueries,
    SyncQueries,
    EventQueries,
    RevisionQueries,
    TrashQueries,
    TokenQueries,
    BrowseQueries,
    RowCheckQueries,
):
    """Every shared query; raw SQL inside the transaction for the store that opened it (index upkeep, health)
    and for tests, through the backend's `_exec`, `_one` and `_all`."""

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return await self._exec(sql, params)

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return await self._one(sql, params)

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return await self._all(sql, params)
