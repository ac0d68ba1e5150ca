"""PostgreSQL queries for the management page, the counterpart of store/sqlite/browse.py.

A mixin of `PostgresTx` (store/postgres/tx.py), which provides `_all`, `_one` and `_memories`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pocketmem.base.models import Event, EventKind, Memory, Status
from pocketmem.store.base import BrowseFilter
from pocketmem.store.postgres.records import EVENT_COLUMNS, event_from_row, ts

_ORDERS = {
    "newest": "created_at desc, seq desc",
    "oldest": "created_at, seq",
    "importance": "importance desc, seq desc",
    "uses": "use_count desc, created_at desc, seq desc",  # the order of memories_by_uses
}
_UTC_DAY = "to_char(created_at at time zone 'UTC', 'YYYY-MM-DD')"


def browse_where(user_id: str, flt: BrowseFilter) -> tuple[str, list[Any]]:
    where = ["user_id = %s", "status = any(%s)"]
    params: list[Any] = [user_id, [str(s) for s in flt.statuses]]
    if len(flt.statuses) == 1:  # one status as an equality: an index then also gives the order (no sort)
        where[1], params[1] = "status = %s", str(flt.statuses[0])
    if flt.category is not None:
        where.append("category = %s")
        params.append(flt.category.value)
    if flt.core is not None:
        where.append("persistence >= 1" if flt.core else "persistence < 1")
    if flt.source is not None:
        where.append("source = %s")
        params.append(flt.source)
    if flt.since is not None:
        where.append("created_at >= %s")
        params.append(ts(flt.since))
    if flt.until is not None:
        where.append("created_at < %s")
        params.append(ts(flt.until))
    if flt.text:
        where.append("(strpos(lower(content), lower(%s)) > 0 or strpos(lower(keywords::text), lower(%s)) > 0)")
        params.extend([flt.text, flt.text])
    return " and ".join(where), params


class BrowseQueries:
    if TYPE_CHECKING:

        async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any | None: ...
        async def _memories(self, where: str, params: Sequence[Any]) -> list[Memory]: ...

    async def browse_memories(self, user_id: str, flt: BrowseFilter) -> tuple[list[Memory], int]:
        clause, params = browse_where(user_id, flt)
        row = await self._one(f"select count(*) from memories where {clause}", params)
        total = row[0] if row else 0
        order = _ORDERS[flt.order]
        if flt.order in ("newest", "oldest") and tuple(flt.statuses) == (Status.trashed,):
            order = order.replace("created_at", "deleted_at")
        found = await self._memories(f"{clause} order by {order} limit %s offset %s", (*params, flt.limit, flt.offset))
        return found, int(total)

    async def memory_events(self, user_id: str, memory_id: str, limit: int) -> list[Event]:
        rows = await self._all(
            f"select {EVENT_COLUMNS} from memory_events where memory_id = %s and user_id = %s "
            "order by id desc limit %s",
            (memory_id, user_id, limit),
        )
        return [event_from_row(r) for r in rows]

    async def latest_event_id(self, user_id: str) -> int:
        row = await self._one("select max(id) from memory_events where user_id = %s", (user_id,))
        return int(row[0] or 0) if row else 0

    async def created_per_day(
        self, user_id: str, since: datetime, statuses: Sequence[Status]
    ) -> list[tuple[str, str, int]]:
        rows = await self._all(
            f"select {_UTC_DAY}, category, count(*) from memories "
            "where user_id = %s and status = any(%s) and created_at >= %s group by 1, 2",
            (user_id, [str(s) for s in statuses], ts(since)),
        )
        return [(r[0], r[1], int(r[2])) for r in rows]

    async def events_per_day(
        self, user_id: str, kinds: Sequence[EventKind], since: datetime
    ) -> list[tuple[str, str, int]]:
        rows = await self._all(
            f"select {_UTC_DAY}, kind, count(*) from memory_events "
            "where user_id = %s and created_at >= %s and kind = any(%s) group by 1, 2",
            (user_id, ts(since), [str(k) for k in kinds]),
        )
        return [(r[0], r[1], int(r[2])) for r in rows]

    async def importance_histogram(self, user_id: str, buckets: int) -> list[tuple[int, int]]:
        rows = await self._all(
            "select least(greatest(floor(importance * %s)::int, 0), %s - 1) as b, count(*) from memories "
            "where user_id = %s and status = 'active' and persistence < 1 group by b order by b",
            (buckets, buckets, user_id),
        )
        return [(int(r[0]), int(r[1])) for r in rows]

    async def lowest_importance(self, user_id: str, count: int) -> list[Memory]:
        return await self._memories(
            "user_id = %s and status = 'active' and persistence < 1 order by importance limit %s", (user_id, count)
        )
