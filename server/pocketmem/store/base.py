"""The store interface every backend implements: SQLite (store/sqlite.py) and PostgreSQL (store/postgres.py).

Rows in, rows out: no ranking, thresholds or text policy live here. Every method takes the
user id, so no query can reach another user's rows. Writes happen inside `Store.write()`,
one transaction per unit of work, and writes of one user never interleave (SQLite has one
writer; PostgreSQL takes a per-user lock at the first statement for that user); reads inside
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
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeVar

from pocketmem.base.models import (
    ApiToken,
    Category,
    DeleteReason,
    Event,
    EventKind,
    Memory,
    PendingItem,
    PendingStatus,
    Revision,
    Scores,
    Status,
    Tombstone,
    Usage,
)
from pocketmem.store.profile_base import ProfileReader, ProfileWriter

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


class StoreReader(ProfileReader):
    """Read queries, available inside both read and write transactions."""

    @abstractmethod
    async def get_memory(self, user_id: str, memory_id: str) -> Memory | None: ...

    @abstractmethod
    async def get_memories(self, user_id: str, memory_ids: Sequence[str]) -> list[Memory]:
        """The user's memories with these ids, in any status, in the order of `memory_ids` (unknown ids left out)."""

    @abstractmethod
    async def find_by_hash(self, user_id: str, content_hash: str, statuses: Sequence[Status]) -> Memory | None:
        """One memory with this content hash in one of `statuses`, if any."""

    @abstractmethod
    async def successor_of(self, user_id: str, memory_id: str) -> Memory | None:
        """The non-trashed memory that supersedes `memory_id`, if any."""

    async def missing_vectors(self, limit: int, after: int = 0) -> list[tuple[int, str, str, str, list[str]]]:
        """Memories of every user stored without a vector (the embedder was down), in insertion order after
        position `after`: (position, user_id, id, content, keywords). The embed queue's work list."""
        raise NotImplementedError

    @abstractmethod
    async def count_active(self, user_id: str) -> int:
        """Active memories of the user (what the cap counts), cheap enough to ask after every write."""

    @abstractmethod
    async def list_memories(self, user_id: str, flt: MemoryFilter) -> tuple[list[Memory], int]:
        """A page of memories and the total matching. `text`: case-insensitive substring of the content or of
        the keywords (as JSON text). Newest first: by deleted_at for the trash alone, else by created_at; ties
        in reverse order of insertion."""

    @abstractmethod
    async def core_memories(self, user_id: str, limit: int) -> list[Memory]:
        """Active memories with persistence 1, oldest first (ties in insertion order)."""

    @abstractmethod
    async def vector_neighbours(
        self, user_id: str, vector: Sequence[float], k: int, statuses: Sequence[Status]
    ) -> list[tuple[str, float]]:
        """(memory id, cosine similarity) of the k nearest searchable memories."""

    @abstractmethod
    async def keyword_hits(
        self, user_id: str, terms: Sequence[str], k: int, statuses: Sequence[Status], *, all_terms: bool = False
    ) -> list[tuple[str, float]]:
        """(memory id, score) for the k memories that best match any (with `all_terms`: every one) of the index
        terms (text.query_terms, text.signature).

        The score is higher for better matches (SQLite: BM25; PostgreSQL: ts_rank); only the order
        counts, recall scores keywords itself from term_document_counts and indexed_terms."""

    @abstractmethod
    async def core_similarities(self, user_id: str, vector: Sequence[float]) -> list[tuple[str, float]]:
        """(id, cosine to `vector`) for every active core memory (persistence >= policy.CORE_PERSISTENCE,
        bound as a parameter) that has a vector."""

    @abstractmethod
    async def important_similarities(
        self, user_id: str, vector: Sequence[float], limit: int, statuses: Sequence[Status]
    ) -> list[tuple[str, float]]:
        """(id, cosine to `vector`) for the `limit` most important memories of `statuses` that have a vector."""

    @abstractmethod
    async def memories_between(
        self, user_id: str, start: datetime, end: datetime, statuses: Sequence[Status], limit: int
    ) -> list[Memory]:
        """Memories whose valid_from lies in [start, end), newest first."""

    @abstractmethod
    async def pairwise_similarities(self, user_id: str, memory_ids: Sequence[str]) -> dict[tuple[str, str], float]:
        """Cosine similarity between each pair of the given memories (key: (id_a, id_b), a < b)."""

    @abstractmethod
    async def similarities(self, user_id: str, memory_ids: Sequence[str], vector: Sequence[float]) -> dict[str, float]:
        """Cosine similarity of each memory's vector to `vector`."""

    @abstractmethod
    async def indexed_terms(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, IndexedText]:
        """The pre-split terms the keyword index holds for each memory, exactly as written."""

    async def similarities_and_terms(
        self, user_id: str, memory_ids: Sequence[str], vector: Sequence[float]
    ) -> tuple[dict[str, float], dict[str, IndexedText]]:
        """`similarities` and `indexed_terms` of the same memories, in one read where the backend can."""
        return await self.similarities(user_id, memory_ids, vector), await self.indexed_terms(user_id, memory_ids)

    @abstractmethod
    async def term_document_counts(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """How many stored memories (of every user, in any status) contain each term, and how many
        memories are stored in all. Terms found nowhere are left out. The total may overstate by
        memories purged since (SQLite reads the highest row id)."""

    @abstractmethod
    async def user_term_counts(self, user_id: str, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """How many of this user's stored memories (in any status) contain each term, and how many memories
        the user has stored. Terms the user never wrote are left out. Other users' writes never change it."""

    @abstractmethod
    async def get_pending(self, user_id: str, pending_id: str) -> PendingItem | None: ...

    @abstractmethod
    async def list_pending(
        self, user_id: str, statuses: Sequence[PendingStatus], limit: int, offset: int = 0
    ) -> tuple[list[PendingItem], int]: ...

    @abstractmethod
    async def due_pending(self, user_id: str, now: datetime, limit: int) -> list[PendingItem]:
        """Pending items to show now: status pending, or snoozed with the cooldown over."""

    @abstractmethod
    async def find_pending_by_hash(self, user_id: str, content_hash: str) -> PendingItem | None: ...

    @abstractmethod
    async def operation_result(self, user_id: str, operation_id: str) -> tuple[str, dict[str, Any]] | None:
        """(request hash, result) recorded for an operation id."""

    @abstractmethod
    async def list_revisions(self, user_id: str, memory_id: str) -> list[Revision]: ...

    @abstractmethod
    async def list_tombstones(self, user_id: str, limit: int = 100) -> list[Tombstone]:
        """The most recent tombstones, newest deleted_at first."""

    @abstractmethod
    async def list_events(
        self, user_id: str, limit: int = 100, kinds: Sequence[EventKind] | None = None
    ) -> list[Event]:
        """The most recent events (of these kinds), newest first."""

    @abstractmethod
    async def stats(self, user_id: str) -> StoreStats: ...

    @abstractmethod
    async def get_user(self, user_id: str) -> dict[str, Any] | None: ...

    # -- maintenance, review, todos, export -------------------------------------------------
    @abstractmethod
    async def user_ids(self) -> list[str]:
        """Every user with a row in the store."""

    @abstractmethod
    async def scan_memories(
        self, user_id: str, statuses: Sequence[Status], after: str | None, limit: int
    ) -> list[Memory]:
        """Up to `limit` memories with the given statuses and an id greater than `after`, by id (keyset paging)."""

    @abstractmethod
    async def scan_scores(
        self, user_id: str, statuses: Sequence[Status], after: str | None, limit: int
    ) -> list[ScoreRow]:
        """As scan_memories, only the columns rescoring reads (the same order and paging)."""

    @abstractmethod
    async def expired_memories(self, user_id: str, now: datetime, limit: int) -> list[Memory]:
        """Active or superseded non-core memories whose expires_at is at or before `now`."""

    @abstractmethod
    async def purgeable_memories(self, user_id: str, now: datetime, limit: int) -> list[Memory]:
        """Trashed memories whose purge_at is at or before `now`."""

    @abstractmethod
    async def open_todos(self, user_id: str, limit: int, due_by: datetime | None = None) -> list[Memory]:
        """Active, not completed todos, soonest first by coalesce(remind_at, due_at) (undated last).

        With `due_by`: only those whose remind_at (or, without one, due_at) is at or before it.
        """

    @abstractmethod
    async def usage(self, user_id: str, memory_ids: Sequence[str] | None = None) -> dict[str, Usage]:
        """Usage rows by memory id (all of the user's when `memory_ids` is None)."""

    @abstractmethod
    async def all_tombstones(self, user_id: str) -> list[Tombstone]: ...

    @abstractmethod
    async def all_revisions(self, user_id: str) -> list[Revision]: ...

    @abstractmethod
    async def all_pending(self, user_id: str) -> list[PendingItem]: ...

    @abstractmethod
    async def events_after(self, user_id: str, after_id: int, limit: int) -> list[Event]:
        """Events with an id greater than `after_id`, oldest first."""

    # -- browsing (the management page) ---------------------------------------------------------
    @abstractmethod
    async def browse_memories(self, user_id: str, flt: BrowseFilter) -> tuple[list[Memory], int]:
        """A page of memories by the filter, and the total matching; ties in reverse order of insertion."""

    @abstractmethod
    async def memory_events(self, user_id: str, memory_id: str, limit: int) -> list[Event]:
        """The most recent events about one memory, newest first."""

    @abstractmethod
    async def latest_event_id(self, user_id: str) -> int:
        """The id of the user's newest event (0 when none): a page polls it to see that something changed."""

    @abstractmethod
    async def created_per_day(
        self, user_id: str, since: datetime, statuses: Sequence[Status]
    ) -> list[tuple[str, str, int]]:
        """(UTC day YYYY-MM-DD, category, memories created that day) for created_at at or after `since`."""

    @abstractmethod
    async def events_per_day(
        self, user_id: str, kinds: Sequence[EventKind], since: datetime
    ) -> list[tuple[str, str, int]]:
        """(UTC day YYYY-MM-DD, event kind, count) for events at or after `since`."""

    @abstractmethod
    async def importance_histogram(self, user_id: str, buckets: int) -> list[tuple[int, int]]:
        """(bucket, count) of active non-core memories by stored importance; bucket = floor(importance * buckets),
        the top one closed (importance 1 falls in buckets - 1)."""

    @abstractmethod
    async def lowest_importance(self, user_id: str, count: int) -> list[Memory]:
        """The active non-core memories with the lowest stored importance (refreshed by maintenance), lowest first;
        read through the importance index, unlike StoreWriter.eviction_candidates which recomputes every row."""

    # Tokens are looked up by their id before the user is known (the id is the public part of a
    # presented token), so these are the only reads not scoped by a user id.
    # -- sync ---------------------------------------------------------------------------------
    @abstractmethod
    async def change_marker(self) -> str:
        """A position in this store's change order: `changed_*(since=marker)` returns everything changed
        after this transaction's snapshot (and perhaps a little before)."""

    @abstractmethod
    async def changed_memories(
        self, user_id: str, since: str | None, after: str | None, limit: int
    ) -> list[tuple[str, Memory]]:
        """(key, memory) for memories changed at or after `since` (None: from the beginning), by key;
        `after` is the last key of the previous page. Keys sort as text."""

    @abstractmethod
    async def changed_tombstones(
        self, user_id: str, since: str | None, after: str | None, limit: int
    ) -> list[tuple[str, Tombstone]]:
        """(key, tombstone) for tombstones written or changed (restored_at, purged_at) at or after `since`."""

    @abstractmethod
    async def memory_vectors(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored vector of each memory that has one."""

    @abstractmethod
    async def tombstones_for(self, user_id: str, memory_ids: Sequence[str]) -> list[Tombstone]:
        """Every tombstone of the given memories."""

    @abstractmethod
    async def meta(self, key: str) -> str | None:
        """A store_meta value, read inside the transaction."""

    @abstractmethod
    async def get_token(self, token_id: str) -> ApiToken | None: ...

    @abstractmethod
    async def list_tokens(self, user_id: str | None = None, *, include_revoked: bool = False) -> list[ApiToken]:
        """Tokens of one user (or of every user when None), oldest first."""

    @abstractmethod
    async def count_active_tokens(self) -> int: ...


class StoreWriter(StoreReader, ProfileWriter):
    """Writes; only available inside `Store.write()`."""

    @abstractmethod
    async def insert_memory(self, memory: Memory, vector: Sequence[float] | None, text: IndexedText) -> None:
        """Insert a memory with its vector and keyword terms (kept even before the vector index exists)."""

    @abstractmethod
    async def update_memory(self, user_id: str, memory_id: str, **fields: Any) -> None:
        """Set plain columns (no content or status change; see replace_content / set_status)."""

    @abstractmethod
    async def update_scores(self, user_id: str, scores: Sequence[tuple[str, float, float, float]]) -> None:
        """Set (memory_id, info_importance, time_coef, importance) for many memories in one statement batch:
        maintenance rescores every memory, and one round trip per memory is what made it slow at scale."""

    @abstractmethod
    async def replace_content(
        self,
        user_id: str,
        memory_id: str,
        *,
        content: str,
        content_hash: str,
        keywords: list[str],
        vector: Sequence[float],
        text: IndexedText,
        updated_at: datetime,
    ) -> None: ...

    @abstractmethod
    async def set_status(
        self,
        user_id: str,
        memory_id: str,
        status: Status,
        *,
        updated_at: datetime,
        deleted_at: datetime | None = None,
        purge_at: datetime | None = None,
        delete_reason: DeleteReason | None = None,
        valid_until: datetime | None = None,
    ) -> None: ...

    @abstractmethod
    async def touch(self, user_id: str, memory_ids: Sequence[str], now: datetime, *, by: int = 1) -> None:
        """use_count += by, last_active_at = now."""

    @abstractmethod
    async def eviction_candidates(
        self, user_id: str, count: int, now: datetime, exclude: Sequence[str]
    ) -> list[Memory]:
        """The `count` non-core active memories of lowest current importance."""

    @abstractmethod
    async def insert_tombstone(self, tombstone: Tombstone) -> None:
        """Record a deletion; tombstones outlive their memory (purge marks them, never removes them)."""

    @abstractmethod
    async def mark_tombstones_restored(self, user_id: str, memory_id: str, when: datetime) -> None: ...

    @abstractmethod
    async def insert_revision(self, revision: Revision) -> None: ...

    @abstractmethod
    async def insert_pending(self, item: PendingItem) -> None: ...

    @abstractmethod
    async def update_pending(self, user_id: str, pending_id: str, **fields: Any) -> None: ...

    @abstractmethod
    async def record_operation(
        self, user_id: str, operation_id: str, request_hash: str, result: dict[str, Any], now: datetime
    ) -> None: ...

    @abstractmethod
    async def add_event(
        self,
        user_id: str,
        kind: EventKind,
        now: datetime,
        *,
        memory_id: str | None = None,
        operation_id: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> None: ...

    @abstractmethod
    async def ensure_user(self, user_id: str, now: datetime) -> None: ...

    @abstractmethod
    async def purge_memory(self, user_id: str, memory_id: str, when: datetime) -> bool:
        """Delete a memory for good: its row, vector, keyword row, revisions and usage. Its tombstones stay,
        marked purged_at = `when`. False when there was nothing to delete."""

    @abstractmethod
    async def add_uses(self, user_id: str, memory_ids: Sequence[str], now: datetime) -> None:
        """used_count += 1 and last_used_at = now for each memory (creating its usage row)."""

    @abstractmethod
    async def put_usage(self, usage: Usage) -> None:
        """Create or overwrite a usage row."""

    # Import: insert a row unless one with the same id exists; True when inserted.
    @abstractmethod
    async def import_memory(self, memory: Memory, vector: Sequence[float], text: IndexedText) -> bool: ...

    async def import_memories(self, rows: Sequence[tuple[Memory, Sequence[float], IndexedText]]) -> list[bool]:
        """import_memory for a batch (one round trip per statement where the backend allows); True per inserted row."""
        return [await self.import_memory(memory, vector, text) for memory, vector, text in rows]

    @abstractmethod
    async def import_tombstone(self, tombstone: Tombstone) -> bool: ...

    @abstractmethod
    async def import_revision(self, revision: Revision) -> bool: ...

    @abstractmethod
    async def import_pending(self, item: PendingItem) -> bool: ...

    @abstractmethod
    async def import_event(self, event: Event, nth: int = 0) -> bool:
        """Insert an event that is the `nth` (from 0) of its identical copies (same user, kind, memory,
        operation, payload and time) in the file, unless the store already holds more than `nth` of them;
        keeps the event's id when that id is free."""

    @abstractmethod
    async def import_user(self, user: Mapping[str, Any]) -> bool:
        """Insert a users row (user_id, display_name, identity_confirmed, persona, created_at, updated_at)."""

    @abstractmethod
    async def insert_token(self, token: ApiToken) -> None: ...

    @abstractmethod
    async def revoke_token(self, token_id: str, when: datetime) -> bool:
        """Mark an active token revoked; False when it is unknown or already revoked."""

    @abstractmethod
    async def touch_token(self, token_id: str, when: datetime) -> None:
        """Record when the token was last used."""

    # -- sync ---------------------------------------------------------------------------------
    @abstractmethod
    async def upsert_memory(
        self, memory: Memory, vector: Sequence[float] | None, text: IndexedText, *, record_change: bool = True
    ) -> None:
        """Insert the memory, or overwrite every column of the row with its id (same user). Without a
        vector an existing row keeps its own. `record_change=False`: a copy of a change made elsewhere,
        left out of this store's change order."""

    @abstractmethod
    async def upsert_tombstone(self, tombstone: Tombstone, *, record_change: bool = True) -> bool:
        """Insert the tombstone, or fill in the stored one's empty restored_at, purged_at and
        cloud_synced_at from it. True when anything changed."""

    @abstractmethod
    async def mark_tombstones_synced(self, user_id: str, tombstone_ids: Sequence[str], when: datetime) -> None:
        """cloud_synced_at = `when` where it is empty; not a change in the change order."""

    @abstractmethod
    async def remove_memory(self, user_id: str, memory_id: str) -> bool:
        """Delete a memory's row, vector, keyword row, revisions and usage, leaving its tombstones as they
        are (the trash handed over to the cloud library). False when there was nothing to delete."""

    @abstractmethod
    async def put_meta(self, key: str, value: str) -> None:
        """Set a store_meta value inside the transaction."""


T = TypeVar("T")


class Store(ABC):
    """A backend: opens, migrates, hands out transactions."""

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

    @abstractmethod
    def read(self) -> AbstractAsyncContextManager[StoreReader]: ...

    @abstractmethod
    def write(self, durable: bool = True) -> AbstractAsyncContextManager[StoreWriter]:
        """One transaction. durable=False may skip waiting for the disk (bookkeeping such as use counts);
        a later durable commit makes it durable too."""

    def write_short(self, durable: bool = True) -> AbstractAsyncContextManager[StoreWriter]:
        """write() for a short unit of work (a few indexed statements); a backend may run it more cheaply."""
        return self.write(durable)

    async def write_shared(self, work: Callable[[StoreWriter], Awaitable[T]]) -> T:
        """Run `work` in a durable write transaction it may share with other writers waiting at the same time
        (group commit: one commit, one wait for the disk, for all of them). Returns once that commit is done;
        an exception from `work` undoes only its own writes and is raised to its caller alone."""
        async with self.write() as tx:
            return await work(tx)

    @abstractmethod
    async def get_meta(self, key: str) -> str | None: ...

    @abstractmethod
    async def set_meta(self, key: str, value: str) -> None: ...

    @abstractmethod
    async def prepare_vectors(self, embed_tag: str, dimensions: int) -> None:
        """Create the vector index for `dimensions` if missing; record which embedder fills it."""

    @abstractmethod
    async def rebuild_vectors(self, embed_tag: str, dimensions: int) -> None:
        """Drop and recreate the vector index (reindex); memories' vectors must be rewritten after."""

    @abstractmethod
    def iter_memories_for_reindex(self, batch: int) -> AsyncIterator[list[tuple[str, str, str, list[str]]]]:
        """Batches of (user_id, memory_id, content, keywords) over every stored memory."""

    @abstractmethod
    async def write_vectors(
        self, rows: Sequence[tuple[str, str, Sequence[float]]], embed_tag: str, *, only_missing: bool = False
    ) -> None:
        """Store new vectors for (user_id, memory_id, vector), in one transaction; `only_missing` leaves a
        memory that has gained a vector meanwhile as it is."""

    # Set when damage was detected (a failed check or a "malformed" error); recall reports it as `degraded`.
    damage: str | None = None

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
        """Integrity and index agreement, for `pocketmem doctor` and tests."""

    async def optimize(self) -> None:
        """Backend housekeeping after maintenance (planner statistics, folding counters); may do nothing."""
        return None
