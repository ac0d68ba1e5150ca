"""Queries for a store's life over time, for both backends: maintenance scans, eviction, todos, usage,
purge, export and import of memories, pending items and users.

Each backend's upkeep module adds what differs: how the current importance is computed in SQL (eviction's
order) and, for SQLite, the batch import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from pocketmem.base.errors import UnreadableRow
from pocketmem.base.models import Memory, PendingItem, Status, Usage
from pocketmem.core.instants import decode as from_iso
from pocketmem.store.policy import CORE_PERSISTENCE
from pocketmem.store.sql.queries import Queries
from pocketmem.store.sql.records import USAGE_COLUMNS, usage_from_row
from pocketmem.store.types import IndexedText, ScoreRow, Unsent

# The same expression as the partial index memories_open_todos (m002), so SQLite can use it.
_OPEN_TODO = "status = 'active' and category = 'todo' and completed_at is null"
# Not expired at a moment (base/models.py `expired`: past its expires_at, a memory is shown nowhere).
_UNEXPIRED = "(expires_at is null or expires_at > {p})"
_TODO_TIME = "coalesce(remind_at, due_at)"


class UpkeepQueries(Queries):
    _sync_column: ClassVar[str]  # the change order's column (store/sql/sync.py)

    if TYPE_CHECKING:

        def _current_importance(self, now: datetime) -> tuple[str, list[Any]]: ...
        async def _mark_purged(self, user_id: str, memory_id: str, when: datetime) -> None: ...
        async def remove_memory(self, user_id: str, memory_id: str) -> bool: ...
        async def insert_memory(self, memory: Memory, vector: Sequence[float] | None, text: IndexedText) -> None: ...
        async def insert_pending(self, item: PendingItem) -> None: ...

    # -- reads ----------------------------------------------------------------------------------
    async def user_ids(self) -> list[str]:
        rows = await self._all(
            "select u from (select user_id as u from users union select user_id from memories) x "
            f"order by {self.dialect.by_text('u')}"
        )
        return [r[0] for r in rows]

    def _scan(self, user_id: str, statuses: Sequence[Status], after: str | None, limit: int) -> tuple[str, list[Any]]:
        d = self.dialect
        in_statuses, status_params = d.in_list("status", statuses)
        where = d.sql(
            f"user_id = {{p}} and {in_statuses} and {d.by_text('id')} > {{p}} order by {d.by_text('id')} limit {{p}}"
        )
        return where, [user_id, *status_params, after or "", limit]

    async def scan_memories(
        self, user_id: str, statuses: Sequence[Status], after: str | None, limit: int
    ) -> list[Memory]:
        """Every row, or UnreadableRow naming one that cannot be read: the pages are keyed by the last id, and
        export leaves such a user out whole (never half a user)."""
        where, params = self._scan(user_id, statuses, after, limit)
        rows = await self._all(f"select {self._memory_columns} from memories where {where}", params)
        return [self._to_memory(r) for r in rows]

    async def scan_scores(
        self, user_id: str, statuses: Sequence[Status], after: str | None, limit: int
    ) -> list[ScoreRow]:
        where, params = self._scan(user_id, statuses, after, limit)
        rows = await self._all(f"select {ScoreRow.COLUMNS} from memories where {where}", params)
        read = self.dialect.from_column
        try:
            return [ScoreRow.of(r, read) for r in rows]
        except ValueError:  # name the row that cannot be read, for the caller's report
            for r in rows:
                try:
                    ScoreRow.of(r, read)
                except ValueError as exc:
                    raise UnreadableRow("memories", user_id, str(r[0]), str(exc)) from None
            raise

    async def expired_memories(self, user_id: str, now: datetime, limit: int) -> list[Memory]:
        d = self.dialect
        return await self._memories(
            d.sql(
                "user_id = {p} and expires_at is not null and expires_at <= {p} "
                "and status in ('active', 'superseded') and persistence < {p} "
                f"order by expires_at, {d.by_text('id')} limit {{p}}"
            ),
            (user_id, d.ts(now), CORE_PERSISTENCE, limit),
        )

    async def purgeable_memories(
        self, user_id: str, now: datetime, limit: int, unsent: Unsent | None = None
    ) -> list[Memory]:
        d = self.dialect
        held = ""
        held_params: list[Any] = []
        if unsent is not None:  # left alone: rows of the named reasons changed at or after `since`
            reasons, held_params = d.in_list("delete_reason", unsent.reasons) if unsent.reasons else ("1 = 1", [])
            held = f"and not ({reasons} and {self._sync_column} >= {d.placeholder}) "
            held_params.append(int(unsent.since or 0))
        return await self._memories(
            d.sql(f"status = 'trashed' and purge_at <= {{p}} and user_id = {{p}} {held}"
                  f"order by purge_at, {d.by_text('id')} limit {{p}}"),
            (d.ts(now), user_id, *held_params, limit),
        )

    async def eviction_candidates(
        self, user_id: str, count: int, now: datetime, exclude: Sequence[str]
    ) -> list[Memory]:
        # Current importance, not the stored snapshot: info_importance * scoring.time_coef(P, days).
        d = self.dialect
        not_excluded, excluded = d.in_list("id", exclude, negate=True)
        importance, importance_params = self._current_importance(now)
        return await self._memories(
            d.sql(
                f"user_id = {{p}} and status = 'active' and persistence < {{p}} and {not_excluded} "
                f"order by {importance}, created_at, {d.tie_break} limit {{p}}"
            ),
            (user_id, CORE_PERSISTENCE, *excluded, *importance_params, count),
        )

    async def open_todos(
        self, user_id: str, now: datetime, limit: int, due_by: datetime | None = None, latest_first: bool = False
    ) -> list[Memory]:
        d = self.dialect
        if due_by is not None:
            order = "desc" if latest_first else "asc"
            return await self._memories(
                d.sql(
                    f"user_id = {{p}} and {_OPEN_TODO} and {_UNEXPIRED} and {_TODO_TIME} <= {{p}} "
                    f"order by {_TODO_TIME} {order}, {d.by_text('id')} {order} limit {{p}}"
                ),
                (user_id, d.ts(now), d.ts(due_by), limit),
            )
        return await self._memories(
            d.sql(
                f"user_id = {{p}} and {_OPEN_TODO} and {_UNEXPIRED} "
                f"order by {_TODO_TIME} is null, {_TODO_TIME}, created_at, {d.by_text('id')} limit {{p}}"
            ),
            (user_id, d.ts(now), limit),
        )

    async def count_open_todos(self, user_id: str, now: datetime) -> int:
        d = self.dialect
        row = await self._one(
            d.sql(f"select count(*) from memories where user_id = {{p}} and {_OPEN_TODO} and {_UNEXPIRED}"),
            (user_id, d.ts(now)),
        )
        return int(row[0])

    async def usage(self, user_id: str, memory_ids: Sequence[str] | None = None) -> dict[str, Usage]:
        d = self.dialect
        where, params = d.sql("user_id = {p}"), [user_id]
        if memory_ids is not None:
            if not memory_ids:
                return {}
            in_ids, id_params = d.in_list("memory_id", memory_ids)
            where, params = f"{where} and {in_ids}", [*params, *id_params]
        rows = await self._all(f"select {USAGE_COLUMNS} from memory_usage where {where}", params)
        return {r[1]: usage_from_row(r, d) for r in rows}

    async def all_pending(self, user_id: str) -> list[PendingItem]:
        d = self.dialect
        rows = await self._all(
            d.sql(
                f"select {self._pending_columns} from memory_pending where user_id = {{p}} "
                f"order by created_at, {d.by_text('id')}"
            ),
            (user_id,),
        )
        return [self._to_pending(r) for r in rows]

    # -- writes ---------------------------------------------------------------------------------
    async def purge_memory(self, user_id: str, memory_id: str, when: datetime) -> bool:
        if not await self.remove_memory(user_id, memory_id):
            return False
        await self._mark_purged(user_id, memory_id, when)
        return True

    async def add_uses(self, user_id: str, memory_ids: Sequence[str], now: datetime) -> None:
        d = self.dialect
        for memory_id in dict.fromkeys(memory_ids):
            await self._exec(
                d.sql(
                    "insert into memory_usage (user_id, memory_id, used_count, last_used_at) values ({p}, {p}, 1, {p}) "
                    "on conflict (user_id, memory_id) do update set used_count = memory_usage.used_count + 1, "
                    "last_used_at = excluded.last_used_at"
                ),
                (user_id, memory_id, d.ts(now)),
            )

    async def put_usage(self, usage: Usage) -> None:
        d = self.dialect
        await self._exec(
            f"insert into memory_usage ({USAGE_COLUMNS}) values ({d.placeholders(6)}) "
            "on conflict (user_id, memory_id) do update set used_count = excluded.used_count, "
            "last_used_at = excluded.last_used_at, used_mark = excluded.used_mark, "
            "recalled_mark = excluded.recalled_mark",
            (
                usage.user_id,
                usage.memory_id,
                usage.used_count,
                d.ts(usage.last_used_at),
                usage.used_mark,
                usage.recalled_mark,
            ),
        )

    async def import_memory(self, memory: Memory, vector: Sequence[float] | None, text: IndexedText) -> bool:
        # Memory ids are unique across users: an id taken by anyone is not inserted again.
        if await self._one(self.dialect.sql("select 1 from memories where id = {p}"), (memory.id,)):
            return False
        await self.insert_memory(memory, vector, text)
        return True

    async def import_pending(self, item: PendingItem) -> bool:
        if await self._one(self.dialect.sql("select 1 from memory_pending where id = {p}"), (item.id,)):
            return False
        await self.insert_pending(item)
        return True

    async def import_user(self, user: Mapping[str, Any]) -> bool:
        d = self.dialect

        def stamp(value: Any) -> Any:
            return d.ts(value if isinstance(value, datetime) else from_iso(str(value)))

        count = await self._exec(
            "insert into users (user_id, display_name, identity_confirmed, persona, created_at, updated_at) "
            f"values ({d.placeholders(6)}) on conflict (user_id) do nothing",
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
