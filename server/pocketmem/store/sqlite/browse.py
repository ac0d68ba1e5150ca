"""SQLite queries for the management page: the filtered, sorted list, a memory's events, chart counts.

A mixin of `SQLiteTx` (store/sqlite/store.py), which provides `_all`, `_one`, `_memories` and
`count_active`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pocketmem.base.clock import to_iso
from pocketmem.base.models import Event, EventKind, Memory, Status
from pocketmem.store.base import BrowseFilter
from pocketmem.store.sqlite.records import EVENT_COLUMNS, event_from_row, placeholders

_ORDERS = {
    "newest": "created_at desc, rowid desc",
    "oldest": "created_at, rowid",
    "importance": "importance desc, rowid",  # the order of memories_by_importance, ties included
    "uses": "use_count desc, created_at desc, rowid desc",  # the order of memories_by_uses
}


def browse_where(user_id: str, flt: BrowseFilter) -> tuple[str, list[Any]]:
    where = ["user_id = ?", f"status in ({placeholders(len(flt.statuses))})"]
    params: list[Any] = [user_id, *flt.statuses]
    if flt.category is not None:
        where.append("category = ?")
        params.append(flt.category.value)
    if flt.core is not None:
        where.append("persistence >= 1" if flt.core else "persistence < 1")
    if flt.source is not None:
        where.append("source = ?")
        params.append(flt.source)
    if flt.since is not None:
        where.append("created_at >= ?")
        params.append(to_iso(flt.since))
    if flt.until is not None:
        where.append("created_at < ?")
        params.append(to_iso(flt.until))
    if flt.text:
        where.append("(instr(lower(content), lower(?)) > 0 or instr(lower(keywords), lower(?)) > 0)")
        params.extend([flt.text, flt.text])
    return " and ".join(where), params


class BrowseQueries:
    if TYPE_CHECKING:

        async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any | None: ...
        async def _memories(self, sql: str, params: Sequence[Any]) -> list[Memory]: ...
        async def count_active(self, user_id: str) -> int: ...

    async def browse_memories(self, user_id: str, flt: BrowseFilter) -> tuple[list[Memory], int]:
        clause, params = browse_where(user_id, flt)
        if tuple(flt.statuses) == (Status.active,) and len(params) == 2:
            total = await self.count_active(user_id)  # the kept count (memory_counts), not a scan of the index
        else:
            row = await self._one(f"select count(*) from memories where {clause}", params)
            total = row[0] if row else 0
        order = _ORDERS[flt.order]
        if flt.order in ("newest", "oldest") and tuple(flt.statuses) == (Status.trashed,):
            order = order.replace("created_at", "deleted_at")
        # The page's rowids first, from the index alone where the order allows, then those rows: a deep
        # offset then skips index entries, not whole rows (each carries its vector).
        found = await self._memories(
            f"rowid in (select rowid from memories where {clause} order by {order} limit ? offset ?) order by {order}",
            (*params, flt.limit, flt.offset),
        )
        return found, int(total)

    async def memory_events(self, user_id: str, memory_id: str, limit: int) -> list[Event]:
        rows = await self._all(
            f"select {EVENT_COLUMNS} from memory_events where memory_id = ? and user_id = ? order by id desc limit ?",
            (memory_id, user_id, limit),
        )
        return [event_from_row(r) for r in rows]

    async def latest_event_id(self, user_id: str) -> int:
        row = await self._one("select max(id) from memory_events where user_id = ?", (user_id,))
        return int(row[0] or 0) if row else 0

    async def created_per_day(
        self, user_id: str, since: datetime, statuses: Sequence[Status]
    ) -> list[tuple[str, str, int]]:
        rows = await self._all(
            "select substr(created_at, 1, 10), category, count(*) from memories "
            f"where user_id = ? and status in ({placeholders(len(statuses))}) and created_at >= ? group by 1, 2",
            (user_id, *statuses, to_iso(since)),
        )
        return [(r[0], r[1], int(r[2])) for r in rows]

    async def events_per_day(
        self, user_id: str, kinds: Sequence[EventKind], since: datetime
    ) -> list[tuple[str, str, int]]:
        rows = await self._all(
            "select substr(created_at, 1, 10), kind, count(*) from memory_events "
            f"where user_id = ? and created_at >= ? and kind in ({placeholders(len(kinds))}) group by 1, 2",
            (user_id, to_iso(since), *kinds),
        )
        return [(r[0], r[1], int(r[2])) for r in rows]

    async def importance_histogram(self, user_id: str, buckets: int) -> list[tuple[int, int]]:
        # Every active memory through the importance index, less the (few) core ones: no scan of the table.
        bucket = "min(max(cast(importance * ? as integer), 0), ? - 1)"
        rows = await self._all(
            f"select {bucket}, count(*) from memories where user_id = ? and status = 'active' group by 1",
            (buckets, buckets, user_id),
        )
        core = dict(await self._all(
            f"select {bucket}, count(*) from memories where user_id = ? and status = 'active' and persistence >= 1 "
            "group by 1",
            (buckets, buckets, user_id),
        ))
        counts = [(int(b), int(n) - int(core.get(b, 0))) for b, n in rows]
        return sorted((b, n) for b, n in counts if n > 0)

    async def lowest_importance(self, user_id: str, count: int) -> list[Memory]:
        return await self._memories(
            "user_id = ? and status = 'active' and persistence < 1 order by importance limit ?", (user_id, count)
        )
