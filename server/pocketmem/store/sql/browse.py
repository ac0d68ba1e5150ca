"""Queries of the management page for both backends: the filtered, sorted list, chart counts.

A memory's events for the page are in events.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pocketmem.base.models import EventKind, Memory, Status
from pocketmem.store.policy import CORE_PERSISTENCE
from pocketmem.store.sql.dialect import Dialect
from pocketmem.store.sql.profile import listing_where
from pocketmem.store.sql.queries import Queries
from pocketmem.store.types import BrowseFilter

# Each order ends with the insertion order ({tie}) so a page is stable; "importance" is the order of the
# index memories_by_importance, ties included.
_ORDERS = {
    "newest": "created_at desc, {tie} desc",
    "oldest": "created_at, {tie}",
    "importance": "importance desc, {tie}",
    "uses": "use_count desc, created_at desc, {tie} desc",  # the order of memories_by_uses
}


def browse_where(d: Dialect, user_id: str, flt: BrowseFilter) -> tuple[str, list[Any]]:
    clause, params = listing_where(d, user_id, flt.statuses, flt.category, flt.text, flt.since, flt.until)
    where = [clause]
    if flt.core is not None:
        where.append(d.sql("persistence >= {p}" if flt.core else "persistence < {p}"))
        params.append(CORE_PERSISTENCE)
    if flt.source is not None:
        where.append(d.sql("source = {p}"))
        params.append(flt.source)
    return " and ".join(where), params


class BrowseQueries(Queries):
    if TYPE_CHECKING:

        async def count_active(self, user_id: str) -> int: ...

    async def browse_memories(self, user_id: str, flt: BrowseFilter) -> tuple[list[Memory], int]:
        d = self.dialect
        clause, params = browse_where(d, user_id, flt)
        if tuple(flt.statuses) == (Status.active,) and len(params) == 2:
            total = await self.count_active(user_id)  # SQLite: the kept count (memory_counts), not an index scan
        else:
            row = await self._one(f"select count(*) from memories where {clause}", params)
            total = row[0] if row else 0
        order = _ORDERS[flt.order].format(tie=d.tie_break)
        if flt.order in ("newest", "oldest") and tuple(flt.statuses) == (Status.trashed,):
            order = order.replace("created_at", "deleted_at")
        page = d.sql(f"{clause} order by {order} limit {{p}} offset {{p}}")
        if d.narrow_page:
            # The page's ids first, from the index alone where the order allows, then those rows: a deep
            # offset then skips index entries, not whole rows (each carries its vector).
            page = f"{d.tie_break} in (select {d.tie_break} from memories where {page}) order by {order}"
        return await self._memories(page, (*params, flt.limit, flt.offset)), int(total)

    async def _per_quarter(
        self, table: str, key: str, user_id: str, since: datetime, in_list: tuple[str, list[Any]]
    ) -> list[tuple[str, str, int]]:
        """(UTC quarter hour, key, rows) of the user's rows in `table` created since `since`, within `in_list`: fine
        enough for the service to count them per calendar day in any time zone (every offset is a multiple of 15')."""
        d = self.dialect
        rows = await self._all(
            d.sql(
                f"select {d.quarter_of('created_at')}, {key}, count(*) from {table} "
                f"where user_id = {{p}} and created_at >= {{p}} and {in_list[0]} group by 1, 2"
            ),
            (user_id, d.ts(since), *in_list[1]),
        )
        return [(r[0], r[1], int(r[2])) for r in rows]

    async def created_per_quarter(
        self, user_id: str, since: datetime, statuses: Sequence[Status]
    ) -> list[tuple[str, str, int]]:
        return await self._per_quarter("memories", "category", user_id, since, self.dialect.in_list("status", statuses))

    async def events_per_quarter(
        self, user_id: str, kinds: Sequence[EventKind], since: datetime
    ) -> list[tuple[str, str, int]]:
        return await self._per_quarter("memory_events", "kind", user_id, since, self.dialect.in_list("kind", kinds))

    async def importance_histogram(self, user_id: str, buckets: int) -> list[tuple[int, int]]:
        # Every active memory through the importance index, less the (few) core ones: no scan of the table.
        d = self.dialect
        bucket = d.clamp(d.floor(f"importance * {d.placeholder}"), "0", f"{d.placeholder} - 1")
        active = d.sql(f"select {bucket}, count(*) from memories where user_id = {{p}} and status = 'active'")
        rows = await self._all(f"{active} group by 1", (buckets, buckets, user_id))
        core = dict(
            await self._all(
                d.sql(f"{active} and persistence >= {{p}} group by 1"), (buckets, buckets, user_id, CORE_PERSISTENCE)
            )
        )
        counts = [(int(b), int(n) - int(core.get(b, 0))) for b, n in rows]
        return sorted((b, n) for b, n in counts if n > 0)

    async def lowest_importance(self, user_id: str, count: int) -> list[Memory]:
        d = self.dialect
        return await self._memories(
            d.sql(
                "user_id = {p} and status = 'active' and persistence < {p} "
                f"order by importance, {d.by_text('id')} limit {{p}}"
            ),
            (user_id, CORE_PERSISTENCE, count),
        )
