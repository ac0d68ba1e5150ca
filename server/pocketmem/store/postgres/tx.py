"""The PostgreSQL backend's queries inside one transaction: the core reads and writes of store/base.py.

Same semantics as the SQLite backend (store/sqlite.py), row for row. Differences that do not show:
keyword ranking is ts_rank over the user's pre-split terms instead of BM25 (only the order is
used), and the nearest-neighbour search uses pgvector's HNSW index (cosine) when the planner
finds it cheaper than scanning the user's rows.

A write transaction opened for a user (`PostgresStore.write(user_id=...)`) takes that user's advisory
lock before its first statement, so one user's writes never interleave (the SQLite backend gets the
same from its single writer) while different users write in parallel; a transaction acting for several
users locks them with `lock_users` (store/roles.py UserLocks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pocketmem.base.errors import UnreadableRow
from pocketmem.base.models import (
    EventKind,
    Memory,
    Status,
)
from pocketmem.store.policy import CORE_PERSISTENCE
from pocketmem.store.postgres.dialect import POSTGRES
from pocketmem.store.postgres.records import (
    lexemes,
    tsquery_text,
    vector_text,
)
from pocketmem.store.postgres.sync import SyncQueries
from pocketmem.store.postgres.upkeep import UpkeepQueries
from pocketmem.store.postgres.writes import WriteQueries
from pocketmem.store.roles import StoreWriter
from pocketmem.store.sql.shared import SharedQueries
from pocketmem.store.sql.writes import IndexColumn
from pocketmem.store.types import Holder, IndexedText

USER_LOCK_SPACE = 7_117_002  # first key of the per-user pg_advisory_xact_lock
EXACT_SCAN_ROWS = 20_000  # up to this many memories, a user's nearest neighbours are found by an exact scan
EF_SEARCH_MIN, EF_SEARCH_MAX = 100, 1000


class PostgresTx(UpkeepQueries, SyncQueries, WriteQueries, SharedQueries, StoreWriter):
    """Queries over one connection inside one transaction (psycopg 3, autocommit off by BEGIN)."""

    dialect = POSTGRES

    def __init__(self, conn: Any, *, writing: bool, vectors: bool) -> None:
        self._conn = conn
        self._writing = writing
        self._vectors = vectors
        self._locked: set[str] = set()
        self.changes: dict[str, set[EventKind]] = {}
        self.left_out: list[UnreadableRow] = []  # rows its reads could not decode (records.readable)

    async def lock_user(self, user_id: str) -> None:
        """Hold the user's advisory lock until this transaction ends (once per user; nothing in a read)."""
        await self._lock_user(user_id)

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

    @property
    def connection(self) -> Any:
        return self._conn

    async def _guarded(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """A query recall may survive failing (an index gone bad): inside a savepoint, so a failure leaves
        the transaction usable for the next query, as in SQLite."""
        async with self._conn.transaction():
            return await self._all(sql, params)

    # -- the index columns of a memory (store/sql/writes.py): all in its own row ---------------
    def _index_columns(self, user_id: str, vector: Sequence[float] | None, text: IndexedText) -> list[IndexColumn]:
        return [
            ("embedding", "{p}::vector", vector_text(vector) if vector is not None else None),
            ("terms", "{p}", text.terms),
            ("keyword_terms", "{p}", text.keyword_terms),
            ("lexemes", "array_to_tsvector({p}::text[])", lexemes(user_id, text.terms, text.keyword_terms)),
        ]

    async def _insert_row(self, sql: str, params: Sequence[Any]) -> None:
        await self._exec(sql, params)

    async def _indexed_insert(
        self, ref: Any, memory: Memory, vector: Sequence[float] | None, text: IndexedText
    ) -> None:
        return None

    async def _indexed_content(
        self, user_id: str, memory_id: str, vector: Sequence[float] | None, text: IndexedText
    ) -> None:
        return None

    async def write_vectors(
        self, rows: Sequence[tuple[str, str, Sequence[float]]], embed_tag: str, *, only_missing: bool = False
    ) -> None:
        await self._exec(
            "update memories m set embedding = v.e::vector, embed_model = %s "
            "from unnest(%s::text[], %s::text[], %s::text[]) as v(u, id, e) where m.id = v.id and m.user_id = v.u"
            + (" and m.embedding is null" if only_missing else ""),
            (embed_tag, [r[0] for r in rows], [r[1] for r in rows], [vector_text(r[2]) for r in rows]),
        )

    async def _indexed_status(self, user_id: str, memory_id: str, status: Status) -> None:
        return None

    # -- reads ----------------------------------------------------------------------------------

    async def count_active(self, user_id: str) -> int:
        row = await self._one("select count(*) from memories where user_id = %s and status = 'active'", (user_id,))
        return int(row[0])

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

    async def newest_holders(self, user_id: str, terms: Sequence[str], k: int) -> list[Holder]:
        query = tsquery_text(user_id, terms)
        if not query:
            return []
        rows = await self._guarded(
            f"select {Holder.COLUMNS} from memories where lexemes @@ %s::tsquery and user_id = %s "
            "and status = 'active' order by seq desc limit %s",
            (query, user_id, k),
        )
        return [Holder.of(row, self.dialect.from_column) for row in rows]

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

    async def core_similarities(
        self, user_id: str, vectors: Sequence[Sequence[float]]
    ) -> list[tuple[str, tuple[float, ...]]]:
        rows = await self._guarded(
            f"select id, {_distances(vectors, 'embedding')} from memories where user_id = %s "
            "and status = 'active' and persistence >= %s and embedding is not null",
            (*(vector_text(v) for v in vectors), user_id, CORE_PERSISTENCE),
        )
        return _cosines(rows)

    async def important_similarities(
        self, user_id: str, vectors: Sequence[Sequence[float]], limit: int, statuses: Sequence[Status]
    ) -> list[tuple[str, tuple[float, ...]]]:
        # The most important rows first, distances only for those. One index-ordered read per status: with
        # `status = any(...)` the planner cannot use the (user_id, status, importance) order and sorted all
        # of the user's rows instead (130 ms at 100,000 memories).
        per_status = " union all ".join(
            "(select id, importance from memories where user_id = %s and status = %s order by importance desc limit %s)"
            for _ in statuses
        )
        rows = await self._guarded(
            f"with picked as (select id from ({per_status}) s order by importance desc limit %s) "
            f"select m.id, {_distances(vectors, 'm.embedding')} from picked join memories m on m.id = picked.id "
            "where m.embedding is not null",
            (
                *(value for status in statuses for value in (user_id, str(status), limit)),
                limit,
                *(vector_text(v) for v in vectors),
            ),
        )
        return _cosines(rows)

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


def _distances(vectors: Sequence[Sequence[float]], column: str) -> str:
    """One cosine column per vector, each vector bound as a parameter."""
    return ", ".join([f"1 - ({column} <=> %s::vector)"] * len(vectors))


def _cosines(rows: Sequence[Sequence[Any]]) -> list[tuple[str, tuple[float, ...]]]:
    """(id, cosines) of rows whose cosines are all numbers (NaN for a zero vector is left out)."""
    return [
        (r[0], tuple(float(x) for x in r[1:]))
        for r in rows
        if all(x is not None and x == x for x in r[1:])
    ]
