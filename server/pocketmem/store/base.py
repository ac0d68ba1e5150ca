"""The store object: the roles it plays (handing out transactions, store_meta, the vector index, checks) and
`Store`, which composes them; every backend implements it (store/sqlite/store.py, store/postgres/store.py).

Inside a transaction a backend hands out `StoreReader` / `StoreWriter` (store/roles.py); the values that
pass in and out are in store/types.py.

Rows in, rows out: no ranking, thresholds or text policy live here. Every method takes the
user id, so no query can reach another user's rows. Writes happen inside `Store.write()`,
one transaction per unit of work; reads inside `Store.read()`, one consistent snapshot. Times go in and
come out as UTC instants with millisecond precision.

Per-user write locks: a write that acts for one user is opened for it (`write(user_id=...)`, also
`write_short` and `write_shared`). `Transactions` applies that here, once, for every backend: it takes the
transaction's `lock_user(user_id)` (store/roles.py, UserLocks) before the first statement. A backend only
opens transactions (`open_write`, and optionally `open_short` and `run_shared`) and never sees a user id;
PostgreSQL's `lock_user` takes an advisory lock, SQLite keeps UserLocks' default, which does nothing,
because its single writer already serialises every write.

Sync (sync.py) reads a store's changes in commit order through opaque positions: `change_marker`
names a point in that order, and `changed_memories` / `changed_tombstones` page through what
changed at or after it, keyed by sortable strings. What counts as a change: anything sync
carries (content, category, keywords, scores except judge, confidence, source, times, status,
deletion fields, supersedes, dates, content hash) — not use counts, last_active_at, derived
importance or vectors. Writes made with `record_change=False` (copies of changes made
elsewhere) do not count.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Any, Protocol, TypeVar

from pocketmem.base.models import EventKind
from pocketmem.store.roles import StoreReader, StoreWriter
from pocketmem.store.types import CommitListener

log = logging.getLogger(__name__)

T = TypeVar("T")


class Transactions(Protocol):
    """Handing out transactions. A backend opens them (`open_write`; `open_short` and `run_shared` where it has
    a cheaper way); `write`, `write_short` and `write_shared` add the per-user lock, here once for every backend."""

    @abstractmethod
    def read(self) -> AbstractAsyncContextManager[StoreReader]: ...

    @abstractmethod
    def open_write(self, durable: bool = True) -> AbstractAsyncContextManager[StoreWriter]:
        """One write transaction, for no user in particular. durable=False may skip waiting for the disk
        (bookkeeping such as use counts); a later durable commit makes it durable too."""

    def open_short(self, durable: bool = True) -> AbstractAsyncContextManager[StoreWriter]:
        """open_write() for a short unit of work (a few indexed statements); a backend may run it more cheaply."""
        return self.open_write(durable)

    async def run_shared(self, work: Callable[[StoreWriter], Awaitable[T]]) -> T:
        """Run `work` in a durable write transaction it may share with other writers waiting at the same time
        (group commit: one commit, one wait for the disk, for all of them). Returns once that commit is done;
        an exception from `work` undoes only its own writes and is raised to its caller alone."""
        async with self.open_write() as tx:
            return await work(tx)

    def write(self, durable: bool = True, *, user_id: str | None = None) -> AbstractAsyncContextManager[StoreWriter]:
        """open_write(), opened for `user_id` when it acts for one user: it holds the user's write lock from its
        first statement to its end, so two writes for one user never interleave while writes for different
        users run side by side. One that acts for several users calls `tx.lock_users(...)` before it reads or
        writes their rows (UserLocks)."""
        return _for_user(self.open_write(durable), user_id)

    def write_short(
        self, durable: bool = True, *, user_id: str | None = None
    ) -> AbstractAsyncContextManager[StoreWriter]:
        """open_short(), opened for `user_id` as write() is."""
        return _for_user(self.open_short(durable), user_id)

    async def write_shared(self, work: Callable[[StoreWriter], Awaitable[T]], *, user_id: str | None = None) -> T:
        """run_shared(), with `work` opened for `user_id` as write() is."""
        if user_id is None:
            return await self.run_shared(work)
        locked_for = user_id

        async def locked(tx: StoreWriter) -> T:
            await tx.lock_user(locked_for)
            return await work(tx)

        return await self.run_shared(locked)


@asynccontextmanager
async def _for_user(
    opening: AbstractAsyncContextManager[StoreWriter], user_id: str | None
) -> AsyncIterator[StoreWriter]:
    async with opening as tx:
        if user_id is not None:
            await tx.lock_user(user_id)  # before the first statement
        yield tx


class MetaAdmin(Protocol):
    """store_meta, each call its own transaction."""

    @abstractmethod
    async def get_meta(self, key: str) -> str | None: ...

    @abstractmethod
    async def set_meta(self, key: str, value: str) -> None: ...

    @abstractmethod
    async def claim_meta(self, key: str, value: str) -> str:
        """Store `value` under `key` unless a value is already there (never overwritten); return the value kept,
        so callers racing to create it (workers, coroutines) all end up with the same one."""


class VectorAdmin(MetaAdmin, Protocol):
    """The vector index: created for the embedder's size, rebuilt by reindex."""

    @abstractmethod
    async def prepare_vectors(self, embed_tag: str, dimensions: int) -> None:
        """Create the vector index for `dimensions` if missing and record `embed_tag` as the embedder that fills
        it, in one transaction; a store that records another embedder is left as it is."""

    _vectors_ensured: tuple[str, int] | None = None

    async def ensure_vectors(self, embed_tag: str, dimensions: int) -> None:
        """Make sure the vector index for `embed_tag`'s vectors of `dimensions` exists; idempotent, and free
        after the first call for the same pair, so every write path may call it before it stores a vector.

        A store that records no embedder yet gets its index now (prepare_vectors), for the size the first vector
        tells, and records `embed_tag`; one that records another embedder, or none but keeps vectors, is left as it
        is (its vectors never mix with these: the caller's transaction finds the record and writes no vector).
        """
        if self._vectors_ensured == (embed_tag, dimensions):
            return
        if await self.get_meta("embedder") != embed_tag:
            await self.prepare_vectors(embed_tag, dimensions)
            if await self.get_meta("embedder") != embed_tag:
                return
        self._vectors_ensured = (embed_tag, dimensions)

    @abstractmethod
    async def rebuild_vectors(self, embed_tag: str, dimensions: int, replacing: str | None, run: str) -> bool:
        """In one transaction: every vector dropped, the index recreated for `dimensions`, `embed_tag` recorded in
        place of the embedder before (re-embedding) and `run` stored as the run's record (store_meta `reembed`);
        memories' vectors must be rewritten after. Not done, and False, when the store records `embed_tag` although
        the caller found `replacing` there: another process began that run meanwhile, and this one joins it."""


