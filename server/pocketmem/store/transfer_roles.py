"""The store's roles for rows that travel between stores: sync's change feed and the writes that apply
changes made elsewhere, and import's rows copied in as they are.

Part of StoreReader / StoreWriter (store/roles.py), as the profile roles are (store/profile_base.py).
Rows in, rows out: no policy here.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from pocketmem.base.errors import UnreadableRow
from pocketmem.base.models import Event, Memory, PendingItem, Revision, Tombstone, Usage
from pocketmem.store.types import IndexedText


class SyncFeed(Protocol):
    """A store's changes in commit order, for sync."""

    @abstractmethod
    async def change_marker(self) -> str:
        """A position in this store's change order: `changed_*(since=marker)` returns everything changed
        after this transaction's snapshot (and perhaps a little before)."""

    @abstractmethod
    async def changed_memories(
        self, user_id: str, since: str | None, after: str | None, limit: int
    ) -> list[tuple[str, Memory | UnreadableRow]]:
        """(key, memory) for memories changed at or after `since` (None: from the beginning), by key;
        `after` is the last key of the previous page. Keys sort as text. A row that cannot be read comes as
        the UnreadableRow naming it, in its place."""

    @abstractmethod
    async def changed_tombstones(
        self, user_id: str, since: str | None, after: str | None, limit: int
    ) -> list[tuple[str, Tombstone | UnreadableRow]]:
        """(key, tombstone) for tombstones written or changed (restored_at, purged_at) at or after `since`;
        unreadable rows as in changed_memories."""


class ImportWrites(Protocol):
    """Rows copied in as they are (import, restore from export): nothing recomputed."""

    @abstractmethod
    async def put_usage(self, usage: Usage) -> None:
        """Create or overwrite a usage row."""

    # Import: insert a row unless one with the same id exists; True when inserted.
    @abstractmethod
    async def import_memory(self, memory: Memory, vector: Sequence[float] | None, text: IndexedText) -> bool: ...

    async def import_memories(
        self, rows: Sequence[tuple[Memory, Sequence[float] | None, IndexedText]]
    ) -> list[bool]:
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


class SyncWrites(Protocol):
    """Applying changes that came from another store."""

    @abstractmethod
    async def upsert_memory(
        self, memory: Memory, vector: Sequence[float] | None, text: IndexedText, *, record_change: bool = True
    ) -> None:
        """Insert the memory, or overwrite every column of the row with its id (same user; Conflict when the
        id is another user's, and nothing is written). Without a vector an existing row keeps its own.
        `record_change=False`: a copy of a change made elsewhere,
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
