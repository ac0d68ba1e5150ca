"""Which sqlite3 module to use, and how a connection is set up.

Python's own `sqlite3` cannot load extensions on many builds (this one included: no
`enable_load_extension`), and sqlite-vec is an extension. We prefer the standard library when it
can load sqlite-vec and otherwise use `sqlean` (sqlean.py), a drop-in sqlite3 with extension
loading and a current SQLite, available as wheels for Linux, macOS and Windows.

Every connection to the store is made here, so this is where a database is refused before opening changes it:
one that opening would create in place of a missing one while its `-wal` or `-journal` is still there (SQLite would
make a new, empty file and delete that journal, and the writes it holds with it: `orphaned_journal`); a store beside
a `-wal` of another database, which opening would replay into it (`foreign_journal`); another program's database,
which the migrations would fill with pocketmem's tables (`database_kind`). And every text column is read here
(`stored_text`): bytes that are not UTF-8 come back as UndecodedText for the row mappers to leave out, never as an
error that fails the whole read.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import sqlite3
from contextlib import closing
from types import ModuleType
from typing import Any
from urllib.request import pathname2url

from pocketmem.base.errors import StoreError
from pocketmem.store.sqlite.faults import DAMAGED
from pocketmem.store.types import UndecodedText

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000


@functools.cache
def vec_extension() -> str:
    """The sqlite-vec loadable extension's path, found without importing the package (which imports numpy)."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or spec.origin is None:
        raise ImportError("sqlite-vec is not installed")
    return os.path.join(os.path.dirname(spec.origin), "vec0")


def _can_load_vec(module: Any) -> bool:
    try:
        conn = module.connect(":memory:")
        try:
            conn.enable_load_extension(True)
            conn.load_extension(vec_extension())
            conn.enable_load_extension(False)
            conn.execute("select vec_version()").fetchone()
            conn.execute("create virtual table t using fts5(x)")
        finally:
            conn.close()
        return True
    except Exception:  # noqa: BLE001 - any failure means "this module cannot do it"
        return False


@functools.cache
def sqlite_module() -> tuple[ModuleType, bool]:
    """(module, vectors_available): the stdlib when it can load sqlite-vec, else sqlean, else stdlib without vectors."""
    if hasattr(sqlite3.Connection, "enable_load_extension") and _can_load_vec(sqlite3):
        return sqlite3, True
    try:
        import sqlean

        if _can_load_vec(sqlean):
            return sqlean, True
    except ImportError:
        pass
    log.warning("sqlite-vec cannot be loaded: recall runs on the keyword index only (pocketmem doctor explains)")
    return sqlite3, False


# What SQLite replays into the database when it opens it, and deletes when it makes a new one instead.
JOURNALS = ("-wal", "-journal")
# pocketmem's record of its migrations, which every release made before anything else: a database that keeps it (or,
# should it be lost, a memories table of pocketmem's columns) is a store; one without tables is a store to be made.
MIGRATIONS_RECORD = ["name", "applied_at"]
MEMORY_MARKS = frozenset({"content_hash", "embed_model", "persistence"})
# How long the read-only looks at whose -wal lies beside the store wait for another process's lock: a reader of a WAL
# store waits for none but one recovering the -wal, and a look that cannot be had is skipped, never waited out.
LOOK_WAIT = 0.5
# A -wal's header (its salts change whenever SQLite starts the file over) and the -wal headers this process has seen
# to be its store's own: frames another connection appends after it are the store's too, so it is looked at once.
WAL_HEADER = 32
_OWN_WALS: set[tuple[str, bytes]] = set()


class NotAStore(StoreError):
    """The database, or what the -wal beside it would make of it, is not a pocketmem store: refused before anything
    is written to it. `tables`: the tables it holds (a foreign file's; empty for a foreign -wal, whose message is
    whole)."""

    def __init__(self, message: str, path: str, tables: list[str] | None = None) -> None:
        super().__init__(message)
        self.path, self.tables = path, tables or []


