"""SQLite's transaction: the queries written once (store/sql/shared.py) over one aiosqlite connection, and
what SQLite keeps to itself: the FTS5 and sqlite-vec rows beside a memory, vector and keyword search, the
per-user term counts. The store (store.py) opens it.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

import aiosqlite

from pocketmem.base.errors import StoreError, UnreadableRow
from pocketmem.base.models import (
    EventKind,
    Memory,
    Status,
)
from pocketmem.core.text import fts_match_expression
from pocketmem.store.policy import CORE_PERSISTENCE
from pocketmem.store.roles import StoreWriter
from pocketmem.store.sql.shared import SharedQueries
from pocketmem.store.sql.writes import IndexColumn
from pocketmem.store.sqlite.dialect import SQLITE
from pocketmem.store.sqlite.records import placeholders as _placeholders
from pocketmem.store.sqlite.records import readable_vector
from pocketmem.store.sqlite.sync import SyncQueries
from pocketmem.store.sqlite.upkeep import UpkeepQueries
from pocketmem.store.types import Holder, IndexedText, term_deltas


def pack_vector(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack_vector(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


# The vector index holds each vector's signs (sqlite-vec's bit[] vectors, 1/32 of the floats): a search reads
# 64 bytes per memory instead of 2 KB, and the full vectors kept in the memories rows rescore its shortlist.
QUANTISED = "vec_quantize_binary(?)"
VECTOR_RESCORE = 3  # bench/vector_index.py: 3 x 32 keeps 98.3% of the exact top 10 in 9.0 ms at 100,000 (docs/speed.md)


async def create_vector_index(tx: SQLiteTx, dimensions: int) -> None:
    """The binary vector index, filled from the memories' full vectors of this size."""
    await tx.execute(
        "create virtual table memory_vectors using vec0 (user_id text partition key, status text, "
        f"embedding bit[{int(dimensions)}])"
    )
    await tx.execute(
        "insert into memory_vectors (rowid, user_id, status, embedding) "
        "select rowid, user_id, status, vec_quantize_binary(embedding) from memories where typeof(embedding) = 'blob' "
        f"and length(embedding) = {4 * int(dimensions)}"
    )


