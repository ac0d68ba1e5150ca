"""The PostgreSQL backend's queries inside one transaction: the core reads and writes of store/base.py.

Same semantics as the SQLite backend (store/sqlite.py), row for row. Differences that do not show:
keyword ranking is ts_rank over the user's pre-split terms instead of BM25 (only the order is
used), and the nearest-neighbour search uses pgvector's HNSW index (cosine) when the planner
finds it cheaper than scanning the user's rows.

Inside a write transaction every method takes a per-user advisory lock before its first
statement for that user, so one user's writes never interleave (the SQLite backend gets the
same from its single writer) while different users write in parallel.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pocketmem.base.models import (
    Event,
    EventKind,
    Memory,
    PendingItem,
    PendingStatus,
    Revision,
    Status,
    Tombstone,
)
from pocketmem.store.base import IndexedText, MemoryFilter, StoreStats, StoreWriter
from pocketmem.store.policy import CORE_PERSISTENCE
from pocketmem.store.postgres.browse import BrowseQueries
from pocketmem.store.postgres.dialect import POSTGRES
from pocketmem.store.postgres.profile import ProfileQueries, memory_filter_clause
from pocketmem.store.postgres.records import (
    EVENT_COLUMNS,
    MEMORY_COLUMNS,
    PENDING_COLUMNS,
    REVISION_COLUMNS,
    TOMBSTONE_COLUMNS,
    dt,
    event_from_row,
    memory_from_row,
    pending_from_row,
    revision_from_row,
    tombstone_from_row,
    ts,
    tsquery_text,
    vector_text,
)
from pocketmem.store.postgres.sync import SyncQueries
from pocketmem.store.postgres.upkeep import UpkeepQueries
from pocketmem.store.postgres.writes import WriteQueries
from pocketmem.store.sql.tokens import TokenQueries

USER_LOCK_SPACE = 7_117_002  # first key of the per-user pg_advisory_xact_lock
EXACT_SCAN_ROWS = 20_000  # up to this many memories, a user's nearest neighbours are found by an exact scan
EF_SEARCH_MIN, EF_SEARCH_MAX = 100, 1000

def _user_of_record(record: Any) -> str | None:
    """The user a record (a model or a mapping with `user_id`) belongs to, if it says."""
    user = record.get("user_id") if isinstance(record, Mapping) else getattr(record, "user_id", None)
    return user if isinstance(user, str) else None


def per_user_locked(cls: type) -> type:
    """Lock the user first in every public coroutine method that acts for one user.

    A method acts for a user when its first parameter is `user_id`, or when its first argument is a record
    carrying a `user_id` (a memory, tombstone, revision, pending item, usage row, imported row). No list of
    method names to keep: a new method is locked by its signature or by the record it is given.
    """
    for name in dir(cls):
        if name.startswith("_"):
            continue
        fn = getattr(cls, name)
        if not inspect.iscoroutinefunction(fn):
            continue
        params = list(inspect.signature(fn).parameters)
        if len(params) < 2:
            continue
        by_id = params[1] == "user_id"

        def wrap(fn: Any, by_id: bool) -> Any:
            @functools.wraps(fn)
            async def locked(self: PostgresTx, *args: Any, **kwargs: Any) -> Any:
                if by_id:
                    user = args[0] if args else kwargs.get("user_id")
                else:
                    user = _user_of_record(args[0]) if args else None
                if isinstance(user, str):
                    await self._lock_user(user)
                return await fn(self, *args, **kwargs)

            return locked

        setattr(cls, name, wrap(fn, by_id))
    return cls


@per_user_locked
class PostgresTx(ProfileQueries, UpkeepQueries, SyncQueries, WriteQueries, TokenQueries, BrowseQueries, StoreWriter):
    """Queries over one connection inside one transaction (psycopg 3, autocommit off by BEGIN)."""

    dialect = POSTGRES

    def __init__(self, conn: Any, *, writing: bool, vectors: bool) -> None:
        self._conn = conn
        self._writing = writing
        self._vectors = vectors
        self._locked: set[str] = set()
        self.changes: dict[str, set[EventKind]] = {}

    async def _lock_user(self, user_id: str) -> None:
        if self._writing and user_id not in self._locked:
            self._locked.add(user_id)
            await self._conn.execute(
                "select pg_advisory_xact_lock(%s, hashtext(%s))", (USER_LOCK_SPACE, user_id)
            )

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        cur = await self._conn.execute(sql, params)
        return await cur.fetchall()

    async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:  # a row, or None when there is none
        cur = await self._conn.execute(sql, params)
        return await cur.fetchone()

    async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int:
        cur = await self._conn.execute(sql, params)
        return cur.rowcount

    # Raw SQL inside this transaction, for the store that opened it (index upkeep, health) and for tests.
    execute = _exec
    fetch_one = _one
    fetch_all = _all

    @property
    def connection(self) -> Any:
        return self._conn

    async def _guarded(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """A query recall may survive failing (an index gone bad): inside a savepoint, so a failure leaves
        the transaction usable for the next query, as in SQLite."""
        async with self._conn.transaction():
            return await self._all(sql, params)

    async def _memories(self, where: str, params: Sequence[Any]) -> list[Memory]:
        rows = await self._all(f"select {MEMORY_COLUMNS} from memories where {where}", params)
        return [memory_from_row(r) for r in rows]

    # -- reads ----------------------------------------------------------------------------------
    async def get_memory(self, user_id: str, memory_id: str) -> Memory | None:
        found = await self._memories("id = %s and user_id = %s", (memory_id, user_id))
        return found[0] if found else None

    async def get_memories(self, user_id: str, memory_ids: Sequence[str]) -> list[Memory]:
        if not memory_ids:
            return []
        by_id = {m.id: m for m in await self._memories("user_id = %s and id = any(%s)", (user_id, list(memory_ids)))}
        return [by_id[i] for i in memory_ids if i in by_id]

    async def find_by_hash(self, user_id: str, content_hash: str, statuses: Sequence[Status]) -> Memory | None:
        found = await self._memories(
            "user_id = %s and status = any(%s) and content_hash = %s limit 1",
            (user_id, [str(s) for s in statuses], content_hash),
        )
        return found[0] if found else None

    async def successor_of(self, user_id: str, memory_id: str) -> Memory | None:
        found = await self._memories(
            "user_id = %s and supersedes = %s and status in ('active', "
            "'superseded') order by created_at desc, seq desc "
            "limit 1",
            (user_id, memory_id),
        )
        return found[0] if found else None

    async def missing_vectors(self, limit: int, after: int = 0) -> list[tuple[int, str, str, str, list[str]]]:
        rows = await self._all(
            "select seq, user_id, id, content, keywords from memories where embedding is null and seq > %s "
            "order by seq limit %s",
            (after, limit),
        )
        return [(int(r[0]), r[1], r[2], r[3], _keyword_list(r[4])) for r in rows]

    async def count_active(self, user_id: str) -> int:
        row = await self._one("select count(*) from memories where user_id = %s and status = 'active'", (user_id,))
        return int(row[0])

    async def list_memories(self, user_id: str, flt: MemoryFilter) -> tuple[list[Memory], int]:
        clause, params = memory_filter_clause(user_id, flt)
        total = (await self._one(f"select count(*) from memories where {clause}", params))[0]
        order = "deleted_at desc" if tuple(flt.statuses) == (Status.trashed,) else "created_at desc"
        found = await self._memories(
            f"{clause} order by {order}, seq desc limit %s offset %s", (*params, flt.limit, flt.offset)
        )
        return found, int(total)

    async def core_memories(self, user_id: str, limit: int) -> list[Memory]:
        return await self._memories(
            "user_id = %s and status = 'active' and persistence >= %s order by created_at, seq limit %s",
            (user_id, CORE_PERSISTENCE, limit),
        )

    async def vector_neighbours(
        self, user_id: str, vector: Sequence[float], k: int, statuses: Sequence[Status]
    ) -> list[tuple[str, float]]:
        # The HNSW index spans every user, and pgvector (before 0.8's iterative scans) filters its candidates
        # after the search: for a user holding a small share of the table it would return too few. A user with
        # up to EXACT_SCAN_ROWS memories is therefore scanned exactly (milliseconds); a larger one goes through
        # the index with a candidate list widened to the user's share of the table.
        wanted = [str(s) for s in statuses]
        rows_of_user = (
            await self._one(
                "select count(*) from (select 1 from memories where user_id = %s and status = any(%s) limit %s) x",
                (user_id, wanted, EXACT_SCAN_ROWS + 1),
            )
        )[0]
        if rows_of_user <= EXACT_SCAN_ROWS or not self._vectors:
            # Distances computed in the (materialised) subquery, so the planner cannot turn this into an index scan.
            rows = await self._guarded(
                "with mine as materialized (select id, embedding <=> %s::vector as d from memories "
                "where user_id = %s and status = any(%s) and embedding is not null) "
                "select id, d from mine order by d limit %s",
                (vector_text(vector), user_id, wanted, k),
            )
        else:
            total = (
                await self._one("select greatest(reltuples, 1)::bigint from pg_class where relname = 'memories'")
            )[0]
            ef = max(EF_SEARCH_MIN, min(EF_SEARCH_MAX, int(k * max(1, total) / rows_of_user)))
            await self._exec(f"set local hnsw.ef_search = {ef}")
            rows = await self._guarded(
                "select id, embedding <=> %s::vector as d from memories where user_id = %s and status = any(%s) "
                "and embedding is not null order by embedding <=> %s::vector limit %s",
                (vector_text(vector), user_id, wanted, vector_text(vector), k),
            )
        return [(r[0], 1.0 - float(r[1])) for r in rows]

    async def keyword_hits(
        self, user_id: str, terms: Sequence[str], k: int, statuses: Sequence[Status], *, all_terms: bool = False
    ) -> list[tuple[str, float]]:
        query = tsquery_text(user_id, terms, all_terms=all_terms)
        if not query:
            return []
        rows = await self._guarded(
            "select id, ts_rank(lexemes, q) as rank from memories, (select %s::tsquery as q) query "
            "where lexemes @@ q and user_id = %s and status = any(%s) order by rank desc, id limit %s",
            (query, user_id, [str(s) for s in statuses], k),
        )
        return [(r[0], float(r[1])) for r in rows]

    async def memories_between(
        self, user_id: str, start: datetime, end: datetime, statuses: Sequence[Status], limit: int
    ) -> list[Memory]:
        return await self._memories(
            "user_id = %s and status = any(%s) and valid_from >= %s and valid_from < %s "
            "order by valid_from desc, seq desc limit %s",
            (user_id, [str(s) for s in statuses], ts(start), ts(end), limit),
        )

    async def pairwise_similarities(self, user_id: str, memory_ids: Sequence[str]) -> dict[tuple[str, str], float]:
        if len(memory_ids) < 2:
            return {}
        rows = await self._guarded(
            "with picked as materialized (select id, embedding from memories where user_id = %s and id = any(%s) "
            "and embedding is not null) "
            "select a.id, b.id, a.embedding <=> b.embedding from picked a join picked b on a.id < b.id",
            (user_id, list(memory_ids)),
        )
        return {(r[0], r[1]): 1.0 - float(r[2]) for r in rows if r[2] is not None and r[2] == r[2]}

    async def core_similarities(self, user_id: str, vector: Sequence[float]) -> list[tuple[str, float]]:
        rows = await self._guarded(
            "select id, 1 - (embedding <=> %s::vector) from memories where user_id = %s and status = 'active' "
            "and persistence >= %s and embedding is not null",
            (vector_text(vector), user_id, CORE_PERSISTENCE),
        )
        return [(r[0], float(r[1])) for r in rows if r[1] is not None and r[1] == r[1]]

    async def important_similarities(
        self, user_id: str, vector: Sequence[float], limit: int, statuses: Sequence[Status]
    ) -> list[tuple[str, float]]:
        # The most important rows first, distances only for those. One index-ordered read per status: with
        # `status = any(...)` the planner cannot use the (user_id, status, importance) order and sorted all
        # of the user's rows instead (130 ms at 100,000 memories).
        per_status = " union all ".join(
            "(select id, importance from memories where user_id = %s and status = %s order by importance desc limit %s)"
            for _ in statuses
        )
        rows = await self._guarded(
            f"with picked as (select id from ({per_status}) s order by importance desc limit %s) "
            "select m.id, 1 - (m.embedding <=> %s::vector) from picked join memories m on m.id = picked.id "
            "where m.embedding is not null",
            (
                *(value for status in statuses for value in (user_id, str(status), limit)),
                limit,
                vector_text(vector),
            ),
        )
        return [(r[0], float(r[1])) for r in rows if r[1] is not None and r[1] == r[1]]

    async def similarities(self, user_id: str, memory_ids: Sequence[str], vector: Sequence[float]) -> dict[str, float]:
        if not memory_ids:
            return {}
        rows = await self._guarded(
            "select id, embedding <=> %s::vector from memories where user_id = %s and id = any(%s) "
            "and embedding is not null",
            (vector_text(vector), user_id, list(memory_ids)),
        )
        return {r[0]: 1.0 - float(r[1]) for r in rows if r[1] is not None and r[1] == r[1]}

    async def indexed_terms(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, IndexedText]:
        if not memory_ids:
            return {}
        rows = await self._all(
            "select id, terms, keyword_terms from memories where user_id = %s and id = any(%s)",
            (user_id, list(memory_ids)),
        )
        return {r[0]: IndexedText(terms=r[1], keyword_terms=r[2]) for r in rows}

    async def user_term_counts(self, user_id: str, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        wanted = list(dict.fromkeys(t for t in terms if t))
        rows = await self._guarded(
            "select term, sum(delta) from memory_user_term_counts where user_id = %s and term = any(%s) "
            "group by term",
            (user_id, ["", *wanted]),
        )
        counts = {r[0]: int(r[1]) for r in rows}
        total = counts.pop("", 0)
        return {t: n for t, n in counts.items() if n > 0}, total

    async def term_document_counts(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        wanted = list(dict.fromkeys(t for t in terms if t))
        rows = await self._guarded(
            "select term, sum(delta) from memory_term_counts where term = any(%s) group by term",
            (["", *wanted],),
        )
        counts = {r[0]: int(r[1]) for r in rows}
        total = counts.pop("", 0)
        return {t: n for t, n in counts.items() if n > 0}, total

    async def get_pending(self, user_id: str, pending_id: str) -> PendingItem | None:
        row = await self._one(
            f"select {PENDING_COLUMNS} from memory_pending where id = %s and user_id = %s", (pending_id, user_id)
        )
        return pending_from_row(row) if row else None

    async def list_pending(
        self, user_id: str, statuses: Sequence[PendingStatus], limit: int, offset: int = 0
    ) -> tuple[list[PendingItem], int]:
        params = (user_id, [str(s) for s in statuses])
        clause = "user_id = %s and status = any(%s)"
        total = (await self._one(f"select count(*) from memory_pending where {clause}", params))[0]
        rows = await self._all(
            f"select {PENDING_COLUMNS} from memory_pending where {clause} order by created_at desc, seq desc "
            "limit %s offset %s",
            (*params, limit, offset),
        )
        return [pending_from_row(r) for r in rows], int(total)

    async def due_pending(self, user_id: str, now: datetime, limit: int) -> list[PendingItem]:
        rows = await self._all(
            f"select {PENDING_COLUMNS} from memory_pending where user_id = %s and (status = 'pending' "
            "or (status = 'snoozed' and cooldown_until <= %s)) order by created_at, seq limit %s",
            (user_id, ts(now), limit),
        )
        return [pending_from_row(r) for r in rows]

    async def find_pending_by_hash(self, user_id: str, content_hash: str) -> PendingItem | None:
        row = await self._one(
            f"select {PENDING_COLUMNS} from memory_pending where user_id = %s and content_hash = %s "
            "and status in ('pending', 'snoozed') limit 1",
            (user_id, content_hash),
        )
        return pending_from_row(row) if row else None

    async def operation_result(self, user_id: str, operation_id: str) -> tuple[str, dict[str, Any]] | None:
        row = await self._one(
            "select request_hash, result from memory_operations where user_id = %s and operation_id = %s",
            (user_id, operation_id),
        )
        return (row[0], row[1]) if row else None

    async def list_revisions(self, user_id: str, memory_id: str) -> list[Revision]:
        rows = await self._all(
            f"select {REVISION_COLUMNS} from memory_revisions where user_id = %s and memory_id = %s "
            "order by created_at, seq",
            (user_id, memory_id),
        )
        return [revision_from_row(r) for r in rows]

    async def list_tombstones(self, user_id: str, limit: int = 100) -> list[Tombstone]:
        rows = await self._all(
            f"select {TOMBSTONE_COLUMNS} from memory_tombstones where user_id = %s order by deleted_at desc limit %s",
            (user_id, limit),
        )
        return [tombstone_from_row(r) for r in rows]

    async def list_events(
        self, user_id: str, limit: int = 100, kinds: Sequence[EventKind] | None = None
    ) -> list[Event]:
        params: list[Any] = [user_id]
        clause = "user_id = %s"
        if kinds:
            clause += " and kind = any(%s)"
            params.append([str(k) for k in kinds])
        rows = await self._all(
            f"select {EVENT_COLUMNS} from memory_events where {clause} order by id desc limit %s", (*params, limit)
        )
        return [event_from_row(r) for r in rows]

    async def stats(self, user_id: str) -> StoreStats:
        out = StoreStats()
        for status, count in await self._all(
            "select status, count(*) from memories where user_id = %s group by status", (user_id,)
        ):
            out.by_status[status] = count
        for category, count in await self._all(
            "select category, count(*) from memories where user_id = %s and status = 'active' group by category",
            (user_id,),
        ):
            out.by_category[category] = count
        row = await self._one(
            "select count(*) filter (where persistence >= %s), min(created_at), max(created_at) from memories "
            "where user_id = %s and status = 'active'",
            (CORE_PERSISTENCE, user_id),
        )
        out.core, out.oldest, out.newest = row[0], dt(row[1]), dt(row[2])
        counts = await self._one(
            "select (select count(*) from memory_pending where user_id = %s and status in ('pending', 'snoozed')), "
            "(select count(*) from memory_tombstones where user_id = %s), "
            "(select count(*) from memory_revisions where user_id = %s), "
            "(select count(*) from memory_events where user_id = %s)",
            (user_id, user_id, user_id, user_id),
        )
        out.pending, out.tombstones, out.revisions, out.events = counts
        return out

    async def get_user(self, user_id: str) -> dict[str, Any] | None:
        row = await self._one(
            "select user_id, display_name, identity_confirmed, persona, created_at, updated_at from users "
            "where user_id = %s",
            (user_id,),
        )
        if row is None:
            return None
        return {
            "user_id": row[0],
            "display_name": row[1],
            "identity_confirmed": bool(row[2]),
            "persona": row[3],
            "created_at": _iso(row[4]),
            "updated_at": _iso(row[5]),
        }

def _iso(value: datetime | None) -> str | None:
    from pocketmem.core.instants import encode as to_iso

    return to_iso(value) if value is not None else None


def _keyword_list(value: Any) -> list[str]:
    return list(json.loads(value)) if isinstance(value, str) else list(value or [])
