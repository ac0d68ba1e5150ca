"""SQLite queries for a store's life over time: maintenance scans, todos, usage, purge, export and import.

A mixin of `SQLiteTx` (store/sqlite.py), which provides the connection helpers (`_all`, `_one`,
`_exec`, `_rowid`), the memory row mapping and `insert_memory`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from pocketmem.base.errors import UnreadableRow
from pocketmem.base.models import Event, Memory, PendingItem, Revision, Status, Tombstone, Usage
from pocketmem.core.instants import decode as from_iso
from pocketmem.core.instants import encode as to_iso
from pocketmem.store.base import IndexedText, ScoreRow, term_deltas
from pocketmem.store.policy import CORE_PERSISTENCE
from pocketmem.store.sqlite.records import (
    EVENT_COLUMNS,
    REVISION_COLUMNS,
    TOMBSTONE_COLUMNS,
    USAGE_COLUMNS,
    event_from_row,
    payload_text,
    placeholders,
    revision_from_row,
    revision_params,
    tombstone_from_row,
    tombstone_params,
    ts,
    usage_from_row,
)

if TYPE_CHECKING:
    from collections.abc import Callable

# The same expression as the partial index memories_open_todos (m002), so SQLite can use it.
_OPEN_TODO = "status = 'active' and category = 'todo' and completed_at is null"
_TODO_TIME = "coalesce(remind_at, due_at)"
IMPORT_ID_CHUNK = 500  # ids per "which are taken" query (SQLite's default limit is 32,766 parameters)


class UpkeepQueries:
    _memory_columns: ClassVar[str]
    _pending_columns: ClassVar[str]
    _to_memory: Callable[[Sequence[Any]], Memory]
    _to_pending: Callable[[Sequence[Any]], PendingItem]
    _vectors: bool
    _db: Any
    _pack: Callable[[Sequence[float]], bytes]
    _memory_params: Callable[[Memory], tuple[Any, ...]]

    if TYPE_CHECKING:

        async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
        async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int: ...
        async def _rowid(self, user_id: str, memory_id: str) -> int | None: ...
        async def remove_memory(self, user_id: str, memory_id: str) -> bool: ...
        async def insert_memory(self, memory: Memory, vector: Sequence[float], text: IndexedText) -> None: ...
        async def insert_pending(self, item: PendingItem) -> None: ...

    async def _memories(self, sql: str, params: Sequence[Any]) -> list[Memory]:
        rows = await self._all(f"select {self._memory_columns} from memories where {sql}", params)
        return [self._to_memory(r) for r in rows]

    # -- reads ----------------------------------------------------------------------------------
    async def user_ids(self) -> list[str]:
        rows = await self._all(
            "select user_id from users union select distinct user_id from memories order by 1"
        )
        return [r[0] for r in rows]

    async def scan_memories(
        self, user_id: str, statuses: Sequence[Status], after: str | None, limit: int
    ) -> list[Memory]:
        return await self._memories(
            f"user_id = ? and status in ({placeholders(len(statuses))}) and id > ? order by id limit ?",
            (user_id, *statuses, after or "", limit),
        )

    async def scan_scores(
        self, user_id: str, statuses: Sequence[Status], after: str | None, limit: int
    ) -> list[ScoreRow]:
        rows = await self._all(
            f"select {ScoreRow.COLUMNS} from memories where user_id = ? and status in ({placeholders(len(statuses))}) "
            "and id > ? order by id limit ?",
            (user_id, *statuses, after or "", limit),
        )
        try:
            return [ScoreRow.of(r, from_iso) for r in rows]
        except ValueError:  # name the row that cannot be read, for the caller's report
            for r in rows:
                try:
                    ScoreRow.of(r, from_iso)
                except ValueError as exc:
                    raise UnreadableRow("memories", user_id, str(r[0]), str(exc)) from None
            raise

    async def expired_memories(self, user_id: str, now: datetime, limit: int) -> list[Memory]:
        return await self._memories(
            "user_id = ? and expires_at is not null and expires_at <= ? and status in ('active', 'superseded') "
            "and persistence < ? order by expires_at, id limit ?",
            (user_id, to_iso(now), CORE_PERSISTENCE, limit),
        )

    async def purgeable_memories(self, user_id: str, now: datetime, limit: int) -> list[Memory]:
        return await self._memories(
            "status = 'trashed' and purge_at <= ? and user_id = ? order by purge_at, id limit ?",
            (to_iso(now), user_id, limit),
        )

    async def open_todos(self, user_id: str, limit: int, due_by: datetime | None = None) -> list[Memory]:
        if due_by is not None:
            return await self._memories(
                f"user_id = ? and {_OPEN_TODO} and {_TODO_TIME} <= ? order by {_TODO_TIME}, id limit ?",
                (user_id, to_iso(due_by), limit),
            )
        return await self._memories(
            f"user_id = ? and {_OPEN_TODO} order by {_TODO_TIME} is null, {_TODO_TIME}, created_at, id limit ?",
            (user_id, limit),
        )

    async def usage(self, user_id: str, memory_ids: Sequence[str] | None = None) -> dict[str, Usage]:
        if memory_ids is None:
            rows = await self._all(f"select {USAGE_COLUMNS} from memory_usage where user_id = ?", (user_id,))
        elif not memory_ids:
            return {}
        else:
            rows = await self._all(
                f"select {USAGE_COLUMNS} from memory_usage where user_id = ? "
                f"and memory_id in ({placeholders(len(memory_ids))})",
                (user_id, *memory_ids),
            )
        return {r[1]: usage_from_row(r) for r in rows}

    async def all_tombstones(self, user_id: str) -> list[Tombstone]:
        rows = await self._all(
            f"select {TOMBSTONE_COLUMNS} from memory_tombstones where user_id = ? order by deleted_at, tombstone_id",
            (user_id,),
        )
        return [tombstone_from_row(r) for r in rows]

    async def all_revisions(self, user_id: str) -> list[Revision]:
        rows = await self._all(
            f"select {REVISION_COLUMNS} from memory_revisions where user_id = ? order by created_at, rowid",
            (user_id,),
        )
        return [revision_from_row(r) for r in rows]

    async def all_pending(self, user_id: str) -> list[PendingItem]:
        rows = await self._all(
            f"select {self._pending_columns} from memory_pending where user_id = ? order by created_at, id",
            (user_id,),
        )
        return [self._to_pending(r) for r in rows]

    async def events_after(self, user_id: str, after_id: int, limit: int) -> list[Event]:
        rows = await self._all(
            f"select {EVENT_COLUMNS} from memory_events where user_id = ? and id > ? order by id limit ?",
            (user_id, after_id, limit),
        )
        return [event_from_row(r) for r in rows]

    # -- writes ---------------------------------------------------------------------------------
    async def purge_memory(self, user_id: str, memory_id: str, when: datetime) -> bool:
        if not await self.remove_memory(user_id, memory_id):
            return False
        await self._exec(
            "update memory_tombstones set purged_at = ? where user_id = ? and memory_id = ? and purged_at is null",
            (to_iso(when), user_id, memory_id),
        )
        return True

    async def add_uses(self, user_id: str, memory_ids: Sequence[str], now: datetime) -> None:
        for memory_id in dict.fromkeys(memory_ids):
            await self._exec(
                "insert into memory_usage (user_id, memory_id, used_count, last_used_at) values (?, ?, 1, ?) "
                "on conflict (user_id, memory_id) do update set used_count = used_count + 1, "
                "last_used_at = excluded.last_used_at",
                (user_id, memory_id, to_iso(now)),
            )

    async def put_usage(self, usage: Usage) -> None:
        await self._exec(
            f"insert into memory_usage ({USAGE_COLUMNS}) values ({placeholders(6)}) "
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
        if await self._one("select 1 from memories where id = ?", (memory.id,)):
            return False
        await self.insert_memory(memory, vector, text)
        return True

    async def import_memories(self, rows: Sequence[tuple[Memory, Sequence[float], IndexedText]]) -> list[bool]:
        # A batch in four statements: which ids are taken, then memories, keyword rows and vectors each with
        # one executemany. Rowids are given explicitly (after the largest, as SQLite would pick them) so the
        # three tables line up without reading each new rowid back; the write transaction holds the lock.
        ids = [memory.id for memory, _, _ in rows]
        taken: set[str] = set()
        for start in range(0, len(ids), IMPORT_ID_CHUNK):
            chunk = ids[start : start + IMPORT_ID_CHUNK]
            found = await self._all(f"select id from memories where id in ({placeholders(len(chunk))})", chunk)
            taken.update(row[0] for row in found)
        fresh: dict[str, tuple[Memory, Sequence[float], IndexedText]] = {}
        for row in rows:
            if row[0].id not in taken:
                fresh.setdefault(row[0].id, row)
        if not fresh:
            return [False] * len(rows)
        first = (await self._one("select coalesce(max(rowid), 0) from memories"))[0] + 1
        # The sync order (the sync trigger bumps sync_clock and rewrites each new row) is given in the insert
        # instead: the same numbers the trigger would give, without writing every row twice.
        seq, quiet = await self._one("select seq, quiet from sync_clock where id = 1")
        memories, texts, vectors = [], [], []
        for n, (memory, vector, text) in enumerate(fresh.values()):
            blob = self._pack(vector)
            memories.append((first + n, *self._memory_params(memory), blob, seq + n + 1 if not quiet else 0))
            texts.append((first + n, text.terms, text.keyword_terms))
            vectors.append((first + n, memory.user_id, memory.status.value, blob))
        if not quiet:
            await self._exec("update sync_clock set seq = ?, quiet = 1 where id = 1", (seq + len(fresh),))
        await self._db.executemany(
            f"insert into memories (rowid, {self._memory_columns}, embedding, sync_seq) values ({placeholders(35)})",
            memories,
        )
        if not quiet:
            await self._exec("update sync_clock set quiet = 0 where id = 1")
        await self._db.executemany("insert into memories_fts (rowid, terms, keywords) values (?, ?, ?)", texts)
        await self._count_batch_terms(fresh.values())
        if self._vectors:
            await self._db.executemany(
                "insert into memory_vectors (rowid, user_id, status, embedding) values (?, ?, ?, ?)", vectors
            )
        inserted = {id(row) for row in fresh.values()}
        return [id(row) in inserted for row in rows]

    async def _count_batch_terms(self, rows: Iterable[tuple[Memory, Sequence[float], IndexedText]]) -> None:
        """user_terms for a batch in one statement, as insert_memory keeps it for one memory."""
        counts: dict[tuple[str, str], int] = {}
        for memory, _, text in rows:
            for term, delta in term_deltas(None, text).items():
                counts[(memory.user_id, term)] = counts.get((memory.user_id, term), 0) + delta
        await self._db.executemany(
            "insert into user_terms (user_id, term, docs) values (?, ?, ?) "
            "on conflict (user_id, term) do update set docs = docs + excluded.docs",
            [(user_id, term, n) for (user_id, term), n in counts.items()],
        )

    async def import_tombstone(self, tombstone: Tombstone) -> bool:
        count = await self._exec(
            f"insert into memory_tombstones ({TOMBSTONE_COLUMNS}) values ({placeholders(10)}) "
            "on conflict (tombstone_id) do nothing",
            tombstone_params(tombstone),
        )
        return count > 0

    async def import_revision(self, revision: Revision) -> bool:
        count = await self._exec(
            f"insert into memory_revisions ({REVISION_COLUMNS}) values ({placeholders(8)}) on conflict (id) do nothing",
            revision_params(revision),
        )
        return count > 0

    async def import_pending(self, item: PendingItem) -> bool:
        if await self._one("select 1 from memory_pending where id = ?", (item.id,)):
            return False
        await self.insert_pending(item)
        return True

    async def import_event(self, event: Event, nth: int = 0) -> bool:
        payload = payload_text(event.payload)
        created = to_iso(event.created_at)
        same = await self._one(
            "select count(*) from memory_events where user_id = ? and created_at = ? and kind = ? "
            "and memory_id is ? and operation_id is ? and payload = ?",
            (event.user_id, created, event.kind.value, event.memory_id, event.operation_id, payload),
        )
        if same[0] > nth:
            return False
        taken = await self._one("select 1 from memory_events where id = ?", (event.id,))
        columns = "user_id, kind, memory_id, operation_id, payload, created_at"
        values: tuple[Any, ...] = (
            event.user_id,
            event.kind.value,
            event.memory_id,
            event.operation_id,
            payload,
            created,
        )
        if not taken:
            columns, values = f"id, {columns}", (event.id, *values)
        await self._exec(
            f"insert into memory_events ({columns}) values ({placeholders(len(values))})", values
        )
        return True

    async def import_user(self, user: Mapping[str, Any]) -> bool:
        def stamp(value: Any) -> str:
            return to_iso(value if isinstance(value, datetime) else from_iso(str(value)))

        count = await self._exec(
            "insert into users (user_id, display_name, identity_confirmed, persona, created_at, updated_at) "
            "values (?, ?, ?, ?, ?, ?) on conflict (user_id) do nothing",
            (
                user["user_id"],
                user.get("display_name"),
                1 if user.get("identity_confirmed") else 0,
                user.get("persona"),
                stamp(user["created_at"]),
                stamp(user["updated_at"]),
            ),
        )
        return count > 0
