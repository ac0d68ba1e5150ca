"""PostgreSQL writes of the core store interface (store/base.py StoreWriter), a mixin of `PostgresTx`.

Every statement runs inside the transaction `PostgresTx` was given; the per-user lock is taken by the
wrapper `per_user_locked` puts around each method (store/postgres_tx.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pocketmem.base.models import (
    EventKind,
    Memory,
    Revision,
    Tombstone,
)
from pocketmem.store.policy import CORE_PERSISTENCE, DECAY_RATE_PER_DAY, TIME_COEF_FLOOR
from pocketmem.store.postgres.records import (
    REVISION_COLUMNS,
    TOMBSTONE_COLUMNS,
    json_text,
    tombstone_params,
    ts,
)


class WriteQueries:
    changes: dict[str, set[EventKind]]

    if TYPE_CHECKING:

        async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
        async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int: ...
        async def _memories(self, where: str, params: Sequence[Any]) -> list[Memory]: ...

    # -- writes ---------------------------------------------------------------------------------
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