def database_kind(conn: Any) -> tuple[str, list[str]]:
    """What the database `conn` reads is, and its tables: `store` (pocketmem's), `empty` (no tables: a store to be
    made) or `other` (another program's)."""
    tables = "select name from sqlite_master where type = 'table' and name not like 'sqlite%'"
    names = [r[0] for r in conn.execute(tables)]
    if not names:
        return "empty", names
    if [r[1] for r in conn.execute("pragma table_info(schema_migrations)")] == MIGRATIONS_RECORD:
        return "store", names
    if MEMORY_MARKS <= {r[1] for r in conn.execute("pragma table_info(memories)")}:
        return "store", names
    return "other", names


def orphaned_journal(path: str) -> str | None:
    """Why the store at `path` must not be opened: the database is missing but a journal beside it holds writes
    (it was moved, renamed or deleted while a process had written to it). None when the database is there, or
    no journal holding anything is."""
    if path == ":memory:" or os.path.lexists(path):
        return None
    for suffix in JOURNALS:
        try:
            size = os.stat(path + suffix).st_size
        except OSError:
            continue
        if size > 0:
            name = os.path.basename(path)
            return (
                f"{path} is missing, but {path}{suffix} ({size} bytes) beside it holds writes not yet copied into it: "
                f"opening the store would make a new, empty {name} and SQLite would delete {name}{suffix} with them, "
                f"so nothing was opened or changed. Put {name} back beside it (from where it was moved, or a backup) "
                f"and start again; if {name} is truly lost, move {name}{suffix} away (keep it) to begin a new store"
            )
    return None


def _read_as(path: str, query: str) -> tuple[str, list[str]]:
    """`database_kind` of the store at `path` read through a read-only connection (`query`: `mode=ro`, with the -wal,
    or `immutable=1`, the file alone), a store's every table touched (its first row, as bytes), or `damaged` with
    SQLite's words when that cannot be read. Waits LOOK_WAIT at most for another process's lock."""
    module = sqlite_module()[0]
    try:
        with closing(module.connect(f"file:{pathname2url(path)}?{query}", uri=True, timeout=LOOK_WAIT)) as conn:
            kind, names = database_kind(conn)
            plain = "select name from sqlite_master where type = 'table' and sql not like 'create virtual%'"
            touched = conn.execute(plain).fetchall() if kind == "store" else []
            conn.text_factory = bytes  # what the rows say is not looked at
            for (name,) in touched:
                conn.execute(f'select * from "{name}" limit 1').fetchall()
            return kind, names
    except module.DatabaseError as exc:
        if not any(word in str(exc) for word in DAMAGED):
            raise
        return "damaged", [str(exc)]


def foreign_journal(path: str) -> str | None:
    """Why the store at `path` must not be opened: the `-wal` beside it is not its own (another database's, or one
    left from before the file was restored from a backup): read without it the file is a pocketmem store, read with
    it it is not, or is damaged, and the first connection to close would copy that WAL's pages into the file. Both
    looks are read-only connections, which never copy a WAL into the file. None when there is no such -wal, or the
    looks cannot tell (opening then reports what it meets)."""
    try:
        with open(path + "-wal", "rb") as wal:
            seen = (path, wal.read(WAL_HEADER))
    except OSError:
        return None
    if path == ":memory:" or len(seen[1]) < WAL_HEADER or seen in _OWN_WALS:
        return None
    module = sqlite_module()[0]
    try:
        kind, found = _read_as(path, "mode=ro")
        if kind == "store":
            _OWN_WALS.add(seen)
            return None
        if _read_as(path, "immutable=1")[0] != "store":
            return None  # not a store either way: the opening judges the file itself
    except module.Error:
        log.debug("cannot tell whose %s-wal is", path, exc_info=True)
        return None
    name = os.path.basename(path)
    holds = ("holds no tables at all" if kind == "empty" else f"cannot be read ({found[0]})" if kind == "damaged"
             else f"holds another database's tables ({', '.join(found[:5])})")
    return (
        f"{path}-wal is not the WAL of {name}: {name} as pocketmem last wrote it is a pocketmem store, but read with "
        f"that -wal it {holds}; opening it would copy that WAL into {name} and spoil the store, so nothing was opened "
        f"or changed. Move {name}-wal and {name}-shm out of {os.path.dirname(path) or '.'} (keep them if they belong "
        "to another program's database) and start again"
    )