def keyword_rows_added(n: int) -> str:
    """The line `mend_indexes` reports for memories given back their keyword row (both backends)."""
    what, its = ("1 memory", "its") if n == 1 else (f"{n} memories", "their")
    return f"{what} had no keyword row: indexed again from {its} text"


class Checks(Protocol):
    """Integrity checks and housekeeping, for `pocketmem doctor`, maintenance and recall's `degraded`."""

    # Set when damage was detected (a failed check or a "malformed" error); recall reports it as `degraded`.
    damage: str | None = None
    # Why the last attempt to connect to the database server failed, until one succeeds (PostgreSQL; its
    # credentials hidden); recall names it in `degraded` when the cloud library does not answer.
    connect_error: str | None = None

    async def quick_check(self) -> str | None:
        """A structural check of the stored data (pages and indexes); the problem found, or None.
        Backends whose engine guarantees this (PostgreSQL) keep the default."""
        return None

    async def check_instants(self, *, repair: bool = False, now: datetime | None = None) -> list[dict[str, Any]]:
        """Stored times that cannot be read back or lie outside the years the time codec accepts (table, row,
        column, value, why); with repair, each rewritten in the stored form. Backends override it."""
        return []

    @abstractmethod
    async def health(self) -> dict[str, Any]:
        """Integrity and index agreement, for `pocketmem doctor` and tests. `keyword_gaps` counts the memories
        the keyword index has no entry for (a recall by an exact word misses them)."""

    @abstractmethod
    async def schema_problems(self) -> list[str]:
        """What the store lacks of the schema the migrations define (a table, index or column), a line each with
        its repair, for `pocketmem doctor`."""

    @abstractmethod
    async def repair_schema(self) -> list[str]:
        """`doctor --repair`: what `schema_problems` finds, recreated or added; what was done, a line each."""

    @abstractmethod
    async def apply_core_rule(self, now: datetime) -> list[str]:
        """`doctor --repair`: todos, episodes and contexts stored as core (persistence 1), which the core rule
        forbids, given their category's persistence (store/sql/core_rule.py, as the migrations did); their ids."""

    async def mend_indexes(self) -> list[str]:
        """`doctor --repair`: the indexes made to agree with the memories again (the memories the keyword index
        has no entry for indexed from their stored text, ...); what was mended, a line each. Backends override
        it."""
        return []

    async def optimize(self) -> None:
        """Backend housekeeping after maintenance (planner statistics, folding counters); may do nothing."""
        return None


class VectorStore(Transactions, VectorAdmin, Protocol):
    """Transactions and the vector index (embedding on the write path, the embed queue, import)."""


class MetaStore(Transactions, MetaAdmin, Protocol):
    """Transactions and store_meta (measurements kept between runs: calibration, sameness)."""


class UpkeepStore(Transactions, Checks, Protocol):
    """Transactions and the integrity checks (maintenance)."""


class Store(Transactions, VectorAdmin, MetaAdmin, Checks, ABC):
    """A backend: opens, migrates, hands out transactions (the store-level roles of store/roles.py)."""

    def on_commit(self, listener: CommitListener) -> Callable[[], None]:
        """Call `listener` after every committed write, with the users it changed; returns a remover."""
        listeners: list[CommitListener] = self.__dict__.setdefault("_commit_listeners", [])
        listeners.append(listener)

        def remove() -> None:
            if listener in listeners:
                listeners.remove(listener)

        return remove

    async def _committed(self, changes: Mapping[str, frozenset[EventKind]]) -> None:
        """Backends call this after a commit; a failing listener is logged, never undoes the write."""
        for listener in list(self.__dict__.get("_commit_listeners", ())):
            try:
                await listener(changes)
            except Exception:  # the write is committed; a listener cannot fail it
                log.exception("commit listener failed")

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...
