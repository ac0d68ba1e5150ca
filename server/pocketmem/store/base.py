"""The store interface every backend implements: SQLite (store/sqlite.py) and PostgreSQL (store/postgres.py).

The interface is cut into roles (store/roles.py); the classes here compose them.

Rows in, rows out: no ranking, thresholds or text policy live here. Every method takes the
user id, so no query can reach another user's rows. Writes happen inside `Store.write()`,
one transaction per unit of work, and writes of one user never interleave when the transaction is
opened for that user (`write(user_id=...)`; SQLite has one writer; PostgreSQL takes a per-user lock
at the start); reads inside
`Store.read()`, one consistent snapshot. Times go in and come out as UTC instants with
millisecond precision.

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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pocketmem.base.models import (
    Category,
    EventKind,
    Scores,
    Status,
)
from pocketmem.store.profile_base import ProfileReader, ProfileWriter
from pocketmem.store.roles import (
    BrowseReads,
    Checks,
    EventReads,
    EventWrites,
    ImportWrites,
    MemoryReads,
    MemoryWrites,
    MetaAdmin,
    MetaReads,
    MetaWrites,
    PendingReads,
    PendingWrites,
    SearchReads,
    SyncFeed,
    SyncWrites,
    TermStats,
    TokenReads,
    TokenWrites,
    Transactions,
    TrashReads,
    TrashWrites,
    UpkeepReads,
    UserLocks,
    VectorAdmin,
)

log = logging.getLogger(__name__)

# After a write commits: {user_id: the event kinds that transaction wrote}.
CommitListener = Callable[[Mapping[str, frozenset[EventKind]]], Awaitable[None]]


@dataclass(frozen=True)
class IndexedText:
    """What the keyword index stores for a memory: pre-split terms (see text.index_terms)."""

    terms: str
    keyword_terms: str


@dataclass(frozen=True, slots=True)
class ScoreRow:
    """What rescoring needs of a memory; maintenance reads these instead of whole rows."""

    id: str
    scores: Scores
    last_active: datetime  # last_active_at, or created_at when it was never used
    info_importance: float
    time_coef: float
    importance: float

    # The columns both backends select, in this order; `last_active` comes as each backend stores time.
    COLUMNS = (
        "id, emotion, info, persistence, judge, coalesce(last_active_at, created_at), info_importance, "
        "time_coef, importance"
    )

    @classmethod
    def of(cls, row: Sequence[Any], to_time: Callable[[Any], datetime]) -> ScoreRow:
        return cls(
            id=row[0],
            scores=Scores.model_construct(emotion=row[1], info=row[2], persistence=row[3], judge=row[4]),
            last_active=to_time(row[5]),
            info_importance=row[6],
            time_coef=row[7],
            importance=row[8],
        )


@dataclass(frozen=True)
class MemoryFilter:
    statuses: Sequence[Status] = (Status.active,)
    category: Category | None = None
    text: str | None = None  # plain substring match on content
    since: datetime | None = None  # created_at at or after
    until: datetime | None = None  # created_at before
    limit: int = 50
    offset: int = 0


BrowseOrder = Literal["newest", "oldest", "importance", "uses"]


@dataclass(frozen=True)
class BrowseFilter:
    """The management page's list: MemoryFilter plus core, source, a created_at range and an order."""

    statuses: Sequence[Status] = (Status.active,)
    category: Category | None = None
    core: bool | None = None  # True: persistence >= 1 only; False: the others
    source: str | None = None  # exact match
    since: datetime | None = None  # created_at at or after
    until: datetime | None = None  # created_at before
    text: str | None = None  # as MemoryFilter.text
    order: BrowseOrder = "newest"  # newest / oldest: created_at (deleted_at for the trash alone)
    limit: int = 50
    offset: int = 0


@dataclass
class StoreStats:
    by_status: dict[str, int] = field(default_factory=dict)
    by_category: dict[str, int] = field(default_factory=dict)
    core: int = 0
    pending: int = 0
    tombstones: int = 0
    revisions: int = 0
    events: int = 0
    oldest: datetime | None = None
    newest: datetime | None = None
    unreadable: list[str] = field(default_factory=list)  # why a value could not be read; the rest is counted


def term_deltas(old: IndexedText | None, new: IndexedText | None) -> dict[str, int]:
    """How a memory's change moves its owner's term counts: -1 for each distinct term it loses, +1 for each
    it gains; the term '' counts the memory itself."""

    def terms(text: IndexedText | None) -> set[str]:
        return set() if text is None else {"", *f"{text.terms} {text.keyword_terms}".split()}

    before, after = terms(old), terms(new)
    return {**{t: -1 for t in before - after}, **{t: 1 for t in after - before}}


class StoreReader(
    MemoryReads, SearchReads, TermStats, PendingReads, EventReads, TrashReads, UpkeepReads, BrowseReads, SyncFeed,
    TokenReads, MetaReads, ProfileReader,
):
    """Read queries, available inside both read and write transactions: every read role (store/roles.py)."""


class StoreWriter(
    StoreReader, MemoryWrites, PendingWrites, EventWrites, TrashWrites, ImportWrites, TokenWrites, SyncWrites,
    MetaWrites, UserLocks, ProfileWriter,
):
    """Writes; only available inside `Store.write()`: every write role (store/roles.py)."""



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
