"""Reads of memory rows, for both backends: by id, by hash, successors, listings, the core set, stats."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pocketmem.base.errors import UnreadableRow
from pocketmem.base.models import Memory, Status
from pocketmem.store.policy import CORE_PERSISTENCE
from pocketmem.store.sql.dialect import Dialect
from pocketmem.store.sql.profile import memory_filter_clause
from pocketmem.store.sql.records import MEMORY_COLUMNS, memory_from_row, readable
from pocketmem.store.types import MemoryFilter, StoreStats


class MemoryQueries:
    """Mixed into each backend's transaction class (sql/shared.py)."""

    dialect: Dialect
    left_out: list[UnreadableRow]  # set by the transaction class

    if TYPE_CHECKING:

        async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
        def _to_memory(self, row: Sequence[Any]) -> Memory: ...

    async def _memories(self, where: str, params: Sequence[Any]) -> list[Memory]:
        """The rows that can be read; one that cannot is left out with a warning (records.readable)."""
        rows = await self._all(f"select {MEMORY_COLUMNS} from memories where {where}", params)
        return readable(rows, self._to_memory, self.left_out)

    async def get_memory(self, user_id: str, memory_id: str) -> Memory | None:
        """The memory named by its id; UnreadableRow when its row cannot be read (the message names the repair)."""
        d = self.dialect
        where = d.sql(f"id = {{p}} and {d.owner()} = {{p}}")
        row = await self._one(f"select {MEMORY_COLUMNS} from memories where {where}", (memory_id, user_id))
        return memory_from_row(row, d) if row else None

    async def ids_starting(self, user_id: str, prefix: str, table: str = "memories") -> list[str]:
        """At most two ids of this user's memories (or, with table="memory_pending", pending items) that start
        with `prefix`: a short id typed on the command line is unique when one comes back."""
        assert table in ("memories", "memory_pending")
        rows = await self._all(
            self.dialect.sql(
                f"select id from {table} where user_id = {{p}} and substr(id, 1, {len(prefix)}) = {{p}} limit 2"
            ),
            (user_id, prefix),
        )
        return [row[0] for row in rows]

    async def get_memories(self, user_id: str, memory_ids: Sequence[str]) -> list[Memory]:
        if not memory_ids:
            return []
        d = self.dialect
        ids, params = d.in_list("id", memory_ids)
        found = await self._memories(d.sql(f"{d.owner()} = {{p}} and {ids}"), (user_id, *params))
        by_id = {m.id: m for m in found}
        return [by_id[i] for i in memory_ids if i in by_id]

    async def memory_owners(self, memory_ids: Sequence[str]) -> dict[str, str]:
        if not memory_ids:
            return {}
        ids, params = self.dialect.in_list("id", memory_ids)
        return {row[0]: row[1] for row in await self._all(f"select id, user_id from memories where {ids}", params)}

    async def find_by_hash(self, user_id: str, content_hash: str, statuses: Sequence[Status]) -> Memory | None:
        d = self.dialect
        wanted, params = d.in_list("status", statuses)
        rows = await self._all(
            d.sql(
                f"select {MEMORY_COLUMNS} from memories {d.index_hint('memories_by_hash')}where user_id = {{p}} "
                f"and {wanted} and content_hash = {{p}}"
            ),
            (user_id, *params, content_hash),
        )
        found = readable(rows, self._to_memory, self.left_out)
        return found[0] if found else None

    async def successor_of(self, user_id: str, memory_id: str) -> Memory | None:
        d = self.dialect
        found = await self._memories(
            d.sql(
                "user_id = {p} and supersedes = {p} and status in ('active', 'superseded') "
                f"order by created_at desc, {d.tie_break} desc limit 1"
            ),
            (user_id, memory_id),
        )
        return found[0] if found else None

    async def missing_vectors(self, limit: int, after: int = 0) -> list[tuple[int, str, str, str, list[str]]]:
        d = self.dialect
        rows = await self._all(
            d.sql(
                f"select {d.tie_break}, user_id, id, content, keywords from memories where embedding is null "
                f"and {d.tie_break} > {{p}} order by {d.tie_break} limit {{p}}"
            ),
            (after, limit),
        )
        return [(int(r[0]), r[1], r[2], r[3], list(d.from_json(r[4]))) for r in rows]

    async def holds_vectors(self) -> bool:
        return await self._one("select 1 from memories where embedding is not null limit 1") is not None

    async def list_memories(self, user_id: str, flt: MemoryFilter) -> tuple[list[Memory], int]:
        d = self.dialect
        clause, params = memory_filter_clause(self.dialect, user_id, flt)
        total = (await self._one(f"select count(*) from memories where {clause}", params))[0]
        order = "deleted_at desc" if tuple(flt.statuses) == (Status.trashed,) else "created_at desc"
        # One category's page: from that category's rows, not by walking every memory in date order.
        hint = d.index_hint("memories_by_category") if flt.category is not None else ""
        rows = await self._all(
            d.sql(
                f"select {MEMORY_COLUMNS} from memories {hint}where {clause} "
                f"order by {order}, {d.tie_break} desc limit {{p}} offset {{p}}"
            ),
            (*params, flt.limit, flt.offset),
        )
        return readable(rows, self._to_memory, self.left_out), int(total)

    async def core_memories(self, user_id: str, limit: int) -> list[Memory]:
        d = self.dialect
        # By the core index: the few core memories sorted, instead of every active memory walked in creation
        # order until `limit` core ones are found (all of them when there are fewer).
        rows = await self._all(
            d.sql(
                f"select {MEMORY_COLUMNS} from memories {d.index_hint('memories_core')}"
                "where user_id = {p} and status = 'active' and persistence >= {p} and completed_at is null "
                f"order by created_at, {d.tie_break} limit {{p}}"
            ),
            (user_id, CORE_PERSISTENCE, limit),
        )
        return readable(rows, self._to_memory, self.left_out)

    async def count_core(self, user_id: str) -> int:
        row = await self._one(
            self.dialect.sql(
                f"select count(*) from memories {self.dialect.index_hint('memories_core')}"
                "where user_id = {p} and status = 'active' and persistence >= {p} and completed_at is null"
            ),
            (user_id, CORE_PERSISTENCE),
        )
        return int(row[0])

    async def memories_between(
        self, user_id: str, start: datetime, end: datetime, statuses: Sequence[Status], limit: int
    ) -> list[Memory]:
        d = self.dialect
        wanted, params = d.in_list("status", statuses)
        return await self._memories(
            d.sql(
                f"user_id = {{p}} and {wanted} and valid_from >= {{p}} and valid_from < {{p}} "
                f"order by valid_from desc, {d.tie_break} desc limit {{p}}"
            ),
            (user_id, *params, d.ts(start), d.ts(end), limit),
        )

    async def stats(self, user_id: str) -> StoreStats:
        d = self.dialect
        out = StoreStats()
        for status, count in await self._all(
            d.sql("select status, count(*) from memories where user_id = {p} group by status"), (user_id,)
        ):
            out.by_status[status] = int(count)
        for category, count in await self._all(
            d.sql(
                "select category, count(*) from memories where user_id = {p} and status = 'active' group by category"
            ),
            (user_id,),
        ):
            out.by_category[category] = int(count)
        core, oldest, newest = await self._one(
            d.sql(
                "select coalesce(sum(case when persistence >= {p} then 1 else 0 end), 0), min(created_at), "
                "max(created_at) from memories where user_id = {p} and status = 'active'"
            ),
            (CORE_PERSISTENCE, user_id),
        )
        out.core = int(core)
        for name, value in (("oldest", oldest), ("newest", newest)):
            try:
                setattr(out, name, d.dt(value))
            except ValueError as exc:  # counted anyway; `pocketmem doctor` names the row
                out.unreadable.append(f"{name} created_at: {exc}")
        counts = await self._one(
            d.sql(
                "select (select count(*) from memory_pending where user_id = {p} "
                "and status in ('pending', 'snoozed')), "
                "(select count(*) from memory_tombstones where user_id = {p}), "
                "(select count(*) from memory_revisions where user_id = {p}), "
                "(select count(*) from memory_events where user_id = {p})"
            ),
            (user_id,) * 4,
        )
        out.pending, out.tombstones, out.revisions, out.events = (int(n) for n in counts)
        return out
