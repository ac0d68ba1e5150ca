"""Pending memories (candidates awaiting the user's word), for both backends."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pocketmem.base.errors import UnreadableRow
from pocketmem.base.models import OPEN_PENDING, PendingItem, PendingStatus
from pocketmem.store.sql.dialect import Dialect
from pocketmem.store.sql.records import (
    PENDING_COLUMNS,
    PENDING_UPDATABLE,
    pending_from_row,
    pending_params,
    readable,
    set_clause,
)


class PendingQueries:
    dialect: Dialect
    left_out: list[UnreadableRow]  # set by the transaction class

    if TYPE_CHECKING:

        async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
        async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    async def _pending(self, where: str, params: Sequence[Any]) -> list[PendingItem]:
        """Rows that cannot be read are left out with a log line: one bad row must not hide the user's others
        (listing, recall's pending_confirmations); export (all_pending) still names it."""
        rows = await self._all(f"select {PENDING_COLUMNS} from memory_pending where {where}", params)
        return readable(rows, lambda row: pending_from_row(row, self.dialect), self.left_out)

    async def get_pending(self, user_id: str, pending_id: str) -> PendingItem | None:
        d = self.dialect
        found = await self._pending(d.sql(f"id = {{p}} and {d.owner()} = {{p}}"), (pending_id, user_id))
        return found[0] if found else None

    async def list_pending(
        self, user_id: str, statuses: Sequence[PendingStatus], limit: int, offset: int = 0
    ) -> tuple[list[PendingItem], int]:
        d = self.dialect
        wanted, values = d.in_list("status", statuses)
        clause, params = d.sql(f"user_id = {{p}} and {wanted}"), (user_id, *values)
        total = (await self._one(f"select count(*) from memory_pending where {clause}", params))[0]
        found = await self._pending(
            d.sql(f"{clause} order by created_at desc, {d.tie_break} desc limit {{p}} offset {{p}}"),
            (*params, limit, offset),
        )
        return found, int(total)

    async def due_pending(self, user_id: str, now: datetime, limit: int) -> list[PendingItem]:
        d = self.dialect
        return await self._pending(
            d.sql(
                "user_id = {p} and (status = 'pending' or (status = 'snoozed' and cooldown_until <= {p})) "
                f"order by created_at, {d.tie_break} limit {{p}}"
            ),
            (user_id, d.ts(now), limit),
        )

    async def find_pending_by_hash(
        self,
        user_id: str,
        content_hash: str,
        statuses: Sequence[PendingStatus] = OPEN_PENDING,
    ) -> PendingItem | None:
        d = self.dialect
        wanted, values = d.in_list("status", statuses)
        found = await self._pending(
            d.sql(f"user_id = {{p}} and content_hash = {{p}} and {wanted} limit 1"), (user_id, content_hash, *values)
        )
        return found[0] if found else None

    async def insert_pending(self, item: PendingItem) -> None:
        d = self.dialect
        await self._exec(
            d.sql(
                "insert into memory_pending (id, user_id, candidate, content_hash, confidence, status, cooldown_until, "
                f"memory_id, created_at, updated_at) values ({{p}}, {{p}}, {{p}}{d.json_cast}, {d.placeholders(7)})"
            ),
            pending_params(item, d),
        )

    async def update_pending(self, user_id: str, pending_id: str, **fields: Any) -> None:
        d = self.dialect
        assignments, values = set_clause(fields, PENDING_UPDATABLE, d)
        await self._exec(
            d.sql(f"update memory_pending set {assignments} where id = {{p}} and {d.owner()} = {{p}}"),
            (*values, pending_id, user_id),
        )
