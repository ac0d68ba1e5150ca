"""The store interface every backend implements (SQLite now, PostgreSQL later).

Rows in, rows out: no ranking, thresholds or text policy live here. Every method takes the
user id, so no query can reach another user's rows. Writes happen inside `Store.write()`,
one transaction per unit of work; reads inside `Store.read()`, one consistent snapshot.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..models import ApiToken, Category, DeleteReason, Event, EventKind, Memory, PendingItem, PendingStatus, Revision, Status, Tombstone

SEARCHABLE = (Status.active, Status.superseded)


@dataclass(frozen=True)
class IndexedText:
    """What the keyword index stores for a memory: pre-split terms (see text.index_terms)."""

    terms: str
    keyword_terms: str


@dataclass(frozen=True)
class MemoryFilter:
    statuses: Sequence[Status] = (Status.active,)
    category: Category | None = None
    text: str | None = None  # plain substring match on content
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


class StoreReader(ABC):
    """Read queries, available inside both read and write transactions."""

    @abstractmethod
    async def get_memory(self, user_id: str, memory_id: str) -> Memory | None: ...

    @abstractmethod
    async def get_memories(self, user_id: str, memory_ids: Sequence[str]) -> list[Memory]: ...

    @abstractmethod
    async def find_by_hash(self, user_id: str, content_hash: str, statuses: Sequence[Status]) -> Memory | None: ...

    @abstractmethod
    async def successor_of(self, user_id: str, memory_id: str) -> Memory | None:
        """The non-trashed memory that supersedes `memory_id`, if any."""

    @abstractmethod
    async def count_active(self, user_id: str) -> int: ...

    @abstractmethod
    async def list_memories(self, user_id: str, flt: MemoryFilter) -> tuple[list[Memory], int]: ...

    @abstractmethod
    async def core_memories(self, user_id: str, limit: int) -> list[Memory]: ...

    @abstractmethod
    async def top_by_importance(self, user_id: str, limit: int, statuses: Sequence[Status]) -> list[Memory]: ...

    @abstractmethod
    async def vector_neighbours(
        self, user_id: str, vector: Sequence[float], k: int, statuses: Sequence[Status]
    ) -> list[tuple[str, float]]:
        """(memory id, cosine similarity) of the k nearest searchable memories."""

    @abstractmethod
    async def keyword_hits(
        self, user_id: str, match: str, k: int, statuses: Sequence[Status]
    ) -> list[tuple[str, float]]:
        """(memory id, BM25 score, higher is better) for the k best keyword matches."""

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
    async def indexed_terms(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, IndexedText]: ...

    @abstractmethod
    async def term_document_counts(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """How many indexed memories contain each term, and how many are indexed in all."""

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
    async def list_tombstones(self, user_id: str, limit: int = 100) -> list[Tombstone]: ...

    @abstractmethod
    async def list_events(
        self, user_id: str, limit: int = 100, kinds: Sequence[EventKind] | None = None
    ) -> list[Event]: ...

    @abstractmethod
    async def stats(self, user_id: str) -> StoreStats: ...

    @abstractmethod
    async def get_user(self, user_id: str) -> dict[str, Any] | None: ...

    # Tokens are looked up by their id before the user is known (the id is the public part of a
    # presented token), so these are the only reads not scoped by a user id.
    @abstractmethod
    async def get_token(self, token_id: str) -> ApiToken | None: ...

    @abstractmethod
    async def list_tokens(self, user_id: str | None = None, *, include_revoked: bool = False) -> list[ApiToken]:
        """Tokens of one user (or of every user when None), oldest first."""

    @abstractmethod
    async def count_active_tokens(self) -> int: ...


class StoreWriter(StoreReader):
    """Writes; only available inside `Store.write()`."""

    @abstractmethod
    async def insert_memory(self, memory: Memory, vector: Sequence[float], text: IndexedText) -> None: ...

    @abstractmethod
    async def update_memory(self, user_id: str, memory_id: str, **fields: Any) -> None:
        """Set plain columns (no content or status change; see replace_content / set_status)."""

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
    async def touch(self, user_id: str, memory_ids: Sequence[str], now: datetime) -> None:
        """use_count += 1, last_active_at = now."""

    @abstractmethod
    async def eviction_candidates(self, user_id: str, count: int, now: datetime, exclude: Sequence[str]) -> list[Memory]:
        """The `count` non-core active memories of lowest current importance."""

    @abstractmethod
    async def insert_tombstone(self, tombstone: Tombstone) -> None: ...

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
    async def insert_token(self, token: ApiToken) -> None: ...

    @abstractmethod
    async def revoke_token(self, token_id: str, when: datetime) -> bool:
        """Mark an active token revoked; False when it is unknown or already revoked."""

    @abstractmethod
    async def touch_token(self, token_id: str, when: datetime) -> None:
        """Record when the token was last used."""


class Store(ABC):
    """A backend: opens, migrates, hands out transactions."""

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    def read(self) -> AbstractAsyncContextManager[StoreReader]: ...

    @abstractmethod
    def write(self) -> AbstractAsyncContextManager[StoreWriter]: ...

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
    async def write_vectors(self, rows: Sequence[tuple[str, str, Sequence[float]]], embed_tag: str) -> None:
        """Store new vectors for (user_id, memory_id, vector), in one transaction."""

    @abstractmethod
    async def health(self) -> dict[str, Any]:
        """Integrity and index agreement, for `pocketmem doctor` and tests."""