def stored_text(raw: bytes) -> str:
    """A text column as every connection reads it: UTF-8, and where the stored bytes are not (another program wrote
    them), an UndecodedText the row mappers leave out, so one such row never fails a whole read (sqlite3's own
    decoding raises for the statement)."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return UndecodedText(raw)


def connect(path: str, *, load_vectors: bool, immutable: bool = False, wait: float = BUSY_TIMEOUT_MS / 1000) -> Any:
    """A raw connection in autocommit mode (we issue BEGIN ourselves), WAL, foreign keys, busy timeout (`wait`
    seconds, from the first statement on: switching to WAL waits for a process that holds the file).
    `immutable`: a file nobody writes (a read-only mount; readonly_copy.py says when), read as it is. Refused before
    anything is written, for a missing database whose journal is still there (StoreError, `orphaned_journal`), a
    link to nothing (StoreError: SQLite would make a new store where it points), a
    -wal of another database beside it (NotAStore, `foreign_journal`) and a database of another program's
    (NotAStore, with its tables)."""
    if (orphaned := orphaned_journal(path)) is not None:
        raise StoreError(orphaned)
    if os.path.islink(path) and not os.path.exists(path):  # SQLite would make a new, empty store at its target
        raise StoreError(f"{path} is a symbolic link to {os.readlink(path)}, which does not exist (a disk not "
                         "mounted?): nothing was opened or created. Make its target reachable, or point the setting "
                         "at the store's file")
    if not immutable and (foreign := foreign_journal(path)) is not None:
        raise NotAStore(foreign, path)
    module, vectors_available = sqlite_module()
    target = f"file:{pathname2url(path)}?immutable=1" if immutable else path
    conn = module.connect(target, isolation_level=None, check_same_thread=False, timeout=wait, uri=immutable)
    conn.text_factory = stored_text
    conn.execute(f"pragma busy_timeout = {int(wait * 1000)}")
    if path != ":memory:" and (found := database_kind(conn))[0] == "other":
        conn.close()
        raise NotAStore(f"{path} is not a pocketmem store: its tables ({', '.join(found[1][:5])}) are another "
                        "program's; nothing was written to it", path, found[1])
    conn.execute("pragma foreign_keys = on")
    if immutable:
        conn.execute("pragma query_only = on")
    elif path != ":memory:":
        mode = conn.execute("pragma journal_mode = wal").fetchone()[0]
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"could not switch {path} to WAL mode (got {mode})")
    # FULL: every acknowledged commit is on disk before we answer, power loss included.
    conn.execute("pragma synchronous = full")
    if load_vectors and vectors_available:
        conn.enable_load_extension(True)
        conn.load_extension(vec_extension())
        conn.enable_load_extension(False)
    return conn


SLOW_CALLS = frozenset({"executemany", "executescript", "backup", "iterdump"})
SLOW_STATEMENTS = ("begin", "commit")


def is_slow(fn: Any, args: tuple[Any, ...]) -> bool:
    """Calls a writer hands to its thread: commits (fsync), BEGIN IMMEDIATE (may wait for another process's
    write lock up to the busy timeout) and many-row statements. Everything else takes microseconds."""
    if getattr(fn, "__name__", "") in SLOW_CALLS:
        return True
    return bool(args) and isinstance(args[0], str) and args[0].lstrip()[:6].lower().startswith(SLOW_STATEMENTS)


def inline_connection_class(writer: bool = False) -> type:
    """An aiosqlite connection whose calls run on the event loop's own thread.

    aiosqlite hands each call to the connection's thread and back: two thread switches, 0.1 ms on an
    idle machine and several on a busy one, where an indexed read or a one-row write takes tens of
    microseconds. A reader runs everything inline. A writer runs single statements inline while its
    store says the work is short (`inline_writes`), and keeps the thread for what can wait (is_slow):
    a durable commit waits for fsync, BEGIN IMMEDIATE for other processes, and neither may hold up
    the event loop. The thread also opens and closes it.
    """
    import aiosqlite

    class InlineConnection(aiosqlite.Connection):
        # A writer runs inline only while this is on: in units of work known to be short (an add, the
        # recall bookkeeping), never in maintenance passes or bulk writes, whose scans would hold up the loop.
        inline_writes = False

        async def _execute(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
            if writer and (not self.inline_writes or is_slow(fn, args)):
                return await super()._execute(fn, *args, **kwargs)
            if not self._running or not self._connection:
                raise ValueError("Connection closed")
            return fn(*args, **kwargs)

    return InlineConnection
