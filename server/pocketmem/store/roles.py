"""The store's interface cut into roles: each service names the few it uses, not the whole store.

Inside a transaction (`Store.read()` hands out every read role, `Store.write()` every read and write role):

    MemoryReads / MemoryWrites     memory rows, revisions, use counts, the user's counts
    SearchReads, TermStats         recall's and the duplicate check's candidates; term frequencies
    PendingReads / PendingWrites   candidates waiting for the user's confirmation
    EventReads / EventWrites       the event log and operation-id answers
    TrashReads / TrashWrites       tombstones, restoring, purging
    UpkeepReads                    what maintenance and the embed queue scan for
    BrowseReads                    the management page's lists and charts
    SyncFeed / SyncWrites          changes in commit order; applying changes made elsewhere (store/transfer_roles.py)
    TokenReads / TokenWrites       API tokens
    ImportWrites                   rows copied in as they are (import; store/transfer_roles.py)
    MetaReads / MetaWrites         store_meta
    ProfileReader / ProfileWriter  the profile layer (store/profile_base.py)

On the store itself: Transactions (read, write, write_short, write_shared), MetaAdmin, VectorAdmin (the
vector index: ensure_vectors, reindex), Checks (integrity, housekeeping).

`StoreReader`, `StoreWriter` and `Store` (store/base.py) are these roles composed; a backend implements
the composed classes. The roles are `typing.Protocol`s, so a test double or a new backend part need only
provide the methods of the roles it stands in for. Roles that a function needs together are named
here once (`WriteTx`, `ReadTx`...) since Python has no intersection types.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from pocketmem.base.errors import UnreadableRow
from pocketmem.base.models import (
    OPEN_PENDING,
    ApiToken,
    DeleteReason,
    Event,
    EventKind,
    Memory,
    PendingItem,
    PendingStatus,
    Revision,
    Status,
    Tombstone,
    Usage,
)
from pocketmem.store.profile_base import ProfileReader, ProfileWriter
from pocketmem.store.transfer_roles import ImportWrites, SyncFeed, SyncWrites
from pocketmem.store.types import BrowseFilter, Holder, IndexedText, MemoryFilter, ScoreRow, StoreStats, Unsent


class MemoryReads(Protocol):
    """A memory's rows and the user's counts."""

    # The rows this transaction's reads left out because they cannot be decoded (each also logged once): a read of
    # many rows goes on without them; one by id raises UnreadableRow.
    left_out: list[UnreadableRow]

    @abstractmethod
    async def get_memory(self, user_id: str, memory_id: str) -> Memory | None: ...

    @abstractmethod
    async def ids_starting(self, user_id: str, prefix: str, table: str = "memories") -> list[str]: ...

    @abstractmethod
    async def get_memories(self, user_id: str, memory_ids: Sequence[str]) -> list[Memory]:
        """The user's memories with these ids, in any status, in the order of `memory_ids` (unknown ids left out)."""

    @abstractmethod
    async def memory_owners(self, memory_ids: Sequence[str]) -> dict[str, str]:
        """id -> user_id for the ids the store holds, whoever's they are (an id is unique across users)."""

    @abstractmethod
    async def find_by_hash(self, user_id: str, content_hash: str, statuses: Sequence[Status]) -> Memory | None:
        """One memory with this content hash in one of `statuses`, if any."""

    @abstractmethod
    async def successor_of(self, user_id: str, memory_id: str) -> Memory | None:
        """The non-trashed memory that supersedes `memory_id`, if any."""

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
        """Active memories with persistence 1, oldest first (ties in insertion order); a completed todo made
        core is done, not who the user is: it is left out (the user card, memory_context, User.md)."""

    @abstractmethod
    async def count_core(self, user_id: str) -> int:
        """How many core_memories there are, all of them (the user card's `+N`)."""

    @abstractmethod
    async def memories_between(
        self, user_id: str, start: datetime, end: datetime, statuses: Sequence[Status], limit: int
    ) -> list[Memory]:
        """Memories whose valid_from lies in [start, end), newest first."""

    @abstractmethod
    async def open_todos(
        self, user_id: str, now: datetime, limit: int, due_by: datetime | None = None, latest_first: bool = False
    ) -> list[Memory]:
        """Active, not completed todos not expired at `now` (base/models.py `expired`: one past its expires_at is
        shown nowhere, before maintenance moves it to the trash), soonest first by coalesce(remind_at, due_at)
        (undated last).

        With `due_by`: only those whose remind_at (or, without one, due_at) is at or before it; with
        `latest_first` too, those that came due last first.
        """

    @abstractmethod
    async def count_open_todos(self, user_id: str, now: datetime) -> int:
        """How many open_todos there are at `now`, all of them (the user card's `+N`)."""

    @abstractmethod
    async def list_revisions(self, user_id: str, memory_id: str) -> list[Revision]: ...

    @abstractmethod
    async def all_revisions(self, user_id: str) -> list[Revision]: ...

    @abstractmethod
    async def usage(self, user_id: str, memory_ids: Sequence[str] | None = None) -> dict[str, Usage]:
        """Usage rows by memory id (all of the user's when `memory_ids` is None)."""

    @abstractmethod
    async def stats(self, user_id: str) -> StoreStats: ...

    @abstractmethod
    async def get_user(self, user_id: str) -> dict[str, Any] | None: ...

    @abstractmethod
    async def user_ids(self) -> list[str]:
        """Every user with a row in the store."""