class SQLiteTx(UpkeepQueries, SyncQueries, SharedQueries, StoreWriter):
    """Queries over one connection inside one transaction."""

    _pack = staticmethod(pack_vector)
    _unpack = staticmethod(unpack_vector)
    dialect = SQLITE

    def __init__(self, db: aiosqlite.Connection, vectors: bool, owner_index: bool = True) -> None:
        self._db = db
        self._vectors = vectors
        # The planner prefers the wide table's primary key for FTS matches; the narrow index is named
        # explicitly, where the file has it (m005).
        self._owner_hint = "indexed by memories_owner " if owner_index else ""
        self.changes: dict[str, set[EventKind]] = {}  # what this transaction wrote, for commit listeners
        self.left_out: list[UnreadableRow] = []  # rows its reads could not decode (records.readable)

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return list(await self._db.execute_fetchall(sql, params))

    async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:  # a row, or None when there is none
        rows = await self._all(sql, params)
        return rows[0] if rows else None

    async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int:
        cursor = await self._db.execute(sql, params)
        count = cursor.rowcount
        await cursor.close()
        return count

    def run_inline(self, inline: bool) -> None:
        """Run this transaction's statements on the event loop's thread (driver.py), for a short unit only."""
        self._db.inline_writes = inline

    async def _rowid(self, user_id: str, memory_id: str) -> int | None:
        row = await self._one("select rowid from memories where id = ? and +user_id = ?", (memory_id, user_id))
        return row[0] if row else None

    rowid = _rowid  # for the store that opened the transaction, and for tests

    # -- the index rows beside a memory (store/sql/writes.py) -----------------------------------
    def _index_columns(self, user_id: str, vector: Sequence[float] | None, text: IndexedText) -> list[IndexColumn]:
        return [("embedding", "{p}", pack_vector(vector) if vector is not None else None)]

    async def _insert_row(self, sql: str, params: Sequence[Any]) -> int | None:
        cursor = await self._db.execute(sql, params)
        rowid = cursor.lastrowid
        await cursor.close()
        return rowid

    async def _indexed_insert(
        self, ref: Any, memory: Memory, vector: Sequence[float] | None, text: IndexedText
    ) -> None:
        await self._exec(
            "insert into memories_fts (rowid, terms, keywords) values (?, ?, ?)", (ref, text.terms, text.keyword_terms)
        )
        await self._count_terms(memory.user_id, None, text)
        if self._vectors and vector is not None:
            await self._exec(
                f"insert into memory_vectors (rowid, user_id, status, embedding) values (?, ?, ?, {QUANTISED})",
                (ref, memory.user_id, memory.status.value, pack_vector(vector)),
            )

    async def _indexed_content(
        self, user_id: str, memory_id: str, vector: Sequence[float] | None, text: IndexedText
    ) -> None:
        rowid = await self._rowid(user_id, memory_id)
        if rowid is None:
            raise StoreError(f"memory {memory_id} vanished during the update")
        await self._count_terms(user_id, await self._indexed_row(rowid), text)
        await self._exec(
            "update memories_fts set terms = ?, keywords = ? where rowid = ?", (text.terms, text.keyword_terms, rowid)
        )
        if self._vectors:
            await self._requantise(rowid, vector)

    async def _requantise(self, rowid: int, vector: Sequence[float] | None) -> None:
        """A memory's new vector into the binary index (vec0 keeps a bit vector's type only on insert); no
        vector, no entry."""
        await self._exec("delete from memory_vectors where rowid = ?", (rowid,))
        if vector is not None:
            await self._exec(
                "insert into memory_vectors (rowid, user_id, status, embedding) "
                f"select rowid, user_id, status, {QUANTISED} from memories where rowid = ?",
                (pack_vector(vector), rowid),
            )

    async def write_vectors(
        self, rows: Sequence[tuple[str, str, Sequence[float]]], embed_tag: str, *, only_missing: bool = False
    ) -> None:
        for user_id, memory_id, vector in rows:
            rowid = await self._rowid(user_id, memory_id)
            if rowid is None:
                continue
            had = await self._one("select embedding is not null from memories where rowid = ?", (rowid,))
            if only_missing and had[0]:
                continue  # re-embedded meanwhile (a patch): that vector is the newer one
            await self._exec(
                "update memories set embedding = ?, embed_model = ? where rowid = ?",
                (pack_vector(vector), embed_tag, rowid),
            )
            if self._vectors:
                await self._requantise(rowid, vector)

    async def _indexed_status(self, user_id: str, memory_id: str, status: Status) -> None:
        if self._vectors:
            rowid = await self._rowid(user_id, memory_id)
            await self._exec("update memory_vectors set status = ? where rowid = ?", (status.value, rowid))

    # -- reads ----------------------------------------------------------------------------------

    async def count_active(self, user_id: str) -> int:
        row = await self._one("select active from memory_counts where user_id = ?", (user_id,))
        return int(row[0]) if row else 0

    async def vector_neighbours(
        self, user_id: str, vector: Sequence[float], k: int, statuses: Sequence[Status]
    ) -> list[tuple[str, float]]:
        if not self._vectors:
            raise StoreError("the vector index is not available (sqlite-vec could not be loaded)")
        # The binary index shortlists VECTOR_RESCORE x k by Hamming distance; the full-precision vectors of the
        # memories rows rank them by cosine (bench/vector_index.py: 97-99% of the exact top 10 kept).
        wanted = ", ".join(f"?{4 + i}" for i in range(len(statuses)))
        rows = await self._all(
            "select m.id, vec_distance_cosine(m.embedding, ?1) as distance from (select rowid from memory_vectors "
            f"where embedding match vec_quantize_binary(?1) and k = ?2 and user_id = ?3 and status in ({wanted})) v "
            f"join memories m on m.rowid = v.rowid where {readable_vector('m.embedding')} "
            f"order by distance limit ?{4 + len(statuses)}",
            (pack_vector(vector), k * VECTOR_RESCORE, user_id, *statuses, k),
        )
        return [(row[0], 1.0 - float(row[1])) for row in rows]

    async def keyword_hits(
        self, user_id: str, terms: Sequence[str], k: int, statuses: Sequence[Status], *, all_terms: bool = False
    ) -> list[tuple[str, float]]:
        match = fts_match_expression(terms, all_terms=all_terms)
        if match is None:
            return []
        rows = await self._hits_of_sole_owner(match, user_id, k, statuses)
        if rows is None:
            # The owner check reads the small (user_id, status) index, not the wide memories rows: a common
            # term matches thousands of rows in a large store, and the table lookups were most of the cost.
            # Only the k best then fetch their ids.
            rows = await self._all(
                "with best as (select f.rowid as ref, f.rank as rank from memories_fts f "
                f"join memories m {self._owner_hint}on m.rowid = f.rowid "
                f"where memories_fts match ? and m.user_id = ? and m.status in ({_placeholders(len(statuses))}) "
                "order by f.rank limit ?) "
                "select m.id, best.rank from best join memories m on m.rowid = best.ref order by best.rank",
                (match, user_id, *statuses, k),
            )
        # FTS5's bm25() is smaller for better matches; flip it so larger is better.
        return [(row[0], -float(row[1])) for row in rows]

    async def newest_holders(self, user_id: str, terms: Sequence[str], k: int) -> list[Holder]:
        match = fts_match_expression(terms)
        if match is None:
            return []
        # FTS5 walks its matches in descending rowid and stops at the k-th of the user's: nothing is ranked.
        columns = ", ".join(f"m.{c.strip()}" for c in Holder.COLUMNS.split(","))
        rows = await self._all(
            f"select {columns} from memories_fts f join memories m on m.rowid = f.rowid "
            "where memories_fts match ? and m.user_id = ? and m.status = ? order by f.rowid desc limit ?",
            (match, user_id, Status.active, k),
        )
        return [Holder.of(row, self.dialect.from_column) for row in rows]

    async def _hits_of_sole_owner(
        self, match: str, user_id: str, k: int, statuses: Sequence[Status]
    ) -> list[tuple[str, float]] | None:
        """The k best matches of `match` among the user's memories of `statuses`, when nearly every indexed
        memory is one of them (one person's notebook): FTS5 then ranks its matches alone, about a third
        cheaper than checking the owner of every match, and only the few best are checked. `others` (the
        indexed rows beyond the user's active count) says how many of the best may belong to someone else or
        have another status; None when that is more than k, or when the best did not hold k of the user's
        while more matches remained: the caller then checks every match's owner."""
        if Status.active not in statuses:
            return None
        row = await self._one(
            "select (select count(*) from memories_fts_docsize) "
            "- coalesce((select active from memory_counts where user_id = ?), 0)",
            (user_id,),
        )
        others = max(0, int(row[0]))
        if others > k:
            return None
        wanted = k + others
        rows = await self._all(
            "with best as (select rowid as ref, bm25(memories_fts) as rank from memories_fts "
            "where memories_fts match ? order by 2 limit ?) "
            f"select m.id, best.rank, m.user_id = ? and m.status in ({_placeholders(len(statuses))}) "
            "from best left join memories m on m.rowid = best.ref order by best.rank",
            (match, wanted, user_id, *statuses),
        )
        mine = [(r[0], r[1]) for r in rows if r[2]]
        if len(mine) >= k or len(rows) < wanted:
            return mine[:k]
        return None

    async def pairwise_similarities(self, user_id: str, memory_ids: Sequence[str]) -> dict[tuple[str, str], float]:
        if len(memory_ids) < 2:
            return {}
        marks = _placeholders(len(memory_ids))
        if self._vectors:
            # Materialise the few rows first; a plain self-join lets the planner scan the whole table.
            rows = await self._all(
                "with picked as materialized (select id, embedding from memories where +user_id = ? "
                f"and id in ({marks}) and {readable_vector('embedding')}) "
                "select a.id, b.id, vec_distance_cosine(a.embedding, b.embedding) from picked a join picked b "
                "on a.id < b.id",
                (user_id, *memory_ids),
            )
            return {(r[0], r[1]): 1.0 - float(r[2]) for r in rows if r[2] is not None}
        rows = await self._all(
            f"select id, embedding from memories where +user_id = ? and id in ({marks}) "
            f"and {readable_vector('embedding')}",
            (user_id, *memory_ids),
        )
        vectors = {r[0]: unpack_vector(r[1]) for r in rows}
        ids = sorted(vectors)
        return {(a, b): _cosine(vectors[a], vectors[b]) for i, a in enumerate(ids) for b in ids[i + 1 :]}

    async def core_similarities(
        self, user_id: str, vectors: Sequence[Sequence[float]]
    ) -> list[tuple[str, tuple[float, ...]]]:
        return await self._similarities_where(
            "user_id = ? and status = 'active' and persistence >= ?", (user_id, CORE_PERSISTENCE), vectors
        )

    async def important_similarities(
        self, user_id: str, vectors: Sequence[Sequence[float]], limit: int, statuses: Sequence[Status]
    ) -> list[tuple[str, tuple[float, ...]]]:
        return await self._similarities_where(
            f"user_id = ? and status in ({_placeholders(len(statuses))}) order by importance desc limit ?",
            (user_id, *statuses, limit),
            vectors,
        )

    async def _similarities_where(
        self, where: str, params: Sequence[Any], vectors: Sequence[Sequence[float]]
    ) -> list[tuple[str, tuple[float, ...]]]:
        """(id, cosine to each of `vectors`) of the memories `where` selects, those without a vector left out:
        one read whatever the number of vectors."""
        if self._vectors:
            distances = ", ".join([f"1 - {_distance('embedding')}"] * len(vectors))
            rows = await self._all(
                f"select id, {distances} from memories where {where}",
                (*(pack_vector(v) for v in vectors), *params),
            )
            return [(r[0], tuple(float(x) for x in r[1:])) for r in rows if r[1] is not None]
        rows = await self._all(f"select id, {_vector('embedding')} from memories where {where}", params)
        return [
            (r[0], tuple(_cosine(unpack_vector(r[1]), v) for v in vectors)) for r in rows if r[1] is not None
        ]

    async def similarities(self, user_id: str, memory_ids: Sequence[str], vector: Sequence[float]) -> dict[str, float]:
        if not memory_ids:
            return {}
        if self._vectors:
            rows = await self._all(
                f"select id, vec_distance_cosine(embedding, ?) from memories where +user_id = ? "
                f"and id in ({_placeholders(len(memory_ids))}) and {readable_vector('embedding')}",
                (pack_vector(vector), user_id, *memory_ids),
            )
            return {row[0]: 1.0 - float(row[1]) for row in rows if row[1] is not None and not math.isnan(row[1])}
        rows = await self._all(
            f"select id, embedding from memories where +user_id = ? and id in ({_placeholders(len(memory_ids))}) "
            f"and {readable_vector('embedding')}",
            (user_id, *memory_ids),
        )
        return {row[0]: _cosine(unpack_vector(row[1]), vector) for row in rows}

    async def indexed_terms(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, IndexedText]:
        if not memory_ids:
            return {}
        # The owner and the id come from the narrow (user_id, id) index: the wide rows are never read.
        rows = await self._all(
            "select m.id, f.terms, f.keywords from memories m join memories_fts f on f.rowid = m.rowid "
            f"where m.user_id = ? and m.id in ({_placeholders(len(memory_ids))})",
            (user_id, *memory_ids),
        )
        return {row[0]: IndexedText(terms=row[1], keyword_terms=row[2]) for row in rows}

    async def similarities_and_terms(
        self, user_id: str, memory_ids: Sequence[str], vector: Sequence[float]
    ) -> tuple[dict[str, float], dict[str, IndexedText]]:
        if not memory_ids or not self._vectors:
            return await super().similarities_and_terms(user_id, memory_ids, vector)
        # Each wide row is read once, for its vector, and its index terms looked up by rowid beside it.
        rows = await self._all(
            f"select m.id, {_distance('m.embedding')}, f.terms, f.keywords from memories m "
            f"left join memories_fts f on f.rowid = m.rowid where +m.user_id = ? "
            f"and m.id in ({_placeholders(len(memory_ids))})",
            (pack_vector(vector), user_id, *memory_ids),
        )
        sims = {r[0]: 1.0 - float(r[1]) for r in rows if r[1] is not None and not math.isnan(r[1])}
        return sims, {r[0]: IndexedText(terms=r[2], keyword_terms=r[3]) for r in rows if r[2] is not None}

    async def user_term_counts(self, user_id: str, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        wanted = list(dict.fromkeys(t for t in terms if t))
        rows = await self._all(
            f"select term, docs from user_terms where user_id = ? and term in ({_placeholders(len(wanted) + 1)})",
            (user_id, "", *wanted),
        )
        counts = {row[0]: int(row[1]) for row in rows}
        total = counts.pop("", 0)
        return {t: n for t, n in counts.items() if n > 0}, total

    async def _count_terms(self, user_id: str, old: IndexedText | None, new: IndexedText | None) -> None:
        """Keep user_terms (one row per user and term, '' for the memory count) in step with the index."""
        deltas = term_deltas(old, new)
        if deltas:
            await self._db.executemany(
                "insert into user_terms (user_id, term, docs) values (?, ?, ?) "
                "on conflict (user_id, term) do update set docs = docs + excluded.docs",
                [(user_id, term, delta) for term, delta in deltas.items()],
            )

    async def _indexed_row(self, rowid: int) -> IndexedText | None:
        row = await self._one("select terms, keywords from memories_fts where rowid = ?", (rowid,))
        return IndexedText(terms=row[0], keyword_terms=row[1]) if row else None

    # -- writes ---------------------------------------------------------------------------------

    async def update_scores(self, user_id: str, scores: Sequence[tuple[str, float, float, float]]) -> None:
        if scores:
            await self._db.executemany(
                "update memories set info_importance = ?, time_coef = ?, importance = ? where id = ? and +user_id = ?",
                [(info, coef, imp, memory_id, user_id) for memory_id, info, coef, imp in scores],
            )


def _distance(column: str) -> str:
    """sqlite-vec's cosine distance of `column` to a bound vector; NULL for a row without a vector it can read (an
    older store's, one stored while the embedder was down, a damaged one), which vec_distance_cosine itself refuses."""
    return f"case when {readable_vector(column)} then vec_distance_cosine({column}, ?) end"


def _vector(column: str) -> str:
    """`column`'s vector where it is one sqlite-vec could read, else NULL (for the paths without sqlite-vec)."""
    return f"case when {readable_vector(column)} then {column} end"


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
