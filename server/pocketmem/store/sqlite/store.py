"""The SQLite backend: one file, WAL, sqlite-vec for vectors, FTS5 for keywords.

One write connection behind a lock, every unit of work in one `BEGIN IMMEDIATE` transaction
(memory row + vector row + keyword row + events together), and a separate read connection, so
readers never wait for a writer. Writers of other processes on the same file take turns on a
per-file lock (filelock.py) before `BEGIN IMMEDIATE`; SQLite's busy timeout, then a few retries,
cover anything else holding the database.
"""

from __future__ import annotations

import asyncio
import logging
import math
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
import anyio

from pocketmem.base.errors import StoreError
from pocketmem.base.models import (
    EventKind,
    Memory,
    Status,
)
from pocketmem.core.text import fts_match_expression
from pocketmem.store.base import (
    IndexedText,
    Store,
    StoreReader,
    StoreWriter,
    term_deltas,
)
from pocketmem.store.policy import CORE_PERSISTENCE, sql_time_coef
from pocketmem.store.sql.browse import BrowseQueries
from pocketmem.store.sql.events import EventQueries
from pocketmem.store.sql.memories import MemoryReads
from pocketmem.store.sql.operations import OperationQueries
from pocketmem.store.sql.pending import PendingQueries
from pocketmem.store.sql.profile import ProfileQueries
from pocketmem.store.sql.revisions import RevisionQueries
from pocketmem.store.sql.tokens import TokenQueries
from pocketmem.store.sql.trash import TrashQueries
from pocketmem.store.sql.users import UserQueries
from pocketmem.store.sql.writes import IndexColumn, MemoryWrites
from pocketmem.store.sqlite import faults, instants_check, readonly_copy
from pocketmem.store.sqlite import migrations as sqlite_migrations
from pocketmem.store.sqlite.dialect import SQLITE
from pocketmem.store.sqlite.driver import connect, inline_connection_class, sqlite_module
from pocketmem.store.sqlite.filelock import FileWriteLock
from pocketmem.store.sqlite.group import GroupCommitter
from pocketmem.store.sqlite.records import placeholders as _placeholders
from pocketmem.store.sqlite.sync import SyncQueries
from pocketmem.store.sqlite.upkeep import UpkeepQueries

log = logging.getLogger(__name__)

T = TypeVar("T")

LOCK_RETRIES = 3
# How long a write waits for other processes' writes before it fails as busy.
WRITE_LOCK_TIMEOUT = 30.0



