"""PostgreSQL writes of the core store interface (store/base.py StoreWriter), a mixin of `PostgresTx`.

Every statement runs inside the transaction `PostgresTx` was given; the per-user lock is taken
when the transaction is opened for the user (PostgresStore.write(user_id=...), store/postgres/tx.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pocketmem.base.errors import StoreError
from pocketmem.base.models import (
    Category,
    DeleteReason,
    EventKind,
    Memory,
    PendingItem,
    PendingStatus,
    Revision,
    Status,
    Tombstone,
)
from pocketmem.store.base import IndexedText
from pocketmem.store.policy import CORE_PERSISTENCE, DECAY_RATE_PER_DAY, TIME_COEF_FLOOR
from pocketmem.store.postgres.records import (
    MEMORY_COLUMNS,
    REVISION_COLUMNS,
    TOMBSTONE_COLUMNS,
    json_text,
    lexemes,
    memory_params,
    tombstone_params,
    ts,
    vector_text,
)

TIME_FIELDS = {
    "created_at", "updated_at", "valid_from", "valid_until", "last_active_at", "deleted_at", "purge_at",
    "expires_at", "due_at", "remind_at", "completed_at", "cooldown_until", "cloud_synced_at", "restored_at",
    "purged_at", "last_used_at",
}
UPDATABLE = {
    "category", "keywords", "emotion", "info", "persistence", "judge", "info_importance", "time_coef",
    "importance", "confidence", "source", "source_ref", "updated_at", "valid_from", "valid_until",
    "last_active_at", "use_count", "supersedes", "expires_at", "due_at", "remind_at", "completed_at",
}


class WriteQueries:
    changes: dict[str, set[EventKind]]

    if TYPE_CHECKING:

        async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
        async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int: ...
        async def _memories(self, where: str, params: Sequence[Any]) -> list[Memory]: ...

    # -- writes ---------------------------------------------------------------------------------
    async def insert_memory(self, memory: Memory, vector: Sequence[float] | None, text: IndexedText) -> None:
        await self._exec(
            f"insert into memories ({MEMORY_COLUMNS}, embedding, terms, keyword_terms, lexemes) values "
            f"({', '.join(['%s'] * 32)}, %s::vector, %s, %s, array_to_tsvector(%s::text[]))",
            (
                *memory_params(memory),
                vector_text(vector) if vector is not None else None,
                text.terms,
                text.keyword_terms,
                lexemes(memory.user_id, text.terms, text.keyword_terms),
            ),
        )

    async def update_memory(self, user_id: str, memory_id: str, **fields: Any) -> None:
        unknown = set(fields) - UPDATABLE
        if unknown:
            raise ValueError(f"not updatable here: {sorted(unknown)}")
        assignments: list[str] = []
        params: list[Any] = []
        for key, value in fields.items():
            assignments.append(f"{key} = %s")
            if key in TIME_FIELDS:
                params.append(ts(value))
            elif key == "keywords":
                params.append(json.dumps(value, ensure_ascii=False))
            elif isinstance(value, Category):
                params.append(value.value)
            else:
                params.append(value)
        await self._exec(
            f"update memories set {', '.join(assignments)} where id = %s and user_id = %s",
            (*params, memory_id, user_id),
        )

    async def update_scores(self, user_id: str, scores: Sequence[tuple[str, float, float, float]]) -> None:
        if scores:
            # One statement for the batch: arrays unnested against the primary key.
            ids, infos, coefs, imps = (list(column) for column in zip(*scores, strict=True))
            await self._exec(
                "update memories m set info_importance = s.info, time_coef = s.coef, importance = s.imp "
                "from unnest(%s::text[], %s::float8[], %s::float8[], %s::float8[]) as s(id, info, coef, imp) "
                "where m.id = s.id and m.user_id = %s",
                (ids, infos, coefs, imps, user_id),
            )

    async def replace_content(
        self,
        user_id: str,
        memory_id: str,
        *,
        content: str,
        content_hash: str,
        keywords: list[str],
        vector: Sequence[float],
        text: IndexedText,
        updated_at: datetime,
    ) -> None:
        changed = await self._exec(
            "update memories set content = %s, content_hash = %s, keywords = %s, embedding = %s::vector, "
            "updated_at = %s, terms = %s, keyword_terms = %s, lexemes = array_to_tsvector(%s::text[]) "
            "where id = %s and user_id = %s",
            (
                content,
                content_hash,
                json.dumps(keywords, ensure_ascii=False),
                vector_text(vector),
                ts(updated_at),
                text.terms,
                text.keyword_terms,
                lexemes(user_id, text.terms, text.keyword_terms),
                memory_id,
                user_id,
            ),
        )
        if not changed:
            raise StoreError(f"memory {memory_id} vanished during the update")

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
        changed = await self._exec(
            "update memories set status = %s, updated_at = %s, deleted_at = %s, purge_at = %s, delete_reason = %s, "
            "valid_until = %s where id = %s and user_id = %s",
            (
                status.value,
                ts(updated_at),
                ts(deleted_at),
                ts(purge_at),
                delete_reason.value if delete_reason else None,
                ts(valid_until),
                memory_id,
                user_id,
            ),
        )
        if not changed:
            raise StoreError(f"memory {memory_id} vanished during the update")

    async def touch(self, user_id: str, memory_ids: Sequence[str], now: datetime, *, by: int = 1) -> None:
        if not memory_ids:
            return
        await self._exec(
            "update memories set use_count = use_count + %s, last_active_at = %s where user_id = %s and id = any(%s)",
            (by, ts(now), user_id, list(memory_ids)),
        )

    async def eviction_candidates(
        self, user_id: str, count: int, now: datetime, exclude: Sequence[str]
    ) -> list[Memory]:
        # Current importance, not the stored snapshot: info_importance * scoring.time_coef(P, days), with
        # time_coef = max(TIME_COEF_FLOOR, exp(-DECAY_RATE_PER_DAY * (1 - P) * max(0, days))) bound from scoring.py.
        return await self._memories(
            "user_id = %s and status = 'active' and persistence < %s and not (id = any(%s)) "
            "order by info_importance * greatest(%s::float8, exp(-%s::float8 * (1 - persistence) * greatest(0, "
            "extract(epoch from (%s - coalesce(last_active_at, created_at))) / 86400.0))), created_at, seq limit %s",
            (user_id, CORE_PERSISTENCE, list(exclude), TIME_COEF_FLOOR, DECAY_RATE_PER_DAY, ts(now), count),
        )

    async def insert_tombstone(self, tombstone: Tombstone) -> None:
        await self._exec(
            f"insert into memory_tombstones ({TOMBSTONE_COLUMNS}) values ({', '.join(['%s'] * 10)})",
            tombstone_params(tombstone),
        )

    async def mark_tombstones_restored(self, user_id: str, memory_id: str, when: datetime) -> None:
        await self._exec(
            "update memory_tombstones set restored_at = %s where user_id = %s and memory_id = %s "
            "and restored_at is null",
            (ts(when), user_id, memory_id),
        )

    async def insert_revision(self, revision: Revision) -> None:
        await self._exec(
            f"insert into memory_revisions ({REVISION_COLUMNS}) values (%s, %s, %s, %s, %s, %s, %s, %s)",
            (
                revision.id,
                revision.memory_id,
                revision.user_id,
                revision.previous_content,
                revision.new_content,
                revision.mode,
                revision.reason,
                ts(revision.created_at),
            ),
        )

    async def insert_pending(self, item: PendingItem) -> None:
        await self._exec(
            "insert into memory_pending (id, user_id, candidate, content_hash, confidence, status, cooldown_until, "
            "memory_id, created_at, updated_at) values (%s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s)",
            (
                item.id,
                item.user_id,
                json_text(item.candidate),
                item.candidate.get("content_hash", ""),
                item.confidence,
                item.status.value,
                ts(item.cooldown_until),
                item.memory_id,
                ts(item.created_at),
                ts(item.updated_at),
            ),
        )

    async def update_pending(self, user_id: str, pending_id: str, **fields: Any) -> None:
        allowed = {"status", "cooldown_until", "memory_id", "updated_at"}
        if set(fields) - allowed:
            raise ValueError(f"not updatable here: {sorted(set(fields) - allowed)}")
        assignments: list[str] = []
        params: list[Any] = []
        for key, value in fields.items():
            assignments.append(f"{key} = %s")
            if key in TIME_FIELDS:
                params.append(ts(value))
            elif isinstance(value, PendingStatus):
                params.append(value.value)
            else:
                params.append(value)
        await self._exec(
            f"update memory_pending set {', '.join(assignments)} where id = %s and user_id = %s",
            (*params, pending_id, user_id),
        )

    async def record_operation(
        self, user_id: str, operation_id: str, request_hash: str, result: dict[str, Any], now: datetime
    ) -> None:
        await self._exec(
            "insert into memory_operations (user_id, operation_id, request_hash, result, created_at) "
            "values (%s, %s, %s, %s::jsonb, %s)",
            (user_id, operation_id, request_hash, json_text(result), ts(now)),
        )

    async def add_event(
        self,
        user_id: str,
        kind: EventKind,
        now: datetime,
        *,
        memory_id: str | None = None,
        operation_id: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> None:
        await self._exec(
            "insert into memory_events (user_id, kind, memory_id, operation_id, payload, created_at) "
            "values (%s, %s, %s, %s, %s::jsonb, %s)",
            (user_id, kind.value, memory_id, operation_id, json_text(payload), ts(now)),
        )
        self.changes.setdefault(user_id, set()).add(kind)

    async def ensure_user(self, user_id: str, now: datetime) -> None:
        await self._exec(
            "insert into users (user_id, created_at, updated_at) values (%s, %s, %s) on conflict (user_id) do nothing",
            (user_id, ts(now), ts(now)),
        )

