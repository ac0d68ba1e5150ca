"""The memory write path, for both backends: insert, field updates, new content, status, use counts.

What each backend keeps to itself are the index rows beside a memory (hooks below): SQLite's FTS5 and
sqlite-vec rows and its term counts, PostgreSQL's vector, term and lexeme columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pocketmem.base.errors import StoreError
from pocketmem.base.models import DeleteReason, Memory, Status
from pocketmem.store.sql.dialect import Dialect
from pocketmem.store.sql.records import MEMORY_COLUMNS, MEMORY_UPDATABLE, memory_params, set_clause
from pocketmem.store.types import IndexedText

# An index column written with a memory: (column, its value's SQL with `{p}`, the parameter).
IndexColumn = tuple[str, str, Any]


class MemoryWriteQueries:
    dialect: Dialect

    if TYPE_CHECKING:

        async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int: ...

        # -- per backend: the index rows and columns beside a memory row --
        def _index_columns(
            self, user_id: str, vector: Sequence[float] | None, text: IndexedText
        ) -> list[IndexColumn]: ...
        async def _insert_row(self, sql: str, params: Sequence[Any]) -> Any: ...
        async def _indexed_insert(
            self, ref: Any, memory: Memory, vector: Sequence[float] | None, text: IndexedText
        ) -> None: ...
        async def _indexed_content(
            self, user_id: str, memory_id: str, vector: Sequence[float] | None, text: IndexedText
        ) -> None: ...
        async def _indexed_status(self, user_id: str, memory_id: str, status: Status) -> None: ...

    async def insert_memory(self, memory: Memory, vector: Sequence[float] | None, text: IndexedText) -> None:
        # No vector (the embedding endpoint was down): keyword-searchable now, embedded later (embed_queue.py).
        d = self.dialect
        index = self._index_columns(memory.user_id, vector, text)
        columns = ", ".join([MEMORY_COLUMNS, *(c for c, _, _ in index)])
        values = ", ".join([d.placeholders(len(MEMORY_COLUMNS.split(","))), *(v for _, v, _ in index)])
        ref = await self._insert_row(
            d.sql(f"insert into memories ({columns}) values ({values})"),
            (*memory_params(memory, d), *(p for _, _, p in index)),
        )
        await self._indexed_insert(ref, memory, vector, text)

    async def update_memory(self, user_id: str, memory_id: str, **fields: Any) -> None:
        d = self.dialect
        assignments, values = set_clause(fields, MEMORY_UPDATABLE, d)
        await self._exec(
            d.sql(f"update memories set {assignments} where id = {{p}} and {d.owner()} = {{p}}"),
            (*values, memory_id, user_id),
        )

    async def replace_content(
        self,
        user_id: str,
        memory_id: str,
        *,
        content: str,
        content_hash: str,
        keywords: list[str],
        vector: Sequence[float] | None,
        text: IndexedText,
        updated_at: datetime,
    ) -> None:
        d = self.dialect
        index = self._index_columns(user_id, vector, text)
        assignments = "".join(f", {c} = {v}" for c, v, _ in index)
        changed = await self._exec(
            d.sql(
                f"update memories set content = {{p}}, content_hash = {{p}}, keywords = {{p}}, updated_at = {{p}}"
                f"{assignments} where id = {{p}} and {d.owner()} = {{p}}"
            ),
            (
                content,
                content_hash,
                d.to_json(keywords),
                d.ts(updated_at),
                *(p for _, _, p in index),
                memory_id,
                user_id,
            ),
        )
        if not changed:
            raise StoreError(f"memory {memory_id} vanished during the update")
        await self._indexed_content(user_id, memory_id, vector, text)

    async def set_status(
        self,
        user_id: str,
        memory_id: str,
        status: Status,
        *,
        updated_at: datetime,
        deleted_at: datetime | None = None,
        purge_at: datetime | None = None,
        delete_reason: DeleteReason | None = None,
        valid_until: datetime | None = None,
    ) -> None:
        d = self.dialect
        changed = await self._exec(
            d.sql(
                "update memories set status = {p}, updated_at = {p}, deleted_at = {p}, purge_at = {p}, "
                f"delete_reason = {{p}}, valid_until = {{p}} where id = {{p}} and {d.owner()} = {{p}}"
            ),
            (
                status.value,
                d.ts(updated_at),
                d.ts(deleted_at),
                d.ts(purge_at),
                delete_reason.value if delete_reason else None,
                d.ts(valid_until),
                memory_id,
                user_id,
            ),
        )
        if not changed:
            raise StoreError(f"memory {memory_id} vanished during the update")
        await self._indexed_status(user_id, memory_id, status)

    async def touch(self, user_id: str, memory_ids: Sequence[str], now: datetime, *, by: int = 1) -> None:
        if not memory_ids:
            return
        d = self.dialect
        ids, params = d.in_list("id", memory_ids)
        # The later of the two: a deferred recall count (service/shared/reinforcement.py) may be written after a
        # use recorded since, and must not move last_active_at back.
        await self._exec(
            d.sql(
                "update memories set use_count = use_count + {p}, "
                f"last_active_at = {d.greatest}(coalesce(last_active_at, {{p}}), {{p}}) "
                f"where {d.owner()} = {{p}} and {ids}"
            ),
            (by, d.ts(now), d.ts(now), user_id, *params),
        )
