"""SQLite queries for sync: the change order (m004_sync), copies of changes made elsewhere, trash handover.

A mixin of `SQLiteTx` (store/sqlite.py), like sqlite_upkeep.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from pocketmem.base.errors import StoreError
from pocketmem.base.models import Memory, Tombstone
from pocketmem.core.instants import encode as to_iso
from pocketmem.store.base import IndexedText
from pocketmem.store.sqlite.records import TOMBSTONE_COLUMNS, placeholders, tombstone_from_row, ts

if TYPE_CHECKING:
    from collections.abc import Callable

KEY_WIDTH = 20


def change_key(seq: int, row_id: str) -> str:
    return f"{seq:0{KEY_WIDTH}d}.{row_id}"


def parse_key(key: str | None) -> tuple[int, str]:
    if not key:
        return -1, ""
    seq, _, row_id = key.partition(".")
    return int(seq), row_id


class SyncQueries:
    _memory_columns: ClassVar[str]
    _to_memory: Callable[[Sequence[Any]], Memory]
    _memory_params: Callable[[Memory], tuple[Any, ...]]
    _vectors: bool

    if TYPE_CHECKING:

        async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
        async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int: ...
        async def _rowid(self, user_id: str, memory_id: str) -> int | None: ...
        async def insert_memory(self, memory: Memory, vector: Sequence[float], text: IndexedText) -> None: ...
        def _pack(self, vector: Sequence[float]) -> bytes: ...
        async def _count_terms(self, user_id: str, old: IndexedText | None, new: IndexedText | None) -> None: ...
        async def _indexed_row(self, rowid: int) -> IndexedText | None: ...
        def _unpack(self, blob: bytes) -> list[float]: ...

    # -- reads ----------------------------------------------------------------------------------
    async def change_marker(self) -> str:
        row = await self._one("select seq + 1 from sync_clock")
        return str(row[0])

    async def changed_memories(
        self, user_id: str, since: str | None, after: str | None, limit: int
    ) -> list[tuple[str, Memory]]:
        seq, row_id = parse_key(after)
        rows = await self._all(
            f"select sync_seq, {self._memory_columns} from memories where user_id = ? and sync_seq >= ? "
            "and (sync_seq > ? or (sync_seq = ? and id > ?)) order by sync_seq, id limit ?",
            (user_id, int(since or 0), seq, seq, row_id, limit),
        )
        return [(change_key(r[0], r[1]), self._to_memory(r[1:])) for r in rows]

    async def changed_tombstones(
        self, user_id: str, since: str | None, after: str | None, limit: int
    ) -> list[tuple[str, Tombstone]]:
        seq, row_id = parse_key(after)
        rows = await self._all(
            f"select sync_seq, {TOMBSTONE_COLUMNS} from memory_tombstones where user_id = ? and sync_seq >= ? "
            "and (sync_seq > ? or (sync_seq = ? and tombstone_id > ?)) order by sync_seq, tombstone_id limit ?",
            (user_id, int(since or 0), seq, seq, row_id, limit),
        )
        return [(change_key(r[0], r[1]), tombstone_from_row(r[1:])) for r in rows]

    async def memory_vectors(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, list[float]]:
        if not memory_ids:
            return {}
        rows = await self._all(
            f"select id, embedding from memories where user_id = ? and id in ({placeholders(len(memory_ids))}) "
            "and embedding is not null",
            (user_id, *memory_ids),
        )
        return {r[0]: self._unpack(r[1]) for r in rows}

    async def tombstones_for(self, user_id: str, memory_ids: Sequence[str]) -> list[Tombstone]:
        if not memory_ids:
            return []
        rows = await self._all(
            f"select {TOMBSTONE_COLUMNS} from memory_tombstones where user_id = ? "
            f"and memory_id in ({placeholders(len(memory_ids))}) order by deleted_at, tombstone_id",
            (user_id, *memory_ids),
        )
        return [tombstone_from_row(r) for r in rows]

    async def meta(self, key: str) -> str | None:
        row = await self._one("select value from store_meta where key = ?", (key,))
        return row[0] if row else None

    # -- writes ---------------------------------------------------------------------------------
    async def _quiet(self, on: bool) -> None:
        await self._exec("update sync_clock set quiet = ?", (1 if on else 0,))

    async def upsert_memory(
        self, memory: Memory, vector: Sequence[float] | None, text: IndexedText, *, record_change: bool = True
    ) -> None:
        if not record_change:
            await self._quiet(True)
        try:
            row = await self._one("select rowid, user_id from memories where id = ?", (memory.id,))
            if row is None:
                if vector is None:
                    raise StoreError(f"memory {memory.id} needs a vector to be inserted")
                await self.insert_memory(memory, vector, text)
                return
            rowid, owner = row
            if owner != memory.user_id:
                raise StoreError(f"memory id {memory.id} belongs to another user")
            columns = [c.strip() for c in self._memory_columns.split(",")][2:]
            values = list(self._memory_params(memory))[2:]
            if vector is not None:
                columns.append("embedding")
                values.append(self._pack(vector))
            assignments = ", ".join(f"{c} = ?" for c in columns)
            await self._exec(f"update memories set {assignments} where rowid = ?", (*values, rowid))
            await self._count_terms(memory.user_id, await self._indexed_row(rowid), text)
            await self._exec(
                "update memories_fts set terms = ?, keywords = ? where rowid = ?",
                (text.terms, text.keyword_terms, rowid),
            )
            if self._vectors:
                await self._exec(
                    "update memory_vectors set status = ? where rowid = ?", (memory.status.value, rowid)
                )
                if vector is not None:
                    await self._exec(
                        "update memory_vectors set embedding = ? where rowid = ?", (self._pack(vector), rowid)
                    )
        finally:
            if not record_change:
                await self._quiet(False)

    async def upsert_tombstone(self, tombstone: Tombstone, *, record_change: bool = True) -> bool:
        if not record_change:
            await self._quiet(True)
        try:
            count = await self._exec(
                f"insert into memory_tombstones ({TOMBSTONE_COLUMNS}) values ({placeholders(10)}) "
                "on conflict (tombstone_id) do update set "
                "restored_at = coalesce(restored_at, excluded.restored_at), "
                "purged_at = coalesce(purged_at, excluded.purged_at), "
                "cloud_synced_at = coalesce(cloud_synced_at, excluded.cloud_synced_at) "
                "where (restored_at is null and excluded.restored_at is not null) "
                "or (purged_at is null and excluded.purged_at is not null) "
                "or (cloud_synced_at is null and excluded.cloud_synced_at is not null)",
                (
                    tombstone.tombstone_id,
                    tombstone.memory_id,
                    tombstone.user_id,
                    to_iso(tombstone.deleted_at),
                    ts(tombstone.purge_at),
                    tombstone.reason.value,
                    ts(tombstone.cloud_synced_at),
                    tombstone.payload_hash,
                    ts(tombstone.restored_at),
                    ts(tombstone.purged_at),
                ),
            )
            return count > 0
        finally:
            if not record_change:
                await self._quiet(False)

    async def mark_tombstones_synced(self, user_id: str, tombstone_ids: Sequence[str], when: datetime) -> None:
        if not tombstone_ids:
            return
        await self._exec(
            "update memory_tombstones set cloud_synced_at = ? where user_id = ? and cloud_synced_at is null "
            f"and tombstone_id in ({placeholders(len(tombstone_ids))})",
            (to_iso(when), user_id, *tombstone_ids),
        )

    async def remove_memory(self, user_id: str, memory_id: str) -> bool:
        rowid = await self._rowid(user_id, memory_id)
        if rowid is None:
            return False
        await self._count_terms(user_id, await self._indexed_row(rowid), None)
        await self._exec("delete from memories_fts where rowid = ?", (rowid,))
        if self._vectors:
            await self._exec("delete from memory_vectors where rowid = ?", (rowid,))
        await self._exec("delete from memory_revisions where user_id = ? and memory_id = ?", (user_id, memory_id))
        await self._exec("delete from memory_usage where user_id = ? and memory_id = ?", (user_id, memory_id))
        await self._exec("delete from memories where rowid = ?", (rowid,))
        return True

    async def put_meta(self, key: str, value: str) -> None:
        await self._exec(
            "insert into store_meta (key, value) values (?, ?) on conflict (key) do update set value = excluded.value",
            (key, value),
        )