def pack_vector(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


# The vector index holds each vector's signs (sqlite-vec's bit[] vectors, 1/32 of the floats): a search reads
# 64 bytes per memory instead of 2 KB, and the full vectors kept in the memories rows rescore its shortlist.
QUANTISED = "vec_quantize_binary(?)"
VECTOR_RESCORE = 8


async def _create_vector_index(tx: SQLiteTx, dimensions: int) -> None:
    """The binary vector index, filled from the memories' full vectors of this size."""
    await tx.execute(
        "create virtual table memory_vectors using vec0 (user_id text partition key, status text, "
        f"embedding bit[{int(dimensions)}])"
    )
    await tx.execute(
        "insert into memory_vectors (rowid, user_id, status, embedding) "
        "select rowid, user_id, status, vec_quantize_binary(embedding) from memories where embedding is not null "
        f"and length(embedding) = {4 * int(dimensions)}"
    )


def unpack_vector(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


async def _rollback(conn: aiosqlite.Connection) -> None:
    """Roll back what is open; after SQLITE_FULL or an I/O error SQLite may have rolled back already."""
    try:
        await conn.execute("rollback")
    except Exception as exc:  # noqa: BLE001 - "no transaction is active" must not hide the original error
        log.debug("rollback: %s", exc)


def _is_locked(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text


class SQLiteTx(
    MemoryReads,
    MemoryWrites,
    PendingQueries,
    OperationQueries,
    UserQueries,
    ProfileQueries,
    UpkeepQueries,
    SyncQueries,
    EventQueries,
    RevisionQueries,
    TrashQueries,
    TokenQueries,
    BrowseQueries,
    StoreWriter,
):
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

    # Raw SQL inside this transaction, for the store that opened it (index upkeep, health) and for tests.
    execute = _exec
    fetch_one = _one
    fetch_all = _all
    rowid = _rowid

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
        self, user_id: str, memory_id: str, vector: Sequence[float], text: IndexedText
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

    async def _requantise(self, rowid: int, vector: Sequence[float]) -> None:
        """A memory's new vector into the binary index (vec0 keeps a bit vector's type only on insert)."""
        await self._exec("delete from memory_vectors where rowid = ?", (rowid,))
        await self._exec(
            "insert into memory_vectors (rowid, user_id, status, embedding) "
            f"select rowid, user_id, status, {QUANTISED} from memories where rowid = ?",
            (pack_vector(vector), rowid),
        )

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
            f"join memories m on m.rowid = v.rowid order by distance limit ?{4 + len(statuses)}",
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
                f"and id in ({marks}) and embedding is not null) "
                "select a.id, b.id, vec_distance_cosine(a.embedding, b.embedding) from picked a join picked b "
                "on a.id < b.id",
                (user_id, *memory_ids),
            )
            return {(r[0], r[1]): 1.0 - float(r[2]) for r in rows if r[2] is not None}
        rows = await self._all(
            f"select id, embedding from memories where +user_id = ? and id in ({marks}) and embedding is not null",
            (user_id, *memory_ids),
        )
        vectors = {r[0]: unpack_vector(r[1]) for r in rows}
        ids = sorted(vectors)
        return {(a, b): _cosine(vectors[a], vectors[b]) for i, a in enumerate(ids) for b in ids[i + 1 :]}

    async def core_similarities(self, user_id: str, vector: Sequence[float]) -> list[tuple[str, float]]:
        return await self._similarities_where(
            "user_id = ? and status = 'active' and persistence >= ?", (user_id, CORE_PERSISTENCE), vector
        )

    async def important_similarities(
        self, user_id: str, vector: Sequence[float], limit: int, statuses: Sequence[Status]
    ) -> list[tuple[str, float]]:
        return await self._similarities_where(
            f"user_id = ? and status in ({_placeholders(len(statuses))}) order by importance desc limit ?",
            (user_id, *statuses, limit),
            vector,
        )

    async def _similarities_where(
        self, where: str, params: Sequence[Any], vector: Sequence[float]
    ) -> list[tuple[str, float]]:
        """(id, cosine to `vector`) of the memories `where` selects, those without a vector left out."""
        if self._vectors:
            rows = await self._all(
                f"select id, 1 - vec_distance_cosine(embedding, ?) from memories where {where}",
                (pack_vector(vector), *params),
            )
            return [(r[0], float(r[1])) for r in rows if r[1] is not None]
        rows = await self._all(f"select id, embedding from memories where {where}", params)
        return [(r[0], _cosine(unpack_vector(r[1]), vector)) for r in rows if r[1] is not None]

    async def similarities(self, user_id: str, memory_ids: Sequence[str], vector: Sequence[float]) -> dict[str, float]:
        if not memory_ids:
            return {}
        if self._vectors:
            rows = await self._all(
                f"select id, vec_distance_cosine(embedding, ?) from memories where +user_id = ? "
                f"and id in ({_placeholders(len(memory_ids))}) and embedding is not null",
                (pack_vector(vector), user_id, *memory_ids),
            )
            return {row[0]: 1.0 - float(row[1]) for row in rows if row[1] is not None and not math.isnan(row[1])}
        rows = await self._all(
            f"select id, embedding from memories where +user_id = ? and id in ({_placeholders(len(memory_ids))}) "
            "and embedding is not null",
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
            "select m.id, vec_distance_cosine(m.embedding, ?), f.terms, f.keywords from memories m "
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

    async def term_document_counts(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        # count(*) on an FTS5 table reads every row; the highest rowid is an O(log n) stand-in that
        # only overstates N by the purged rows, which IDF barely notices. One statement, one round trip.
        rows = await self._all(
            "select null, coalesce(max(rowid), 0) from memories_fts union all "
            f"select term, doc from memories_fts_vocab where term in ({_placeholders(len(terms))})",
            tuple(terms),
        )
        total = int(rows[0][1])
        return {row[0]: int(row[1]) for row in rows[1:]}, total


    # -- writes ---------------------------------------------------------------------------------

    async def update_scores(self, user_id: str, scores: Sequence[tuple[str, float, float, float]]) -> None:
        if scores:
            await self._db.executemany(
                "update memories set info_importance = ?, time_coef = ?, importance = ? where id = ? and +user_id = ?",
                [(info, coef, imp, memory_id, user_id) for memory_id, info, coef, imp in scores],
            )


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def _probe(path: str) -> None:
    conn = connect(path, load_vectors=True)
    try:
        conn.execute("select count(*) from sqlite_master").fetchall()
    finally:
        conn.close()


def _quick_check(path: str) -> list[str]:
    conn = connect(path, load_vectors=False)
    try:
        return [str(r[0]) for r in conn.execute("pragma quick_check").fetchall()]
    finally:
        conn.close()


class SQLiteStore(Store):
    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        self._writer: aiosqlite.Connection | None = None
        self._owner_index = False
        self._reader: aiosqlite.Connection | None = None
        # Writes that need not wait for fsync (recall bookkeeping) use their own connection set to
        # synchronous=NORMAL; the next durable commit's fsync of the shared WAL covers them too.
        self._bookkeeper: aiosqlite.Connection | None = None
        self._write_lock = asyncio.Lock()
        self._file_lock = FileWriteLock(self.path, WRITE_LOCK_TIMEOUT) if self.path != ":memory:" else None
        self._read_lock = asyncio.Lock()
        self._group = GroupCommitter(self._short_write)  # concurrent durable adds share one commit (group.py)
        self._vectors_loaded = False
        self._vector_table = False
        self._copy: str | None = None  # a private copy opened instead of the file (readonly_copy.py)

    @property
    def vectors_available(self) -> bool:
        return self._vectors_loaded and self._vector_table

    async def _connect(self, *, inline: bool = False, writer: bool = False) -> aiosqlite.Connection:
        """A connection whose calls run on the event loop's thread: all of a reader's (`inline`), a writer's
        but its commits and BEGIN IMMEDIATE (`writer`; driver.py says why)."""
        path = self._copy or self.path
        query_only = self._copy is not None

        def factory() -> Any:
            conn = connect(path, load_vectors=True)
            if query_only:
                conn.execute("pragma query_only = on")  # the copy stands for a read-only store: no write
            # The decay rule of scoring.py, for the eviction order (registered on every connection).
            conn.create_function("pm_time_coef", 2, sql_time_coef, deterministic=True)
            return conn

        kind = inline_connection_class(writer=writer) if inline or writer else aiosqlite.Connection
        conn = kind(factory, iter_chunk_size=256)
        await conn
        return conn

    async def open(self) -> None:
        if self._writer is not None:
            return
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            if self.path != ":memory:":
                # Fails here, in a plain thread, for a file that is not a database: an aiosqlite connection that
                # fails while opening leaves its worker thread to report into a closed event loop at exit.
                await self._probe_or_copy()
            self._writer = await self._connect(writer=True)
            await self._migrate(self._writer)
            found = await self._writer.execute_fetchall(
                "select 1 from sqlite_master where type = 'index' and name = 'memories_owner'"
            )
            self._owner_index = bool(list(found))
            try:
                # Refresh planner statistics where they are stale (cheap; SQLite's advice for long-lived connections).
                await self._writer.execute("pragma optimize = 0x10002")
            except Exception:  # older SQLite: the queries do not depend on it
                log.debug("pragma optimize failed", exc_info=True)
            self._reader = await self._connect(inline=True) if self.path != ":memory:" else self._writer
            self._bookkeeper = await self._connect(writer=True) if self.path != ":memory:" else self._writer
            if self._bookkeeper is not self._writer:
                await self._bookkeeper.execute("pragma synchronous = normal")
        except Exception as exc:
            await self.close()
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"cannot open the memory store at {self.path}: {exc}") from exc
        self._vectors_loaded = sqlite_module()[1]
        found = list(
            await self._writer.execute_fetchall("select sql from sqlite_master where name = 'memory_vectors'")
        )
        self._vector_table = bool(found)
        if found and self._vectors_loaded and " float[" in found[0][0]:
            await self._quantise_vector_index()

    async def _probe_or_copy(self) -> None:
        """Opens the file in a plain thread; a read-only WAL store without its -shm is read from a copy."""
        try:
            await anyio.to_thread.run_sync(_probe, self.path)
        except Exception:
            if not readonly_copy.wal_without_shm(self.path):
                raise
            self._copy = await anyio.to_thread.run_sync(readonly_copy.private_copy, self.path)
            log.warning(
                "the memory store at %s is read-only and has a WAL but no -shm file: reading a copy at %s; "
                "nothing can be saved until the folder is writable",
                self.path, self._copy,
            )
            await anyio.to_thread.run_sync(_probe, self._copy)

    async def _migrate(self, conn: aiosqlite.Connection) -> None:
        """Applies what is missing; a read-only store is read with the schema it has."""
        if self._copy is not None:
            return
        try:
            await sqlite_migrations.migrate(conn)
        except Exception as exc:
            fault = faults.classify(exc, self.path, writing=True)
            if fault is None or fault.kind != "read-only":
                raise
            log.warning("the memory store at %s is read-only: its schema is not brought up to date", self.path)

    async def close(self) -> None:
        if self._writer is not None:
            try:
                # Keeps the query planner's statistics current so it picks the right index.
                await self._writer.execute("pragma optimize")
            except Exception:  # an old SQLite without it loses nothing
                log.debug("pragma optimize failed", exc_info=True)
        for conn in {id(c): c for c in (self._reader, self._bookkeeper, self._writer) if c is not None}.values():
            try:
                await conn.close()
            except Exception:  # closing must not hide the original error
                log.debug("error closing connection", exc_info=True)
        self._writer = self._reader = self._bookkeeper = None
        if self._copy is not None:
            readonly_copy.remove(self._copy)
            self._copy = None

    def _require(self, conn: aiosqlite.Connection | None) -> aiosqlite.Connection:
        if conn is None:
            raise StoreError("the store is not open")
        return conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[StoreReader]:
        conn = self._require(self._reader)
        lock = self._write_lock if conn is self._writer else self._read_lock
        try:
            async with lock:
                await conn.execute("begin")
                try:
                    yield SQLiteTx(conn, self.vectors_available, self._owner_index)
                finally:
                    with anyio.CancelScope(shield=True):
                        await conn.execute("commit")
        except Exception as exc:
            fault = faults.classify(exc, self.path, writing=False)
            if fault is None or fault is exc or fault.kind != "damaged":
                raise
            self.damage = str(exc)[:200]
            raise fault from exc

    @asynccontextmanager
    async def write(self, durable: bool = True, *, user_id: str | None = None) -> AsyncIterator[StoreWriter]:
        # One writer for the whole file: every write transaction already excludes every other, whoever it is for.
        conn = self._require(self._writer if durable else self._bookkeeper)
        tx: SQLiteTx | None = None
        try:
            async with self._write_lock, self._hold_file_lock():
                async with self._transaction(conn) as tx:
                    yield tx
        except Exception as exc:
            # Disk full, a read-only file, a damaged page: one clear error saying nothing was written.
            self._refuse_write(exc)
            raise
        # Outside the lock: listeners may read (or even write) the store.
        if tx is not None and tx.changes:
            await self._committed({user: frozenset(kinds) for user, kinds in tx.changes.items()})

    @asynccontextmanager
    async def _transaction(self, conn: aiosqlite.Connection) -> AsyncIterator[SQLiteTx]:
        for attempt in range(LOCK_RETRIES + 1):
            try:
                await conn.execute("begin immediate")
                break
            except Exception as exc:
                if not _is_locked(exc) and (fault := faults.classify(exc, self.path, writing=True)) is not None:
                    raise fault from exc
                if not _is_locked(exc) or attempt == LOCK_RETRIES:
                    raise StoreError(
                        "the memory store is busy (another pocketmem process holds the write lock); try again"
                    ) from exc
                await asyncio.sleep(0.05 * (attempt + 1))
        try:
            yield SQLiteTx(conn, self.vectors_available, self._owner_index)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _rollback(conn)
            raise
        else:
            # Shielded: once the unit of work is done, a cancelled request must not leave it half-committed.
            with anyio.CancelScope(shield=True):
                try:
                    await conn.execute("commit")
                except Exception:
                    await _rollback(conn)
                    raise

    async def write_shared(self, work: Callable[[StoreWriter], Awaitable[T]], *, user_id: str | None = None) -> T:
        try:
            return await self._group.submit(work)
        except Exception as exc:
            # A unit's own failure reaches its caller from inside the shared transaction: the same clear
            # storage error write() gives (disk full, read-only, damaged), nothing written for this call.
            self._refuse_write(exc)
            raise

    def _refuse_write(self, exc: Exception) -> None:
        """Raise the clear storage error (disk full, read-only, damaged) `exc` stands for, if it is one;
        return when it is not, so the caller re-raises `exc` itself."""
        fault = faults.classify(exc, self.path, writing=True)
        if fault is None or fault is exc:
            return
        if fault.kind == "damaged":
            self.damage = str(exc)[:200]
        log.warning("write refused: %s (%s)", fault, exc)
        raise fault from exc

    @asynccontextmanager
    async def _short_write(self, durable: bool = True) -> AsyncIterator[StoreWriter]:
        """write(), with the statements run on the event loop's thread (driver.py): for short units only."""
        async with self.write(durable) as tx:
            assert isinstance(tx, SQLiteTx)
            tx.run_inline(True)
            try:
                yield tx
            finally:
                tx.run_inline(False)

    def write_short(
        self, durable: bool = True, *, user_id: str | None = None
    ) -> AbstractAsyncContextManager[StoreWriter]:
        """A write transaction for a short unit of work (a few indexed statements): no thread hop per statement."""
        return self._short_write(durable)

    def _hold_file_lock(self) -> AbstractAsyncContextManager[None]:
        return self._file_lock.hold() if self._file_lock is not None else nullcontext()

    async def get_meta(self, key: str) -> str | None:
        # Through the reader: the writer's statements run inline, so they must stay inside its lock.
        async with self.read() as reader:
            assert isinstance(reader, SQLiteTx)
            row = await reader.fetch_one("select value from store_meta where key = ?", (key,))
        return row[0] if row else None

    async def set_meta(self, key: str, value: str) -> None:
        async with self.write() as tx:
            assert isinstance(tx, SQLiteTx)
            await tx.execute(
                "insert into store_meta (key, value) values (?, ?) on "
                "conflict (key) do update set value = excluded.value",
                (key, value),
            )

    async def prepare_vectors(self, embed_tag: str, dimensions: int) -> None:
        if not self._vectors_loaded:
            return
        async with self.write() as tx:
            assert isinstance(tx, SQLiteTx)
            exists = await tx.fetch_one("select 1 from sqlite_master where type = 'table' and name = 'memory_vectors'")
            if not exists:
                # Memories written while the index was missing (e.g. sqlite-vec unavailable) join it now.
                await _create_vector_index(tx, dimensions)
            await tx.execute(
                "insert into store_meta (key, value) values ('embedder', ?), ('dimensions', ?) "
                "on conflict (key) do update set value = excluded.value",
                (embed_tag, str(dimensions)),
            )
        self._vector_table = True

    async def _quantise_vector_index(self) -> None:
        """A store made before the binary index: its float index is replaced by one built from the same vectors."""
        dimensions = await self.get_meta("dimensions")
        if dimensions is None:
            return
        async with self.write() as tx:
            assert isinstance(tx, SQLiteTx)
            await tx.execute("drop table memory_vectors")
            await _create_vector_index(tx, int(dimensions))
        log.info("vector index of %s rebuilt as a binary index", self.path)

    async def rebuild_vectors(self, embed_tag: str, dimensions: int) -> None:
        async with self.write() as tx:
            assert isinstance(tx, SQLiteTx)
            await tx.execute("drop table if exists memory_vectors")
            await tx.execute("update memories set embedding = null")
            await tx.execute(
                "delete from store_meta where key in ('embedder', 'dimensions') or key like 'calibration:%'"
            )
        self._vector_table = False
        await self.prepare_vectors(embed_tag, dimensions)

    async def write_vectors(
        self, rows: Sequence[tuple[str, str, Sequence[float]]], embed_tag: str, *, only_missing: bool = False
    ) -> None:
        async with self.write() as tx:
            assert isinstance(tx, SQLiteTx)
            for user_id, memory_id, vector in rows:
                rowid = await tx.rowid(user_id, memory_id)
                if rowid is None:
                    continue
                blob = pack_vector(vector)
                status, had = await tx.fetch_one(
                    "select status, embedding is not null from memories where rowid = ?", (rowid,)
                )
                if only_missing and had:
                    continue  # re-embedded meanwhile (a patch): that vector is the newer one
                await tx.execute(
                    "update memories set embedding = ?, embed_model = ? where rowid = ?", (blob, embed_tag, rowid)
                )
                if self.vectors_available:
                    await tx.execute("delete from memory_vectors where rowid = ?", (rowid,))
                    await tx.execute(
                        f"insert into memory_vectors (rowid, user_id, status, embedding) values (?, ?, ?, {QUANTISED})",
                        (rowid, user_id, status, blob),
                    )

    async def quick_check(self) -> str | None:
        """`pragma quick_check`: every page and index, FTS5's included (SQLite >= 3.44); O(size of the file).

        On a connection of its own in a worker thread: WAL lets it read beside the server's connections,
        so recalls and writes are not held up while it runs (about 1 s per 10,000 memories)."""
        self._require(self._writer)
        if self.path == ":memory:":
            return None
        try:
            found = await anyio.to_thread.run_sync(_quick_check, self._copy or self.path)
        except Exception as exc:  # noqa: BLE001 - a check that cannot even run has found damage
            found = [str(exc)]
        problem = None if found == ["ok"] else "; ".join(found[:3])
        if problem is not None:
            log.error("the memory store at %s is damaged: %s; run `pocketmem doctor`", self.path, problem)
        self.damage = problem
        return problem

    async def check_instants(self, *, repair: bool = False, now: datetime | None = None) -> list[dict[str, Any]]:
        """Stored times that cannot be read back or lie outside the supported years; with repair, rewritten."""
        conn = self._require(self._writer)
        async with self._write_lock, self._hold_file_lock():
            if not repair:
                return await instants_check.check(conn, repair=False, now=now or datetime.now(UTC))
            async with self._transaction(conn):
                return await instants_check.check(conn, repair=True, now=now or datetime.now(UTC))

    async def health(self) -> dict[str, Any]:
        conn = self._require(self._writer)
        async with self._write_lock:
            integrity = [r[0] for r in await conn.execute_fetchall("pragma integrity_check")]
            memories = list(await conn.execute_fetchall("select count(*) from memories"))[0][0]
            fts = list(await conn.execute_fetchall("select count(*) from memories_fts"))[0][0]
            fts_orphans = list(
                await conn.execute_fetchall(
                    "select count(*) from memories_fts f left join "
                    "memories m on m.rowid = f.rowid where m.rowid is null"
                )
            )[0][0]
            vectors = None
            vector_mismatch = None
            if self.vectors_available:
                vectors = list(await conn.execute_fetchall("select count(*) from memory_vectors"))[0][0]
                vector_mismatch = list(
                    await conn.execute_fetchall(
                        "select count(*) from memories m left join memory_vectors v on v.rowid = m.rowid "
                        "where m.embedding is not null and (v.rowid is null or v.status != m.status)"
                    )
                )[0][0]
            count_mismatches = list(
                await conn.execute_fetchall(
                    "select count(*) from (select user_id, count(*) as n from memories where status = 'active' "
                    "group by user_id) c left join memory_counts k using (user_id) where coalesce(k.active, 0) != c.n"
                )
            )[0][0]
            migrations = [
                r[0] for r in await conn.execute_fetchall("select name from schema_migrations order by rowid")
            ]
        return {
            "integrity": integrity[0] if integrity == ["ok"] else "; ".join(integrity[:5]),
            "memories": memories,
            "keyword_rows": fts,
            "keyword_orphans": fts_orphans,
            "vector_rows": vectors,
            "vector_mismatches": vector_mismatch,
            "count_mismatches": count_mismatches,
            "vectors_available": self.vectors_available,
            "schema": migrations[-1] if migrations else None,
            # Every known migration applied, in whatever order (branches may add them side by side).
            "schema_current": {name for name, _ in sqlite_migrations.MIGRATIONS} <= set(migrations),
        }

