"""Sync queries for both backends: the change feed's keys and pages, trash handover, store metadata.

Each backend's sync module adds what differs: its change order (SQLite: `sync_seq` from a counter,
PostgreSQL: `sync_txid`, the writing transaction), how a change is written quietly, and how a memory
copied from elsewhere is written with its vector and keyword rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pocketmem.base.errors import Conflict, ConflictReason, StoreError, UnreadableRow
from pocketmem.base.models import Memory, Tombstone
from pocketmem.store.sql.queries import Queries
from pocketmem.store.sql.records import TOMBSTONE_COLUMNS, TOMBSTONE_WIDTH, tombstone_from_row, tombstone_params
from pocketmem.store.types import IndexedText

KEY_WIDTH = 20


def change_key(position: int, row_id: str) -> str:
    return f"{position:0{KEY_WIDTH}d}.{row_id}"


def parse_key(key: str | None) -> tuple[int, str]:
    if not key:
        return -1, ""
    position, _, row_id = key.partition(".")
    return int(position), row_id


T = TypeVar("T")


def _or_unreadable(read: Callable[[Sequence[Any]], T], row: Sequence[Any]) -> T | UnreadableRow:
    """One row of a page of changes, or what stops it being read: the other rows of the page still travel."""
    try:
        return read(row)
    except UnreadableRow as exc:
        return exc


class SyncQueries(Queries):
    _sync_column: ClassVar[str]  # the change order's column, in memories and memory_tombstones
    _row_key: ClassVar[str]  # the column that finds a memory's row again: rowid, or its id

    if TYPE_CHECKING:

        async def _quiet(self, on: bool) -> None: ...
        async def _overwrite_copy(
            self, key: Any, memory: Memory, vector: Sequence[float] | None, text: IndexedText
        ) -> None: ...
        async def insert_memory(self, memory: Memory, vector: Sequence[float] | None, text: IndexedText) -> None: ...
        async def keep_forgotten_hash(self, user_id: str, memory_id: str) -> None: ...

    def _page(self, id_column: str, since: str | None, after: str | None) -> tuple[str, list[Any]]:
        """The where clause of a page of changes at or after `since`, past the key `after`."""
        d, sync = self.dialect, self._sync_column
        position, row_id = parse_key(after)
        row = d.by_text(id_column)
        where = d.sql(
            f"user_id = {{p}} and {sync} >= {{p}} and ({sync} > {{p}} or ({sync} = {{p}} and {row} > {{p}})) "
            f"order by {sync}, {row} limit {{p}}"
        )
        return where, [int(since or 0), position, position, row_id]

    async def changed_memories(
        self, user_id: str, since: str | None, after: str | None, limit: int
    ) -> list[tuple[str, Memory | UnreadableRow]]:
        where, params = self._page("id", since, after)
        rows = await self._all(
            f"select {self._sync_column}, {self._memory_columns} from memories where {where}",
            (user_id, *params, limit),
        )
        return [(change_key(r[0], r[1]), _or_unreadable(self._to_memory, r[1:])) for r in rows]

    async def changed_tombstones(
        self, user_id: str, since: str | None, after: str | None, limit: int
    ) -> list[tuple[str, Tombstone | UnreadableRow]]:
        where, params = self._page("tombstone_id", since, after)
        rows = await self._all(
            f"select {self._sync_column}, {TOMBSTONE_COLUMNS} from memory_tombstones where {where}",
            (user_id, *params, limit),
        )
        read = partial(tombstone_from_row, d=self.dialect)
        return [(change_key(r[0], r[1]), _or_unreadable(read, r[1:])) for r in rows]

    async def meta(self, key: str) -> str | None:
        row = await self._one(self.dialect.sql("select value from store_meta where key = {p}"), (key,))
        return row[0] if row else None

    async def put_meta(self, key: str, value: str) -> None:
        await self._exec(
            self.dialect.sql(
                "insert into store_meta (key, value) values ({p}, {p}) "
                "on conflict (key) do update set value = excluded.value"
            ),
            (key, value),
        )

    async def upsert_memory(
        self, memory: Memory, vector: Sequence[float] | None, text: IndexedText, *, record_change: bool = True
    ) -> None:
        """Insert a memory copied from elsewhere, or overwrite the user's copy (never another user's)."""
        if not record_change:
            await self._quiet(True)
        try:
            row = await self._one(
                self.dialect.sql(f"select user_id, {self._row_key} from memories where id = {{p}}"), (memory.id,)
            )
            if row is None:
                if vector is None:
                    raise StoreError(f"memory {memory.id} needs a vector to be inserted")
                await self.insert_memory(memory, vector, text)
                return
            if row[0] != memory.user_id:
                raise Conflict(f"memory id {memory.id} belongs to another user", ConflictReason.id_taken)
            await self._overwrite_copy(row[1], memory, vector, text)
        finally:
            if not record_change:
                await self._quiet(False)

    async def upsert_tombstone(self, tombstone: Tombstone, *, record_change: bool = True) -> bool:
        """Insert a tombstone, or fill in the restore, purge and sync times it gained elsewhere, and the forgotten
        content's hash (one a release before the column wrote has none)."""
        d = self.dialect
        if not record_change:
            await self._quiet(True)
        try:
            gained = ("restored_at", "purged_at", "cloud_synced_at", "content_hash")
            fill = ", ".join(f"{c} = coalesce(memory_tombstones.{c}, excluded.{c})" for c in gained)
            news = " or ".join(f"(memory_tombstones.{c} is null and excluded.{c} is not null)" for c in gained)
            count = await self._exec(
                f"insert into memory_tombstones ({TOMBSTONE_COLUMNS}) values ({d.placeholders(TOMBSTONE_WIDTH)}) "
                f"on conflict (tombstone_id) do update set {fill} where {news}",
                tombstone_params(tombstone, d),
            )
            return count > 0
        finally:
            if not record_change:
                await self._quiet(False)

    async def _forget_trail(self, user_id: str, memory_id: str) -> None:
        """A removed memory's revisions and usage go with it (its tombstones and events stay)."""
        d = self.dialect
        for table in ("memory_revisions", "memory_usage"):
            await self._exec(
                d.sql(f"delete from {table} where user_id = {{p}} and memory_id = {{p}}"), (user_id, memory_id)
            )

    async def mark_tombstones_synced(self, user_id: str, tombstone_ids: Sequence[str], when: datetime) -> None:
        if not tombstone_ids:
            return
        d = self.dialect
        in_ids, id_params = d.in_list("tombstone_id", tombstone_ids)
        await self._exec(
            d.sql(
                "update memory_tombstones set cloud_synced_at = {p} where user_id = {p} and cloud_synced_at is null "
                f"and {in_ids}"
            ),
            (d.ts(when), user_id, *id_params),
        )
