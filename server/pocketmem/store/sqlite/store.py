"""The SQLite backend: one file, WAL, sqlite-vec for vectors, FTS5 for keywords.

One write connection behind a lock, every unit of work in one `BEGIN IMMEDIATE` transaction
(memory row + vector row + keyword row + events together), and a separate read connection, so
readers never wait for a writer. Writers of other processes on the same file take turns on a
per-file lock (base/filelock.py) before `BEGIN IMMEDIATE`; SQLite's busy timeout, then a few retries,
cover anything else holding the database.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
import anyio

from pocketmem.base.errors import StoreError
from pocketmem.base.filelock import FileLock
from pocketmem.store.base import Store
from pocketmem.store.roles import StoreWriter
from pocketmem.store.sql import core_rule
from pocketmem.store.sqlite import access, faults, instants_check, readonly_copy, schema_check
from pocketmem.store.sqlite import migrations as sqlite_migrations
from pocketmem.store.sqlite.dialect import SQLITE
from pocketmem.store.sqlite.driver import BUSY_TIMEOUT_MS, NotAStore, connect, inline_connection_class, sqlite_module
from pocketmem.store.sqlite.group import GroupCommitter
from pocketmem.store.sqlite.tx import SQLiteTx, create_vector_index

log = logging.getLogger(__name__)

T = TypeVar("T")

# Memories whose vector the index lacks, or holds under another status.
_VECTOR_MISMATCHES = (
    "select count(*) from memories m left join memory_vectors v on v.rowid = m.rowid "
    "where m.embedding is not null and (v.rowid is null or v.status != m.status)"
)

LOCK_RETRIES = 3
OPEN_RETRY_PAUSE = 0.2  # seconds, times the attempt: another process is creating or migrating the file
# How long a write waits for other processes' writes before it fails as busy.
WRITE_LOCK_TIMEOUT = 30.0


async def _rollback(conn: aiosqlite.Connection) -> None:
    """Roll back what is open; after SQLITE_FULL or an I/O error SQLite may have rolled back already."""
    try:
        await conn.execute("rollback")
    except Exception as exc:  # noqa: BLE001 - "no transaction is active" must not hide the original error
        log.debug("rollback: %s", exc)


def _is_locked(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text


async def _optimize(conn: aiosqlite.Connection, pragma: str, wait: float) -> None:
    """`pragma optimize` may write statistics: it is skipped, without waiting, while another process writes (an old
    SQLite without it loses nothing either); then the connection waits `wait` seconds again."""
    try:
        await conn.execute("pragma busy_timeout = 0")
        try:
            await conn.execute(pragma)
        finally:
            await conn.execute(f"pragma busy_timeout = {int(wait * 1000)}")
    except Exception:  # noqa: BLE001 - the queries do not depend on it
        log.debug("%s skipped", pragma, exc_info=True)


def _probe(path: str, wait: float, immutable: bool = False) -> None:
    conn = connect(path, load_vectors=True, immutable=immutable, wait=wait)
    try:
        conn.execute("select count(*) from sqlite_master").fetchall()
    finally:
        conn.close()


def _quick_check(path: str, wait: float, immutable: bool = False) -> list[str]:
    conn = connect(path, load_vectors=False, immutable=immutable, wait=wait)
    try:
        return [str(r[0]) for r in conn.execute("pragma quick_check").fetchall()]
    finally:
        conn.close()


async def _claim_vectors(tx: SQLiteTx, embed_tag: str, dimensions: int, extension: bool) -> bool:
    """Inside a write transaction: record `embed_tag` (and the vector size) as the embedder of the store's vectors
    and create the vector index when the extension loads, unless the store records another embedder, or none but
    keeps vectors (whose model no one can name): their vectors never mix with these, and nothing is done. Whether
    the store now records `embed_tag`."""
    stored = await tx.meta("embedder")
    if stored not in (None, embed_tag) or (stored is None and await tx.holds_vectors()):
        return False
    if extension and not await tx.fetch_one(
        "select 1 from sqlite_master where type = 'table' and name = 'memory_vectors'"
    ):
        # Memories written while the index was missing (e.g. sqlite-vec unavailable) join it now.
        await create_vector_index(tx, dimensions)
    await tx.execute(
        "insert into store_meta (key, value) values ('embedder', ?), ('dimensions', ?) "
        "on conflict (key) do update set value = excluded.value",
        (embed_tag, str(dimensions)),
    )
    return True


class SQLiteStore(Store):
    def __init__(self, path: Path | str, *, wait: float = BUSY_TIMEOUT_MS / 1000, setting: str | None = None) -> None:
        """`wait`: how long each statement waits for another process's lock (SQLite's busy timeout); `setting`: what
        named `path`, for the messages that say what to change (access.instead; None: the default place)."""
        self.path = str(path)
        self.wait = wait
        self.setting = setting
        self._writer: aiosqlite.Connection | None = None
        self._owner_index = False
        self._reader: aiosqlite.Connection | None = None
        # Writes that need not wait for fsync (recall bookkeeping) use their own connection set to
        # synchronous=NORMAL; the next durable commit's fsync of the shared WAL covers them too.
        self._bookkeeper: aiosqlite.Connection | None = None
        self._write_lock = asyncio.Lock()
        self._file_lock = FileLock(
            f"{self.path}.lock", WRITE_LOCK_TIMEOUT,
            f"the memory store is busy: another process has been writing for over {WRITE_LOCK_TIMEOUT:g} s; try again",
        ) if self.path != ":memory:" else None
        self._read_lock = asyncio.Lock()
        self._group = GroupCommitter(self._short_write)  # concurrent durable adds share one commit (group.py)
        self._vectors_loaded = False
        self._vector_table = False
        self._copy: str | None = None  # a private copy opened instead of the file (readonly_copy.py)
        self._immutable = False  # a closed store on a read-only mount, opened immutable=1 (readonly_copy.py)
        self.rebuilt: list[str] = []  # derived tables and indexes found missing and rebuilt (_keep_derived)
        self._schema_version: int | None = None

    @property
    def vectors_available(self) -> bool:
        return self._vectors_loaded and self._vector_table

    async def _connect(self, *, inline: bool = False, writer: bool = False) -> aiosqlite.Connection:
        """A connection whose calls run on the event loop's thread: all of a reader's (`inline`), a writer's
        but its commits and BEGIN IMMEDIATE (`writer`; driver.py says why)."""
        path = self._copy or self.path
        query_only = self._copy is not None
        immutable, wait = self._immutable, self.wait

        def factory() -> Any:
            conn = connect(path, load_vectors=True, immutable=immutable, wait=wait)
            if query_only:
                conn.execute("pragma query_only = on")  # the copy stands for a read-only store: no write
            return conn

        kind = inline_connection_class(writer=writer) if inline or writer else aiosqlite.Connection
        conn = kind(factory, iter_chunk_size=256)
        await conn
        return conn

    async def open(self) -> None:
        if self._writer is not None:
            return
        if self.path != ":memory:":
            folder = Path(self.path).parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(access.creation_problem(folder, exc)) from None
        # Servers starting together on a new file race to switch it to WAL and create its tables; a statement
        # that finds its snapshot stale fails as locked without waiting, so the whole opening is tried again. A lock
        # that was waited for the whole busy timeout is a process holding the file: that wait was the one allowed.
        for attempt in range(LOCK_RETRIES + 1):
            started = time.monotonic()
            try:
                await self._open_once()
                return
            except StoreError as exc:
                if not _is_locked(exc) or attempt == LOCK_RETRIES or time.monotonic() - started >= self.wait:
                    raise
                log.info("the memory store at %s is being set up by another process; trying again", self.path)
                await anyio.sleep(OPEN_RETRY_PAUSE * (attempt + 1))

    async def _open_once(self) -> None:
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
            # Refresh planner statistics where they are stale (cheap; SQLite's advice for long-lived connections).
            await _optimize(self._writer, "pragma optimize = 0x10002", self.wait)
            self._reader = await self._connect(inline=True) if self.path != ":memory:" else self._writer
            self._bookkeeper = await self._connect(writer=True) if self.path != ":memory:" else self._writer
            if self._bookkeeper is not self._writer:
                await self._bookkeeper.execute("pragma synchronous = normal")
        except Exception as exc:
            await self.close()
            if isinstance(exc, NotAStore):
                raise access.not_a_store(exc, self.setting) from None
            if isinstance(exc, StoreError):
                raise
            why = access.access_problems(self.path, self.setting) if self.path != ":memory:" else []
            raise StoreError(f"cannot open the memory store at {self.path}: {why[0] if why else exc}") from exc
        self._vectors_loaded = sqlite_module()[1]
        found = list(
            await self._writer.execute_fetchall("select sql from sqlite_master where name = 'memory_vectors'")
        )
        self._vector_table = bool(found)
        if found and self._vectors_loaded and " float[" in found[0][0]:
            await self.rebuild_vector_index()

    async def _probe_or_copy(self) -> None:
        """Opens the file in a plain thread; a read-only WAL store without its -shm is read from a copy."""
        try:
            await anyio.to_thread.run_sync(_probe, self.path, self.wait)
        except Exception:
            if readonly_copy.closed_read_only(self.path):
                self._immutable = True
                log.warning("the memory store at %s is read-only: reading it as it was closed; nothing can be saved "
                            "until the folder is writable", self.path)
                await anyio.to_thread.run_sync(_probe, self.path, self.wait, True)
                return
            if not readonly_copy.wal_without_shm(self.path):
                raise
            self._copy = await anyio.to_thread.run_sync(readonly_copy.private_copy, self.path)
            log.warning(
                "the memory store at %s is read-only and has a WAL but no -shm file: reading a copy at %s; "
                "nothing can be saved until the folder is writable",
                self.path, self._copy,
            )
            await anyio.to_thread.run_sync(_probe, self._copy, self.wait)

    async def _migrate(self, conn: aiosqlite.Connection) -> None:
        """Applies what is missing; a read-only store is read with the schema it has. A store a newer pocketmem
        migrated is refused either way (NewerStore)."""
        if self._copy is not None or self._immutable:
            await sqlite_migrations.refuse_newer(conn)
            return
        try:
            await sqlite_migrations.migrate(conn)
            await self._rebuild_derived(conn)
        except Exception as exc:
            fault = faults.classify(exc, self.path, writing=True)
            if fault is None or fault.kind != "read-only":
                raise
            log.warning("the memory store at %s is read-only: its schema is not brought up to date", self.path)

    async def _rebuild_derived(self, conn: aiosqlite.Connection) -> None:
        """At opening: the write lock only when something is to be rebuilt, so a store another process is
        writing to opens at once for reading."""
        if not await schema_check.derived_differences(conn):
            self._schema_version = list(await conn.execute_fetchall("pragma schema_version"))[0][0]
            return
        await conn.execute("begin immediate")
        try:
            await self._keep_derived(conn)
            await conn.execute("commit")
        except BaseException:
            await _rollback(conn)
            raise

    async def _keep_derived(self, conn: aiosqlite.Connection) -> None:
        """Inside a write transaction: a derived table, index or trigger dropped since the schema was last seen
        (`pragma schema_version` moved) is rebuilt from the memories first, so the write lands."""
        version = list(await conn.execute_fetchall("pragma schema_version"))[0][0]
        if version == self._schema_version:
            return
        done = await schema_check.repair(conn, derived_only=True)
        lines = [f"{d.type} {d.name} was {d.problem}: rebuilt from the memories" for d in done]
        for line in lines:
            log.warning("the memory store at %s: %s", self.path, line)
        self.rebuilt += lines
        self._schema_version = list(await conn.execute_fetchall("pragma schema_version"))[0][0]

    async def schema_problems(self) -> list[str]:
        """What the file lacks of the migrations' schema, and triggers they do not make (schema_check.py)."""
        conn = self._require(self._writer)
        async with self._write_lock:
            return [d.line() for d in await schema_check.differences(conn)] + await schema_check.foreign_triggers(conn)

    async def repair_schema(self) -> list[str]:
        conn = self._require(self._writer)
        async with self._write_lock, self._hold_file_lock(), self._transaction(conn):
            done = [
                f"{d.type} {d.name} was {d.problem}: {'added' if d.type == 'column' else 'recreated'}"
                for d in await schema_check.repair(conn)
            ]
            found = [str(r[0]) for r in await conn.execute_fetchall("pragma quick_check")]
            if found != ["ok"]:  # an index that disagrees with its table is rebuilt from the table
                await conn.execute("reindex")
                done.append(f"every index rebuilt from its table (quick_check: {'; '.join(found[:2])})")
        return done

    async def apply_core_rule(self, now: datetime) -> list[str]:
        conn = self._require(self._writer)
        async with self._write_lock, self._hold_file_lock(), self._transaction(conn):
            return await core_rule.demote(conn, SQLITE, now, by="doctor --repair")

    async def mend_indexes(self) -> list[str]:
        conn = self._require(self._writer)
        async with self._write_lock, self._hold_file_lock(), self._transaction(conn):
            done = await schema_check.mend(conn)
            done += await schema_check.clear_bad_vectors(conn, index=self.vectors_available)
        if self.vectors_available and not await self._vector_index_agrees():
            await self.rebuild_vector_index()
            done.append("the vector index disagreed with the memories: rebuilt from the vectors they keep")
        return done

    async def _vector_index_agrees(self) -> bool:
        try:
            async with self.read() as reader:
                return int((await reader.fetch_one(_VECTOR_MISMATCHES))[0]) == 0
        except Exception:  # noqa: BLE001 - an index that cannot be read disagrees
            log.debug("the vector index could not be read", exc_info=True)
            return False

    async def close(self) -> None:
        if self._writer is not None:
            # Keeps the query planner's statistics current so it picks the right index.
            await _optimize(self._writer, "pragma optimize", self.wait)
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
    async def read(self) -> AsyncIterator[SQLiteTx]:
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
    async def open_write(self, durable: bool = True) -> AsyncIterator[SQLiteTx]:
        # One writer for the whole file: every write transaction already excludes every other, whoever it is for,
        # so UserLocks.lock_user keeps its default (nothing) here.
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
            await self._keep_derived(conn)
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

    async def run_shared(self, work: Callable[[StoreWriter], Awaitable[T]]) -> T:
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
    async def _short_write(self, durable: bool = True) -> AsyncIterator[SQLiteTx]:
        """open_write(), with the statements run on the event loop's thread (driver.py): for short units only."""
        async with self.open_write(durable) as tx:
            tx.run_inline(True)
            try:
                yield tx
            finally:
                tx.run_inline(False)

    def open_short(self, durable: bool = True) -> AbstractAsyncContextManager[SQLiteTx]:
        """A write transaction for a short unit of work (a few indexed statements): no thread hop per statement."""
        return self._short_write(durable)

    def _hold_file_lock(self) -> AbstractAsyncContextManager[None]:
        return self._file_lock.hold() if self._file_lock is not None else nullcontext()

    async def get_meta(self, key: str) -> str | None:
        # Through the reader: the writer's statements run inline, so they must stay inside its lock.
        async with self.read() as reader:
            row = await reader.fetch_one("select value from store_meta where key = ?", (key,))
        return row[0] if row else None

    async def set_meta(self, key: str, value: str) -> None:
        async with self.open_write() as tx:
            await tx.execute(
                "insert into store_meta (key, value) values (?, ?) on "
                "conflict (key) do update set value = excluded.value",
                (key, value),
            )

    async def claim_meta(self, key: str, value: str) -> str:
        async with self.open_write() as tx:
            await tx.execute(
                "insert into store_meta (key, value) values (?, ?) on conflict (key) do nothing", (key, value)
            )
            row = await tx.fetch_one("select value from store_meta where key = ?", (key,))
        return str(row[0])

    async def prepare_vectors(self, embed_tag: str, dimensions: int) -> None:
        """Also where sqlite-vec cannot be loaded: the record keeps another embedder's vectors out of the
        memories rows, which similarities are then computed from."""
        try:
            await self._prepare_vectors(embed_tag, dimensions)
        except faults.StorageFault as exc:
            if exc.kind != "read-only":
                raise
            # A read-only store without its vector index is still read: recall uses the keyword index.
            log.warning("the memory store at %s is read-only: its vector index cannot be created", self.path)

    async def _prepare_vectors(self, embed_tag: str, dimensions: int) -> None:
        async with self.open_write() as tx:
            claimed = await _claim_vectors(tx, embed_tag, dimensions, self._vectors_loaded)
        self._vector_table = self._vector_table or (claimed and self._vectors_loaded)

    async def rebuild_vector_index(self) -> None:
        """The vector index dropped and built again from the vectors the memories keep (a store made before the
        binary index, or an index that disagrees with the memories)."""
        dimensions = await self.get_meta("dimensions")
        if dimensions is None:
            return
        async with self.open_write() as tx:
            await tx.execute("drop table if exists memory_vectors")
            await create_vector_index(tx, int(dimensions))
        log.info("vector index of %s rebuilt from the stored vectors", self.path)

    async def rebuild_vectors(self, embed_tag: str, dimensions: int, replacing: str | None, run: str) -> bool:
        async with self.open_write() as tx:
            if replacing != embed_tag and await tx.meta("embedder") == embed_tag:
                return False
            await tx.put_meta("reembed", run)
            await tx.execute("drop table if exists memory_vectors")
            await tx.execute("update memories set embedding = null")
            await tx.execute(
                "delete from store_meta where key in ('embedder', 'dimensions') or key like 'calibration:%'"
            )
            await _claim_vectors(tx, embed_tag, dimensions, self._vectors_loaded)
        self._vector_table = self._vectors_loaded
        return True

    async def quick_check(self) -> str | None:
        """`pragma quick_check`: every page and index, FTS5's included (SQLite >= 3.44); O(size of the file).

        On a connection of its own in a worker thread: WAL lets it read beside the server's connections,
        so recalls and writes are not held up while it runs (about 1 s per 10,000 memories)."""
        self._require(self._writer)
        if self.path == ":memory:":
            return None
        try:
            found = await anyio.to_thread.run_sync(_quick_check, self._copy or self.path, self.wait, self._immutable)
        except Exception as exc:  # noqa: BLE001 - a check that cannot even run has found damage
            found = [str(exc)]
        problem = None if found == ["ok"] else "; ".join(found[:3])
        if problem is not None:
            log.error("the memory store at %s is damaged: %s; run `pocketmem doctor`", self.path, problem)
        self.damage = problem
        return problem

    async def write_problems(self, wait: float) -> list[str]:
        """What keeps this process from saving (access.py): a path to make writable, or the write lock (pocketmem's
        turn on memory.db.lock, or SQLite's) held by another process for over `wait` seconds. Changes nothing."""
        self._require(self._writer)
        if self.path == ":memory:":
            return []
        if problems := access.access_problems(self.path, self.setting):
            return problems
        if self._copy is not None or self._immutable:
            return [f"the memory store at {self.path} is read-only: nothing can be saved until its folder is writable"]
        try:  # pocketmem's writers take turns on memory.db.lock before SQLite's own lock: both are looked at
            async with FileLock(f"{self.path}.lock", wait, "database is busy").hold():
                why = await anyio.to_thread.run_sync(access.write_lock_problem, self.path, wait)
        except StoreError as exc:
            why = str(exc)
        if why is None:
            return []
        if _is_locked(Exception(why)):
            return [access.held_problem(self.path, wait)]
        fault = faults.classify(StoreError(why), self.path, writing=True)
        return [str(fault) if fault is not None else f"the store's write lock cannot be taken ({why})"]

    async def check_instants(self, *, repair: bool = False, now: datetime | None = None) -> list[dict[str, Any]]:
        """Stored times that cannot be read back or lie outside the supported years; with repair, rewritten."""
        conn = self._require(self._writer)
        if not repair:  # reads only: no file lock (a read-only folder may not even hold one)
            async with self._write_lock:
                return await instants_check.check(conn, repair=False, now=now or datetime.now(UTC))
        async with self._write_lock, self._hold_file_lock():
            async with self._transaction(conn):
                return await instants_check.check(conn, repair=True, now=now or datetime.now(UTC))

    async def health(self) -> dict[str, Any]:
        conn = self._require(self._writer)
        async with self._write_lock:
            integrity = [r[0] for r in await conn.execute_fetchall("pragma integrity_check")]
            memories = list(await conn.execute_fetchall("select count(*) from memories"))[0][0]
            fts = list(await conn.execute_fetchall("select count(*) from memories_fts"))[0][0]
            fts_orphans = list(await conn.execute_fetchall(f"select count(*) {schema_check.KEYWORD_ORPHANS}"))[0][0]
            fts_gaps = list(await conn.execute_fetchall(f"select count(*) {schema_check.KEYWORD_GAPS}"))[0][0]
            vectors = None
            vector_mismatch = None
            if self.vectors_available:
                vectors = list(await conn.execute_fetchall("select count(*) from memory_vectors"))[0][0]
                vector_mismatch = list(await conn.execute_fetchall(_VECTOR_MISMATCHES))[0][0]
            count_mismatches = list(await conn.execute_fetchall(schema_check.COUNT_MISMATCHES))[0][0]
            bad_vectors = list(await conn.execute_fetchall(f"select count(*) {schema_check.BAD_VECTORS}"))[0][0]
            where, params = core_rule.forbidden(SQLITE)
            short_lived_core = list(await conn.execute_fetchall(f"select count(*) from memories where {where}", params))
            migrations = [
                r[0] for r in await conn.execute_fetchall("select name from schema_migrations order by rowid")
            ]
        return {
            "integrity": integrity[0] if integrity == ["ok"] else "; ".join(integrity[:5]),
            "memories": memories,
            "keyword_rows": fts,
            "keyword_orphans": fts_orphans,
            "keyword_gaps": fts_gaps,
            "vector_rows": vectors,
            "vector_mismatches": vector_mismatch,
            "count_mismatches": count_mismatches,
            "bad_vectors": bad_vectors,
            "short_lived_core": short_lived_core[0][0],
            "vectors_available": self.vectors_available,
            # Whether this Python's sqlite3 can load sqlite-vec at all: a fresh store creates its index only
            # with its first memory, so vectors_available alone cannot tell.
            "vector_extension": sqlite_module()[1],
            "schema": migrations[-1] if migrations else None,
            # Every known migration applied, in whatever order (branches may add them side by side).
            "schema_current": {name for name, _ in sqlite_migrations.MIGRATIONS} <= set(migrations),
        }
