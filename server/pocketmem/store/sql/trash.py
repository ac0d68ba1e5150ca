"""Tombstones (memory_tombstones), the trail a deleted memory leaves, for both backends."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pocketmem.base.models import DeleteReason, Tombstone
from pocketmem.store.sql.queries import Queries
from pocketmem.store.sql.records import TOMBSTONE_COLUMNS, TOMBSTONE_WIDTH, tombstone_from_row, tombstone_params

# A person's forget keeps the forgotten content's hash (never its text) in its tombstone, so that it outlives the
# memory row (service/writing/duplicates.py, `forgotten`). Written with the tombstone; filled from the row for a
# tombstone without it (one written before the column, or by an older release elsewhere) by the migrations and
# before the row is removed (purge, or the trash handed to the cloud library).
FILL_FORGOTTEN_HASH = (
    "update memory_tombstones set content_hash = (select m.content_hash from memories m "
    "where m.user_id = memory_tombstones.user_id and m.id = memory_tombstones.memory_id) "
    f"where reason = '{DeleteReason.user_delete.value}' and content_hash is null"
)


class TrashQueries(Queries):
    async def _tombstones(self, where: str, params: Sequence[Any]) -> list[Tombstone]:
        rows = await self._all(f"select {TOMBSTONE_COLUMNS} from memory_tombstones where {where}", params)
        return [tombstone_from_row(r, self.dialect) for r in rows]

    async def insert_tombstone(self, tombstone: Tombstone) -> None:
        d = self.dialect
        await self._exec(
            f"insert into memory_tombstones ({TOMBSTONE_COLUMNS}) values ({d.placeholders(TOMBSTONE_WIDTH)})",
            tombstone_params(tombstone, d),
        )

    async def import_tombstone(self, tombstone: Tombstone) -> bool:
        d = self.dialect
        count = await self._exec(
            f"insert into memory_tombstones ({TOMBSTONE_COLUMNS}) values ({d.placeholders(TOMBSTONE_WIDTH)}) "
            "on conflict (tombstone_id) do nothing",
            tombstone_params(tombstone, d),
        )
        return count > 0

    async def _stamp_once(self, column: str, user_id: str, memory_id: str, when: datetime) -> None:
        """Set a time on the memory's tombstones that do not have it yet (restored_at, purged_at)."""
        d = self.dialect
        await self._exec(
            d.sql(
                f"update memory_tombstones set {column} = {{p}} where user_id = {{p}} and memory_id = {{p}} "
                f"and {column} is null"
            ),
            (d.ts(when), user_id, memory_id),
        )

    async def mark_tombstones_restored(self, user_id: str, memory_id: str, when: datetime) -> None:
        await self._stamp_once("restored_at", user_id, memory_id, when)

    async def _mark_purged(self, user_id: str, memory_id: str, when: datetime) -> None:
        await self._stamp_once("purged_at", user_id, memory_id, when)

    async def keep_forgotten_hash(self, user_id: str, memory_id: str) -> None:
        """Before the memory's row is removed: its forget's tombstones take its content hash if they lack it."""
        await self._exec(
            self.dialect.sql(f"{FILL_FORGOTTEN_HASH} and user_id = {{p}} and memory_id = {{p}}"), (user_id, memory_id)
        )

    async def tombstones_by_content(self, user_id: str, content_hash: str) -> list[Tombstone]:
        d = self.dialect
        return await self._tombstones(
            d.sql(f"user_id = {{p}} and content_hash = {{p}} order by deleted_at, {d.by_text('tombstone_id')}"),
            (user_id, content_hash),
        )

    async def list_tombstones(self, user_id: str, limit: int = 100) -> list[Tombstone]:
        return await self._tombstones(
            self.dialect.sql("user_id = {p} order by deleted_at desc limit {p}"), (user_id, limit)
        )

    async def all_tombstones(self, user_id: str) -> list[Tombstone]:
        d = self.dialect
        return await self._tombstones(
            d.sql(f"user_id = {{p}} order by deleted_at, {d.by_text('tombstone_id')}"), (user_id,)
        )

    async def tombstones_for(self, user_id: str, memory_ids: Sequence[str]) -> list[Tombstone]:
        if not memory_ids:
            return []
        d = self.dialect
        in_ids, id_params = d.in_list("memory_id", memory_ids)
        return await self._tombstones(
            d.sql(f"user_id = {{p}} and {in_ids} order by deleted_at, {d.by_text('tombstone_id')}"),
            (user_id, *id_params),
        )
