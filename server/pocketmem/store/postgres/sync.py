"""PostgreSQL queries for sync: the change order (sync_txid, see postgres_migrations.py), copies of changes
made elsewhere, trash handover. A mixin of `PostgresTx`, the counterpart of sqlite_sync.py.

A change key is the writing transaction's id and the row id. Transaction ids are handed out when
transactions start, not when they commit, so the position `change_marker` gives is the oldest
transaction still running at the reader's snapshot (`pg_snapshot_xmin`): everything before it was
committed (or rolled back) before the snapshot, and whatever commits later has an id at or after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pocketmem.base.errors import StoreError
from pocketmem.base.models import Memory, Tombstone
from pocketmem.store.base import IndexedText
from pocketmem.store.postgres.records import (
    MEMORY_COLUMN_LIST,
    MEMORY_COLUMNS,
    TOMBSTONE_COLUMNS,
    lexemes,
    memory_from_row,
    memory_params,
    parse_vector,
    tombstone_from_row,
    tombstone_params,
    ts,
    vector_text,
)

KEY_WIDTH = 20


def change_key(txid: int, row_id: str) -> str:
    return f"{txid:0{KEY_WIDTH}d}.{row_id}"


def parse_key(key: str | None) -> tuple[int, str]:
    if not key:
        return -1, ""
    txid, _, row_id = key.partition(".")
    return int(txid), row_id


class SyncQueries:
    if TYPE_CHECKING:

        async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
        async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int: ...
        async def insert_memory(self, memory: Memory, vector: Sequence[float] | None, text: IndexedText) -> None: ...

    # -- reads ----------------------------------------------------------------------------------
    async def change_marker(self) -> str:
        row = await self._one("select pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
        return str(row[0])

    async def changed_memories(
        self, user_id: str, since: str | None, after: str | None, limit: int
    ) -> list[tuple[str, Memory]]:
        txid, row_id = parse_key(after)
        rows = await self._all(
            f"select sync_txid, {MEMORY_COLUMNS} from memories where user_id = %s and sync_txid >= %s "
            'and (sync_txid, id collate "C") > (%s, %s) order by sync_txid, id collate "C" limit %s',
            (user_id, int(since or 0), txid, row_id, limit),
        )
        return [(change_key(r[0], r[1]), memory_from_row(r[1:])) for r in rows]

    async def changed_tombstones(
        self, user_id: str, since: str | None, after: str | None, limit: int
    ) -> list[tuple[str, Tombstone]]:
        txid, row_id = parse_key(after)
        rows = await self._all(
            f"select sync_txid, {TOMBSTONE_COLUMNS} from memory_tombstones where user_id = %s and sync_txid >= %s "
            'and (sync_txid, tombstone_id collate "C") > (%s, %s) order by sync_txid, tombstone_id collate "C" '
            "limit %s",
            (user_id, int(since or 0), txid, row_id, limit),
        )
        return [(change_key(r[0], r[1]), tombstone_from_row(r[1:])) for r in rows]

    async def memory_vectors(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, list[float]]:
        if not memory_ids:
            return {}
        rows = await self._all(
            "select id, embedding::text from memories where user_id = %s and id = any(%s) and embedding is not null",
            (user_id, list(memory_ids)),
        )
        return {r[0]: parse_vector(r[1]) for r in rows}

    async def tombstones_for(self, user_id: str, memory_ids: Sequence[str]) -> list[Tombstone]:
        if not memory_ids:
            return []
        rows = await self._all(
            f"select {TOMBSTONE_COLUMNS} from memory_tombstones where user_id = %s and memory_id = any(%s) "
            'order by deleted_at, tombstone_id collate "C"',
            (user_id, list(memory_ids)),
        )
        return [tombstone_from_row(r) for r in rows]

    async def meta(self, key: str) -> str | None:
        row = await self._one("select value from store_meta where key = %s", (key,))
        return row[0] if row else None

    # -- writes ---------------------------------------------------------------------------------
    async def _quiet(self, on: bool) -> None:
        await self._exec("select set_config('pocketmem.quiet', %s, true)", ("on" if on else "off",))

    async def upsert_memory(
        self, memory: Memory, vector: Sequence[float] | None, text: IndexedText, *, record_change: bool = True
    ) -> None:
        if not record_change:
            await self._quiet(True)
        try:
            owner = await self._one("select user_id from memories where id = %s", (memory.id,))
            if owner is None:
                if vector is None:
                    raise StoreError(f"memory {memory.id} needs a vector to be inserted")
                await self.insert_memory(memory, vector, text)
                return
            if owner[0] != memory.user_id:
                raise StoreError(f"memory id {memory.id} belongs to another user")
            columns = MEMORY_COLUMN_LIST[2:]
            values: list[Any] = list(memory_params(memory))[2:]
            assignments = [f"{c} = %s" for c in columns]
            assignments += ["terms = %s", "keyword_terms = %s", "lexemes = array_to_tsvector(%s::text[])"]
            values += [text.terms, text.keyword_terms, lexemes(memory.user_id, text.terms, text.keyword_terms)]
            if vector is not None:
                assignments.append("embedding = %s::vector")
                values.append(vector_text(vector))
            await self._exec(
                f"update memories set {', '.join(assignments)} where id = %s and user_id = %s",
                (*values, memory.id, memory.user_id),
            )
        finally:
            if not record_change:
                await self._quiet(False)

    async def upsert_tombstone(self, tombstone: Tombstone, *, record_change: bool = True) -> bool:
        if not record_change:
            await self._quiet(True)
        try:
            count = await self._exec(
                f"insert into memory_tombstones ({TOMBSTONE_COLUMNS}) values ({', '.join(['%s'] * 10)}) "
                "on conflict (tombstone_id) do update set "
                "restored_at = coalesce(memory_tombstones.restored_at, excluded.restored_at), "
                "purged_at = coalesce(memory_tombstones.purged_at, excluded.purged_at), "
                "cloud_synced_at = coalesce(memory_tombstones.cloud_synced_at, excluded.cloud_synced_at) "
                "where (memory_tombstones.restored_at is null and excluded.restored_at is not null) "
                "or (memory_tombstones.purged_at is null and excluded.purged_at is not null) "
                "or (memory_tombstones.cloud_synced_at is null and excluded.cloud_synced_at is not null)",
                tombstone_params(tombstone),
            )
            return count > 0
        finally:
            if not record_change:
                await self._quiet(False)

    async def mark_tombstones_synced(self, user_id: str, tombstone_ids: Sequence[str], when: datetime) -> None:
        if not tombstone_ids:
            return
        await self._exec(
            "update memory_tombstones set cloud_synced_at = %s where user_id = %s and cloud_synced_at is null "
            "and tombstone_id = any(%s)",
            (ts(when), user_id, list(tombstone_ids)),
        )

    async def remove_memory(self, user_id: str, memory_id: str) -> bool:
        count = await self._exec("delete from memories where id = %s and user_id = %s", (memory_id, user_id))
        if not count:
            return False
        await self._exec(
            "delete from memory_revisions where user_id = %s and memory_id = %s", (user_id, memory_id)
        )
        await self._exec("delete from memory_usage where user_id = %s and memory_id = %s", (user_id, memory_id))
        return True

    async def put_meta(self, key: str, value: str) -> None:
        await self._exec(
            "insert into store_meta (key, value) values (%s, %s) on "
            "conflict (key) do update set value = excluded.value",
            (key, value),
        )
