"""PostgreSQL queries for a store's life over time: maintenance scans, todos, usage, purge, export and import.

A mixin of `PostgresTx` (store/postgres_tx.py), the counterpart of sqlite_upkeep.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pocketmem.base.models import Event, Memory, PendingItem, Revision, Status, Tombstone, Usage
from pocketmem.core.instants import decode as from_iso
from pocketmem.store.base import IndexedText, ScoreRow
from pocketmem.store.postgres.records import (
    EVENT_COLUMNS,
    PENDING_COLUMNS,
    REVISION_COLUMNS,
    TOMBSTONE_COLUMNS,
    USAGE_COLUMNS,
    dt,
    event_from_row,
    json_text,
    pending_from_row,
    revision_from_row,
    revision_params,
    tombstone_from_row,
    tombstone_params,
    ts,
    usage_from_row,
)

_OPEN_TODO = "status = 'active' and category = 'todo' and completed_at is null"
_TODO_TIME = "coalesce(remind_at, due_at)"


class UpkeepQueries:
    if TYPE_CHECKING:

        async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any | None: ...
        async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int: ...
        async def _memories(self, where: str, params: Sequence[Any]) -> list[Memory]: ...
        async def insert_memory(self, memory: Memory, vector: Sequence[float], text: IndexedText) -> None: ...
        async def insert_pending(self, item: PendingItem) -> None: ...
        async def remove_memory(self, user_id: str, memory_id: str) -> bool: ...

    # -- reads ----------------------------------------------------------------------------------
    async def user_ids(self) -> list[str]:
        rows = await self._all(
            'select u from (select user_id as u from users union select user_id from memories) x order by u collate "C"'
        )
        return [r[0] for r in rows]

    async def scan_memories(
        self, user_id: str, statuses: Sequence[Status], after: str | None, limit: int
    ) -> list[Memory]:
        return await self._memories(
            'user_id = %s and status = any(%s) and id collate "C" > %s order by id collate "C" limit %s',
            (user_id, [str(s) for s in statuses], after or "", limit),
        )

    async def scan_scores(
        self, user_id: str, statuses: Sequence[Status], after: str | None, limit: int
    ) -> list[ScoreRow]:
        rows = await self._all(
            f'select {ScoreRow.COLUMNS} from memories where user_id = %s and status = any(%s) and id collate "C" > %s '
            'order by id collate "C" limit %s',
            (user_id, [str(s) for s in statuses], after or "", limit),
        )
        return [ScoreRow.of(r, dt) for r in rows]

    async def expired_memories(self, user_id: str, now: datetime, limit: int) -> list[Memory]:
        return await self._memories(
            "user_id = %s and expires_at is not null and expires_at <= %s and status in ('active', 'superseded') "
            'and persistence < 1 order by expires_at, id collate "C" limit %s',
            (user_id, ts(now), limit),
        )

    async def purgeable_memories(self, user_id: str, now: datetime, limit: int) -> list[Memory]:
        return await self._memories(
            "status = 'trashed' and purge_at <= %s and user_id = %s order by purge_at, id collate \"C\" limit %s",
            (ts(now), user_id, limit),
        )

    async def open_todos(self, user_id: str, limit: int, due_by: datetime | None = None) -> list[Memory]:
        if due_by is not None:
            return await self._memories(
                f'user_id = %s and {_OPEN_TODO} and {_TODO_TIME} <= %s order by {_TODO_TIME}, id collate "C" limit %s',
                (user_id, ts(due_by), limit),
            )
        return await self._memories(
            f"user_id = %s and {_OPEN_TODO} order by {_TODO_TIME} is null, {_TODO_TIME}, created_at, "
            'id collate "C" limit %s',
            (user_id, limit),
        )

    async def usage(self, user_id: str, memory_ids: Sequence[str] | None = None) -> dict[str, Usage]:
        if memory_ids is None:
            rows = await self._all(f"select {USAGE_COLUMNS} from memory_usage where user_id = %s", (user_id,))
        elif not memory_ids:
            return {}
        else:
            rows = await self._all(
                f"select {USAGE_COLUMNS} from memory_usage where user_id = %s and memory_id = any(%s)",
                (user_id, list(memory_ids)),
            )
        return {r[1]: usage_from_row(r) for r in rows}

    async def all_tombstones(self, user_id: str) -> list[Tombstone]:
        rows = await self._all(
            f"select {TOMBSTONE_COLUMNS} from memory_tombstones where user_id = %s "
            'order by deleted_at, tombstone_id collate "C"',
            (user_id,),
        )
        return [tombstone_from_row(r) for r in rows]

    async def all_revisions(self, user_id: str) -> list[Revision]:
        rows = await self._all(
            f"select {REVISION_COLUMNS} from memory_revisions where user_id = %s order by created_at, seq",
            (user_id,),
        )
        return [revision_from_row(r) for r in rows]

    async def all_pending(self, user_id: str) -> list[PendingItem]:
        rows = await self._all(
            f'select {PENDING_COLUMNS} from memory_pending where user_id = %s order by created_at, id collate "C"',
            (user_id,),
        )
        return [pending_from_row(r) for r in rows]

    async def events_after(self, user_id: str, after_id: int, limit: int) -> list[Event]:
        rows = await self._all(
            f"select {EVENT_COLUMNS} from memory_events where user_id = %s and id > %s order by id limit %s",
            (user_id, after_id, limit),
        )
        return [event_from_row(r) for r in rows]

    # -- writes ---------------------------------------------------------------------------------
    async def purge_memory(self, user_id: str, memory_id: str, when: datetime) -> bool:
        if not await self.remove_memory(user_id, memory_id):
            return False
        await self._exec(
            "update memory_tombstones set purged_at = %s where user_id = %s and memory_id = %s and purged_at is null",
            (ts(when), user_id, memory_id),
        )
        return True

    async def add_uses(self, user_id: str, memory_ids: Sequence[str], now: datetime) -> None:
        for memory_id in dict.fromkeys(memory_ids):
            await self._exec(
                "insert into memory_usage (user_id, memory_id, used_count, last_used_at) values (%s, %s, 1, %s) "
                "on conflict (user_id, memory_id) do update set used_count = memory_usage.used_count + 1, "
                "last_used_at = excluded.last_used_at",
                (user_id, memory_id, ts(now)),
            )

    async def put_usage(self, usage: Usage) -> None:
        await self._exec(
            f"insert into memory_usage ({USAGE_COLUMNS}) values (%s, %s, %s, %s, %s, %s) "
            "on conflict (user_id, memory_id) do update set used_count = excluded.used_count, "
            "last_used_at = excluded.last_used_at, used_mark = excluded.used_mark, "
            "recalled_mark = excluded.recalled_mark",
            (
                usage.user_id,
                usage.memory_id,
                usage.used_count,
                ts(usage.last_used_at),
                usage.used_mark,
                usage.recalled_mark,
            ),
        )

    async def import_memory(self, memory: Memory, vector: Sequence[float], text: IndexedText) -> bool:
        # Memory ids are unique across users: an id taken by anyone is not inserted again.
        if await self._one("select 1 from memories where id = %s", (memory.id,)):
            return False
        await self.insert_memory(memory, vector, text)
        return True

    async def import_tombstone(self, tombstone: Tombstone) -> bool:
        count = await self._exec(
            f"insert into memory_tombstones ({TOMBSTONE_COLUMNS}) values ({', '.join(['%s'] * 10)}) "
            "on conflict (tombstone_id) do nothing",
            tombstone_params(tombstone),
        )
        return count > 0

    async def import_revision(self, revision: Revision) -> bool:
        count = await self._exec(
            f"insert into memory_revisions ({REVISION_COLUMNS}) values ({', '.join(['%s'] * 8)}) "
            "on conflict (id) do nothing",
            revision_params(revision),
        )
        return count > 0

    async def import_pending(self, item: PendingItem) -> bool:
        if await self._one("select 1 from memory_pending where id = %s", (item.id,)):
            return False
        await self.insert_pending(item)
        return True

    async def import_event(self, event: Event, nth: int = 0) -> bool:
        payload = json_text(event.payload)
        created = ts(event.created_at)
        same = await self._one(
            "select count(*) from memory_events where user_id = %s and created_at = %s and kind = %s "
            "and memory_id is not distinct from %s and operation_id is not distinct from %s and payload = %s::jsonb",
            (event.user_id, created, event.kind.value, event.memory_id, event.operation_id, payload),
        )
        if same[0] > nth:
            return False
        taken = await self._one("select 1 from memory_events where id = %s", (event.id,))
        values = (event.user_id, event.kind.value, event.memory_id, event.operation_id, payload, created)
        if taken:
            await self._exec(
                "insert into memory_events (user_id, kind, memory_id, operation_id, payload, created_at) "
                "values (%s, %s, %s, %s, %s::jsonb, %s)",
                values,
            )
        else:
            await self._exec(
                "insert into memory_events (id, user_id, kind, memory_id, operation_id, payload, created_at) "
                "values (%s, %s, %s, %s, %s, %s::jsonb, %s)",
                (event.id, *values),
            )
            # An id given explicitly does not move the identity sequence; keep it past every id in use.
            await self._exec(
                "select setval(pg_get_serial_sequence('memory_events', 'id'), "
                "greatest((select max(id) from memory_events), 1))"
            )
        return True

    async def import_user(self, user: Mapping[str, Any]) -> bool:
        def stamp(value: Any) -> datetime | None:
            return ts(value if isinstance(value, datetime) else from_iso(str(value)))

        count = await self._exec(
            "insert into users (user_id, display_name, identity_confirmed, persona, created_at, updated_at) "
            "values (%s, %s, %s, %s, %s, %s) on conflict (user_id) do nothing",
            (
                user["user_id"],
                user.get("display_name"),
                bool(user.get("identity_confirmed")),
                user.get("persona"),
                stamp(user["created_at"]),
                stamp(user["updated_at"]),
            ),
        )
        return count > 0
