"""SQLite's part of the sync queries (store/sql/sync.py): the change order `sync_seq` (m004_sync), kept by
triggers from the counter `sync_clock` and silenced through its `quiet` flag; vectors as blobs; a memory
copied from elsewhere written with its keyword and vector rows.

A mixin of `SQLiteTx` (store/sqlite/tx.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pocketmem.base.models import Memory
from pocketmem.store.sql.sync import SyncQueries as SharedSyncQueries
from pocketmem.store.sqlite.records import readable_vector
from pocketmem.store.types import IndexedText

if TYPE_CHECKING:
    pass


class SyncQueries(SharedSyncQueries):
    _sync_column = "sync_seq"
    _row_key = "rowid"
    _vectors: bool

    if TYPE_CHECKING:

        async def _rowid(self, user_id: str, memory_id: str) -> int | None: ...
        def _pack(self, vector: Sequence[float]) -> bytes: ...
        async def _requantise(self, rowid: int, vector: Sequence[float]) -> None: ...
        async def _count_terms(self, user_id: str, old: IndexedText | None, new: IndexedText | None) -> None: ...
        async def _indexed_row(self, rowid: int) -> IndexedText | None: ...
        def _unpack(self, blob: bytes) -> list[float]: ...

    # -- reads ----------------------------------------------------------------------------------
    async def change_marker(self) -> str:
        row = await self._one("select seq + 1 from sync_clock")
        return str(row[0])

    async def memory_vectors(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, list[float]]:
        if not memory_ids:
            return {}
        in_ids, id_params = self.dialect.in_list("id", memory_ids)
        rows = await self._all(
            f"select id, embedding from memories where user_id = ? and {in_ids} and {readable_vector('embedding')}",
            (user_id, *id_params),
        )
        return {r[0]: self._unpack(r[1]) for r in rows}

    # -- writes ---------------------------------------------------------------------------------
    async def _quiet(self, on: bool) -> None:
        await self._exec("update sync_clock set quiet = ?", (1 if on else 0,))

    async def _overwrite_copy(
        self, key: Any, memory: Memory, vector: Sequence[float] | None, text: IndexedText
    ) -> None:
        """The user's row `key` (its rowid) rewritten from a copy, with its keyword and vector rows."""
        rowid = key
        columns = [c.strip() for c in self._memory_columns.split(",")][2:]
        values = list(self._memory_params(memory))[2:]
        if vector is not None:
            columns.append("embedding")
            values.append(self._pack(vector))
        assignments = ", ".join(f"{c} = ?" for c in columns)
        await self._exec(f"update memories set {assignments} where rowid = ?", (*values, rowid))
        await self._count_terms(memory.user_id, await self._indexed_row(rowid), text)
        await self._exec(
            "update memories_fts set terms = ?, keywords = ? where rowid = ?", (text.terms, text.keyword_terms, rowid)
        )
        if self._vectors:
            await self._exec("update memory_vectors set status = ? where rowid = ?", (memory.status.value, rowid))
            if vector is not None:
                await self._requantise(rowid, vector)

    async def remove_memory(self, user_id: str, memory_id: str) -> bool:
        rowid = await self._rowid(user_id, memory_id)
        if rowid is None:
            return False
        await self.keep_forgotten_hash(user_id, memory_id)
        await self._count_terms(user_id, await self._indexed_row(rowid), None)
        await self._exec("delete from memories_fts where rowid = ?", (rowid,))
        if self._vectors:
            await self._exec("delete from memory_vectors where rowid = ?", (rowid,))
        await self._forget_trail(user_id, memory_id)
        await self._exec("delete from memories where rowid = ?", (rowid,))
        return True
