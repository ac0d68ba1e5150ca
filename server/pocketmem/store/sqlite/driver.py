"""Which sqlite3 module to use, and how a connection is set up.

Python's own `sqlite3` cannot load extensions on many builds (this one included: no
`enable_load_extension`), and sqlite-vec is an extension. We prefer the standard library when it
can load sqlite-vec and otherwise use `sqlean` (sqlean.py), a drop-in sqlite3 with extension
loading and a current SQLite, available as wheels for Linux, macOS and Windows.

Every connection to the store is made here, so this is where a database is refused that opening would create
in place of a missing one while its `-wal` or `-journal` is still there: SQLite would make a new, empty file and
delete that journal, and the writes it holds with it (`orphaned_journal`).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import sqlite3
from types import ModuleType
from typing import Any
from urllib.request import pathname2url

from pocketmem.base.errors import StoreError

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


def connect(path: str, *, load_vectors: bool, immutable: bool = False, wait: float = BUSY_TIMEOUT_MS / 1000) -> Any:
    """A raw connection in autocommit mode (we issue BEGIN ourselves), WAL, foreign keys, busy timeout (`wait`
    seconds, from the first statement on: switching to WAL waits for a process that holds the file).
    `immutable`: a file nobody writes (a read-only mount; readonly_copy.py says when), read as it is. Refused
    (StoreError) for a missing database whose journal is still there (`orphaned_journal`)."""
    if (orphaned := orphaned_journal(path)) is not None:
        raise StoreError(orphaned)
    module, vectors_available = sqlite_module()
    target = f"file:{pathname2url(path)}?immutable=1" if immutable else path
    conn = module.connect(target, isolation_level=None, check_same_thread=False, timeout=wait, uri=immutable)
    conn.execute(f"pragma busy_timeout = {int(wait * 1000)}")
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