class SearchReads(Protocol):
    """Candidates for recall and the duplicate check: vectors and keyword hits."""

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
        counts, recall scores keywords itself from user_term_counts and indexed_terms."""

    @abstractmethod
    async def newest_holders(self, user_id: str, terms: Sequence[str], k: int) -> list[Holder]:
        """The k active memories written last (SQLite's rowid, PostgreSQL's `seq`) that hold any of the index
        terms, newest first, as `Holder`s: where a newer version of a fact is looked for
        (service/recall/versions.py). No match is ranked (SQLite stops at the k-th; PostgreSQL orders the
        matches' `seq` alone)."""

    @abstractmethod
    async def core_similarities(
        self, user_id: str, vectors: Sequence[Sequence[float]]
    ) -> list[tuple[str, tuple[float, ...]]]:
        """(id, cosine to each of `vectors`) for every active core memory (persistence >=
        policy.CORE_PERSISTENCE, bound as a parameter) that has a vector."""

    @abstractmethod
    async def important_similarities(
        self, user_id: str, vectors: Sequence[Sequence[float]], limit: int, statuses: Sequence[Status]
    ) -> list[tuple[str, tuple[float, ...]]]:
        """(id, cosine to each of `vectors`) for the `limit` most important memories of `statuses` that have a
        vector."""

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
    async def memory_vectors(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored vector of each memory that has one."""


class TermStats(Protocol):
    """How often terms occur, for keyword weighting."""

    @abstractmethod
    async def user_term_counts(self, user_id: str, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """How many of this user's stored memories (in any status) contain each term, and how many memories
        the user has stored. Terms the user never wrote are left out. Other users' writes never change it."""


class PendingReads(Protocol):
    """Candidates waiting for the user's confirmation."""

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
    async def find_pending_by_hash(
        self,
        user_id: str,
        content_hash: str,
        statuses: Sequence[PendingStatus] = OPEN_PENDING,
    ) -> PendingItem | None:
        """One item with this content hash in one of `statuses` (by default the open ones: waiting or snoozed)."""

    @abstractmethod
    async def all_pending(self, user_id: str) -> list[PendingItem]: ...


class EventReads(Protocol):
    """The event log and the answers recorded for operation ids."""

    @abstractmethod
    async def operation_result(self, user_id: str, operation_id: str) -> tuple[str, dict[str, Any]] | None:
        """(request hash, result) recorded for an operation id."""

    @abstractmethod
    async def list_events(
        self, user_id: str, limit: int = 100, kinds: Sequence[EventKind] | None = None
    ) -> list[Event]:
        """The most recent events (of these kinds), newest first."""

    @abstractmethod
    async def events_after(self, user_id: str, after_id: int, limit: int) -> list[Event]:
        """Events with an id greater than `after_id`, oldest first."""

    @abstractmethod
    async def latest_event_id(self, user_id: str) -> int:
        """The id of the user's newest event (0 when none): a page polls it to see that something changed."""


class TrashReads(Protocol):
    """Tombstones of deleted memories."""

    @abstractmethod
    async def list_tombstones(self, user_id: str, limit: int = 100) -> list[Tombstone]:
        """The most recent tombstones, newest deleted_at first."""

    @abstractmethod
    async def all_tombstones(self, user_id: str) -> list[Tombstone]: ...

    @abstractmethod
    async def tombstones_for(self, user_id: str, memory_ids: Sequence[str]) -> list[Tombstone]:
        """Every tombstone of the given memories."""

    @abstractmethod
    async def tombstones_by_content(self, user_id: str, content_hash: str) -> list[Tombstone]:
        """Every tombstone that keeps this content hash (a person's forget), oldest first."""


class UpkeepReads(Protocol):
    """What maintenance and the embed queue scan for."""

    async def missing_vectors(self, limit: int, after: int = 0) -> list[tuple[int, str, str, str, list[str]]]:
        """Memories of every user stored without a vector (the embedder was down), in insertion order after
        position `after`: (position, user_id, id, content, keywords). The embed queue's work list."""
        raise NotImplementedError

    @abstractmethod
    async def holds_vectors(self) -> bool:
        """Whether any memory of any user keeps a vector: in a store that records no embedder, vectors of a model
        no one can name (store_meta lost, or an early release's store)."""

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
    async def purgeable_memories(
        self, user_id: str, now: datetime, limit: int, unsent: Unsent | None = None
    ) -> list[Memory]:
        """Trashed memories whose purge_at is at or before `now`, but for those `unsent` names."""

    @abstractmethod
    async def unreadable_rows(self) -> list[dict[str, Any]]:
        """For `pocketmem doctor`: every row of any user, in memories and in each table export reads, that the reads
        leave out (or export refuses) because it cannot be decoded (table, user_id, id, why, key; see
        store/sql/row_check.py)."""


class BrowseReads(Protocol):
    """The management page's lists and charts."""

    @abstractmethod
    async def browse_memories(self, user_id: str, flt: BrowseFilter) -> tuple[list[Memory], int]:
        """A page of memories by the filter, and the total matching; ties in reverse order of insertion."""

    @abstractmethod
    async def memory_events(self, user_id: str, memory_id: str, limit: int) -> list[Event]:
        """The most recent events about one memory, newest first."""

    @abstractmethod
    async def created_per_quarter(
        self, user_id: str, since: datetime, statuses: Sequence[Status]
    ) -> list[tuple[str, str, int]]:
        """(UTC quarter hour YYYY-MM-DDTHH:MM, category, memories created in it) for created_at at or after `since`."""

    @abstractmethod
    async def events_per_quarter(
        self, user_id: str, kinds: Sequence[EventKind], since: datetime
    ) -> list[tuple[str, str, int]]:
        """(UTC quarter hour YYYY-MM-DDTHH:MM, event kind, count) for events at or after `since`."""

    @abstractmethod
    async def importance_histogram(self, user_id: str, buckets: int) -> list[tuple[int, int]]:
        """(bucket, count) of active non-core memories by stored importance; bucket = floor(importance * buckets),
        the top one closed (importance 1 falls in buckets - 1)."""

    @abstractmethod
    async def lowest_importance(self, user_id: str, count: int) -> list[Memory]:
        """The active non-core memories with the lowest stored importance (refreshed by maintenance), lowest first;
        read through the importance index, unlike StoreWriter.eviction_candidates which recomputes every row."""


class TokenReads(Protocol):
    """API tokens. Looked up by their id before the user is known (the id is the public part of a presented
    token), so these are the only reads not scoped by a user id."""

    @abstractmethod
    async def get_token(self, token_id: str) -> ApiToken | None: ...

    @abstractmethod
    async def list_tokens(self, user_id: str | None = None, *, include_revoked: bool = False) -> list[ApiToken]:
        """Tokens of one user (or of every user when None), oldest first."""

    @abstractmethod
    async def count_active_tokens(self) -> int: ...


class MetaReads(Protocol):
    """store_meta inside a transaction."""

    @abstractmethod
    async def meta(self, key: str) -> str | None:
        """A store_meta value, read inside the transaction."""


class MemoryWrites(Protocol):
    """Writing memories, their revisions and their use counts."""

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
        vector: Sequence[float] | None,
        text: IndexedText,
        updated_at: datetime,
    ) -> None:
        """New content, its keyword terms and its vector (None: it has none until the embed queue computes it)."""

    @abstractmethod
    async def write_vectors(
        self, rows: Sequence[tuple[str, str, Sequence[float]]], embed_tag: str, *, only_missing: bool = False
    ) -> None:
        """Store `embed_tag`'s vectors for (user_id, memory_id, vector); `only_missing` leaves a memory that has
        gained a vector meanwhile as it is. The caller checks first, in this transaction, that the store records
        `embed_tag` (service/writing/vectors.py, `agree_in`)."""

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
        """use_count += by, last_active_at = the later of its own and `now` (a deferred count written after a
        later use must not move it back)."""

    @abstractmethod
    async def eviction_candidates(
        self, user_id: str, count: int, now: datetime, exclude: Sequence[str]
    ) -> list[Memory]:
        """The `count` non-core active memories of lowest current importance."""

    @abstractmethod
    async def insert_revision(self, revision: Revision) -> None: ...

    @abstractmethod
    async def ensure_user(self, user_id: str, now: datetime) -> None: ...

    @abstractmethod
    async def add_uses(self, user_id: str, memory_ids: Sequence[str], now: datetime) -> None:
        """used_count += 1 and last_used_at = now for each memory (creating its usage row)."""


class PendingWrites(Protocol):
    """Writing pending candidates."""

    @abstractmethod
    async def insert_pending(self, item: PendingItem) -> None: ...

    @abstractmethod
    async def update_pending(self, user_id: str, pending_id: str, **fields: Any) -> None: ...


class EventWrites(Protocol):
    """Writing events and operation answers."""

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


class TrashWrites(Protocol):
    """Tombstones, restoring, purging."""

    @abstractmethod
    async def insert_tombstone(self, tombstone: Tombstone) -> None:
        """Record a deletion; tombstones outlive their memory (purge marks them, never removes them)."""

    @abstractmethod
    async def mark_tombstones_restored(self, user_id: str, memory_id: str, when: datetime) -> None: ...

    @abstractmethod
    async def purge_memory(self, user_id: str, memory_id: str, when: datetime) -> bool:
        """Delete a memory for good: its row, vector, keyword row, revisions and usage. Its tombstones stay,
        marked purged_at = `when`. False when there was nothing to delete."""


class RowRepairs(Protocol):
    """`doctor --repair` on a row the reads cannot decode (unreadable_rows): one of the tables store/sql/row_check.py
    checks, found by the `key` it reported."""

    @abstractmethod
    async def rewrite_row(self, table: str, key: dict[str, Any], values: dict[str, Any]) -> None:
        """Set columns (as stored) of that row."""

    @abstractmethod
    async def remove_row(self, table: str, key: dict[str, Any]) -> None:
        """Delete that row (its stored values kept elsewhere first)."""


class TokenWrites(Protocol):
    """Writing API tokens."""

    @abstractmethod
    async def insert_token(self, token: ApiToken) -> None: ...

    @abstractmethod
    async def revoke_token(self, token_id: str, when: datetime) -> bool:
        """Mark an active token revoked; False when it is unknown or already revoked."""

    @abstractmethod
    async def touch_token(self, token_id: str, when: datetime) -> None:
        """Record when the token was last used."""


class MetaWrites(Protocol):
    """store_meta inside a transaction."""

    @abstractmethod
    async def put_meta(self, key: str, value: str) -> None:
        """Set a store_meta value inside the transaction."""


# -- roles inside a write transaction, and roles needed together -------------------------------


class UserLocks(Protocol):
    """Per-user write locks inside a write transaction (see Transactions.write)."""

    async def lock_user(self, user_id: str) -> None:
        """Hold `user_id`'s write lock until the transaction ends (again: no cost). A backend whose writes are
        serialised anyway (SQLite) keeps this default."""
        return None

    async def lock_users(self, user_ids: Iterable[str]) -> None:
        """Lock several users, always in the same (sorted) order, so two such transactions cannot deadlock."""
        for user_id in sorted(set(user_ids)):
            await self.lock_user(user_id)


class MemoryTx(MemoryReads, MemoryWrites, EventWrites, MetaReads, Protocol):
    """Changing a memory and logging the change (patch, reinforcement); store_meta says whose vectors it keeps."""


class SearchTx(MemoryReads, SearchReads, Protocol):
    """Finding memories by words or vectors, then reading them (the duplicate check, recall's fallbacks)."""


class ForgottenTx(SearchTx, TrashReads, Protocol):
    """Whether new content is what the user forgot: memories in the trash and the tombstones of purged ones."""


class TrashTx(MemoryTx, TrashWrites, Protocol):
    """Moving memories to the trash with their tombstones (forget, eviction over the cap)."""


class WriteTx(TrashTx, SearchReads, TrashReads, PendingReads, PendingWrites, EventReads, Protocol):
    """The write path: routing an add, duplicates, superseding, pending, the cap, operation answers."""


class StoreReader(
    MemoryReads, SearchReads, TermStats, PendingReads, EventReads, TrashReads, UpkeepReads, BrowseReads, SyncFeed,
    TokenReads, MetaReads, ProfileReader,
):
    """Read queries, available inside both read and write transactions: every read role."""


class StoreWriter(
    StoreReader, MemoryWrites, PendingWrites, EventWrites, TrashWrites, ImportWrites, TokenWrites, SyncWrites,
    MetaWrites, RowRepairs, UserLocks, ProfileWriter,
):
    """Writes; only available inside `Store.write()`: every write role."""
