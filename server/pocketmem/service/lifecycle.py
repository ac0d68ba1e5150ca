"""A memory's life in one place for the callers (MCP tools, CLI, web, app): add, patch, forget, restore,
confirm, list.

Each job has its own module, and this class only hands calls on:

    add_request.py  what add_memory accepts, cleaning and secret screening
    rows.py         a memory row's derived columns (vector text, keyword terms, ids, tombstone hash)
    vectors.py      embedding before a write, or deferring it when the embedder is down
    duplicates.py   the near-duplicate rules and reinforcing the memory that already says it
    writing.py      the write path: routing by confidence, storing, superseding, pending, discarding
    trash.py        forget, eviction over the cap, restore, the trash listing
    patching.py     patch_core_memory and its revisions
    pending.py      confirm, reject or snooze a pending memory
    listing.py      list_memories

Every change is one store transaction that also writes its events, tombstones and revisions,
so a crash leaves either all of it or none of it. The in-transaction steps (`Writing.store_in`,
`Patching.patch_in`, `Trash.forget_in`...) are public; batch.py runs them per item in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Literal

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.models import Category, DeleteReason, EventKind, Memory
from pocketmem.base.results import (
    AddResult,
    ConfirmResult,
    EvictedItem,
    ForgetResult,
    MemoryList,
    PatchResult,
    RestoreResult,
    TrashList,
)
from pocketmem.providers.embeddings import Embedder
from pocketmem.service.add_request import (
    DATE_FIELDS,
    MAX_KEYWORD_CHARS,
    MAX_KEYWORDS,
    MAX_OPERATION_ID_CHARS,
    MAX_SOURCE_CHARS,
    AddRequest,
    screen_secrets,
)
from pocketmem.service.calibration import Calibration
from pocketmem.service.listing import Listing
from pocketmem.service.patching import Patching
from pocketmem.service.pending import MAX_SNOOZE_HOURS, Pending
from pocketmem.service.reinforcement import record_used
from pocketmem.service.rows import embedding_text, indexed_text, new_id, payload_hash
from pocketmem.service.trash import Trash
from pocketmem.service.vectors import Vectors
from pocketmem.service.writing import Writing
from pocketmem.store import Store
from pocketmem.store.roles import TrashTx

# Long-standing import paths of the write path's names (tests, benchmarks, other services).
__all__ = [
    "DATE_FIELDS",
    "MAX_KEYWORDS",
    "MAX_KEYWORD_CHARS",
    "MAX_OPERATION_ID_CHARS",
    "MAX_SNOOZE_HOURS",
    "MAX_SOURCE_CHARS",
    "AddRequest",
    "Lifecycle",
    "embedding_text",
    "indexed_text",
    "new_id",
    "payload_hash",
]


class Lifecycle:
    def __init__(
        self, settings: Settings, store: Store, embedder: Embedder, clock: Clock, calibration: Calibration
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.vectors = Vectors(store, embedder, calibration)
        self.trash = Trash(settings, store, clock)
        self.writing = Writing(settings, store, clock, self.vectors, self.trash)
        self.patching = Patching(settings, store, clock, self.vectors)
        self.pending = Pending(store, clock, self.writing)
        self.listing = Listing(settings, store, clock)

    def when_vector_deferred(self, callback: Callable[[], None]) -> None:
        """Call `callback` whenever a memory was stored without a vector (the embed queue's wake-up)."""
        self.vectors.when_deferred(callback)

    # -- writing --------------------------------------------------------------------------------
    async def add(self, user_id: str, request: AddRequest, *, temporary: bool = False) -> AddResult:
        return await self.writing.add(user_id, request, temporary=temporary)

    async def add_many(self, user_id: str, requests: Sequence[AddRequest]) -> list[AddResult]:
        return await self.writing.add_many(user_id, requests)

    def screen_secrets(self, req: AddRequest) -> tuple[AddRequest, list[str], bool]:
        """(request with secrets redacted, kinds found, refused?) — every write path passes through here."""
        return screen_secrets(req, self.settings)

    async def reinforce(self, user_id: str, memory_ids: Sequence[str]) -> list[str]:
        """Memories that shaped a reply (BOOST, or recall's `used`): one rule for both, review.record_used.

        Returns the ids reinforced: active memories of this user; others are ignored.
        """
        async with self.store.write(user_id=user_id) as tx:
            return await record_used(tx, user_id, memory_ids, self.clock.now())

    # -- patch ----------------------------------------------------------------------------------
    async def patch_core(
        self, user_id: str, memory_id: str, patch: str, mode: Literal["append", "replace"], reason: str | None
    ) -> PatchResult:
        return await self.patching.patch_core(user_id, memory_id, patch, mode, reason)

    def screen_patch(self, patch: str, field: str) -> tuple[str, list[str]]:
        return self.patching.screen_patch(patch, field)

    # -- trash ----------------------------------------------------------------------------------
    async def forget(self, user_id: str, memory_id: str, reason: str | None) -> ForgetResult:
        return await self.trash.forget(user_id, memory_id, reason)

    async def restore(self, user_id: str, memory_id: str) -> RestoreResult:
        return await self.trash.restore(user_id, memory_id)

    async def list_trash(self, user_id: str, limit: int, offset: int) -> TrashList:
        return await self.trash.list_trash(user_id, limit, offset)

    async def enforce_cap(self, tx: TrashTx, user_id: str, now: datetime, keep: list[str]) -> list[EvictedItem]:
        return await self.trash.enforce_cap(tx, user_id, now, keep)

    async def trash_memory(
        self, tx: TrashTx, user_id: str, memory: Memory, reason: DeleteReason, kind: EventKind, now: datetime,
        note: str | None = None,
    ) -> datetime:
        return await self.trash.trash_memory(tx, user_id, memory, reason, kind, now, note)

    # -- pending and listing --------------------------------------------------------------------
    async def confirm_pending(
        self, user_id: str, pending_id: str, action: Literal["confirm", "reject", "snooze"], snooze_hours: float | None
    ) -> ConfirmResult:
        return await self.pending.confirm_pending(user_id, pending_id, action, snooze_hours)

    async def list_memories(
        self,
        user_id: str,
        *,
        category: Category | None,
        status: Literal["active", "superseded", "pending", "trashed"],
        text: str | None,
        limit: int,
        offset: int,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> MemoryList:
        return await self.listing.list_memories(
            user_id, category=category, status=status, text=text, limit=limit, offset=offset, since=since,
            until=until,
        )
