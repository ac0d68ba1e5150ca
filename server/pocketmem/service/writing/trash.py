"""The trash: forgetting on the user's behalf, eviction over the cap, restoring, listing.

A memory in the trash keeps its row and gains a tombstone; it is purged `trash_days` later
(maintenance.py) and can be restored until then. The tombstone of a person's forget keeps the memory's content
hash (never its text), so what the user forgot stays forgotten after the purge.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import Conflict, NotFound
from pocketmem.base.models import DeleteReason, EventKind, Memory, Status, Tombstone
from pocketmem.base.results import EvictedItem, ForgetResult, MemoryView, RestoreResult, TrashItem, TrashList
from pocketmem.core import privacy
from pocketmem.core.scoring import importance_now, lifetime_end
from pocketmem.core.shown_time import absolute
from pocketmem.service.shared.rows import new_id, payload_hash
from pocketmem.service.writing import chains
from pocketmem.service.writing.add_request import MAX_SOURCE_CHARS
from pocketmem.store.base import Transactions
from pocketmem.store.roles import TrashReads, TrashTx
from pocketmem.store.types import MemoryFilter


class Trash:
    def __init__(self, settings: Settings, store: Transactions, clock: Clock) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock

    async def trash_memory(
        self, tx: TrashTx, user_id: str, memory: Memory, reason: DeleteReason, kind: EventKind, now: datetime,
        note: str | None = None,
    ) -> datetime:
        """Inside a transaction: move `memory` to the trash with a tombstone and an event; returns its purge time."""
        purge_at = now + timedelta(days=self.settings.trash_days)
        # Eviction is the notebook running out of room, not a change to the memory: it keeps its updated_at,
        # so sync (sync_rules.py) never lets it outrank a real edit or delete made elsewhere.
        updated_at = memory.updated_at if reason == DeleteReason.evicted else now
        await tx.set_status(
            user_id, memory.id, Status.trashed, updated_at=updated_at, deleted_at=now, purge_at=purge_at,
            delete_reason=reason, valid_until=memory.valid_until,
        )
        await tx.insert_tombstone(
            Tombstone(
                tombstone_id=new_id(),
                memory_id=memory.id,
                user_id=user_id,
                deleted_at=now,
                purge_at=purge_at,
                reason=reason,
                payload_hash=payload_hash(memory),
                # A person's forget outlives the purge (duplicates.Duplicates.forgotten): its content hash, no text.
                content_hash=memory.content_hash if reason == DeleteReason.user_delete else None,
            )
        )
        payload: dict[str, Any] = {"reason": reason.value, "purge_at": purge_at.isoformat()}
        if note:
            payload["note"] = note
        await tx.add_event(user_id, kind, now, memory_id=memory.id, payload=payload)
        return purge_at

    async def enforce_cap(self, tx: TrashTx, user_id: str, now: datetime, keep: list[str]) -> list[EvictedItem]:
        """Inside a transaction: over max_active, the lowest-importance non-core memories (never those in
        `keep`) go to the trash as evicted."""
        over = await tx.count_active(user_id) - self.settings.max_active
        if over <= 0:
            return []
        evicted: list[EvictedItem] = []
        for victim in await tx.eviction_candidates(user_id, over, now, exclude=keep):
            purge_at = await self.trash_memory(tx, user_id, victim, DeleteReason.evicted, EventKind.evicted, now)
            evicted.append(
                EvictedItem(
                    id=victim.id,
                    content=victim.content,
                    importance=round(importance_now(victim, now), 4),
                    purge_at=purge_at,
                )
            )
        return evicted

    async def forget(self, user_id: str, memory_id: str, reason: str | None) -> ForgetResult:
        if reason is not None:
            reason = privacy.kept_text(reason, "reason", max_chars=MAX_SOURCE_CHARS)
        now = self.clock.now()
        async with self.store.write(user_id=user_id) as tx:
            return await self.forget_in(tx, user_id, memory_id, reason, now)

    async def forget_in(
        self, tx: TrashTx, user_id: str, memory_id: str, reason: str | None, now: datetime
    ) -> ForgetResult:
        """Inside a transaction: move a memory to the trash on the user's behalf."""
        memory = await tx.get_memory(user_id, memory_id)
        if memory is None:
            raise NotFound(f"memory_id: no memory with id {memory_id!r}; find ids with list_memories")
        if memory.status == Status.trashed:
            purge = absolute(memory.purge_at, self.settings.zone) if memory.purge_at else "-"
            raise Conflict(f"memory {memory_id} is already in the trash (purged after {purge}); restore brings it back")
        await self.trash_memory(tx, user_id, memory, DeleteReason.user_delete, EventKind.deleted, now, note=reason)
        # The current version of a chain forgotten: the version it replaced is what is true again.
        earlier = await chains.reopen(tx, user_id, memory, now) if memory.status == Status.active else None
        trashed = await tx.get_memory(user_id, memory_id)
        assert trashed is not None and trashed.purge_at is not None
        purge = absolute(trashed.purge_at, self.settings.zone)  # the time a person sees: in POCKETMEM_TZ
        message = f"Moved to the trash; restore(memory_id) brings it back until {purge}."
        if earlier is not None:
            message += (
                f" The memory it replaced, {earlier.id} ({earlier.content}), is current again; restoring "
                f"{memory_id} makes it history again."
            )
        return ForgetResult(
            item=TrashItem.of(trashed), current_again=earlier.id if earlier else None, message=message
        )

    async def restore(self, user_id: str, memory_id: str) -> RestoreResult:
        now = self.clock.now()
        async with self.store.write(user_id=user_id) as tx:
            memory = await tx.get_memory(user_id, memory_id)
            if memory is None:
                raise NotFound(await self._not_here(tx, user_id, memory_id))
            if memory.status != Status.trashed:
                raise Conflict(f"memory {memory_id} is {memory.status.value}, not in the trash; nothing to restore")
            successor = await tx.successor_of(user_id, memory_id)
            status = Status.superseded if successor is not None else Status.active
            same = await tx.find_by_hash(user_id, memory.content_hash, (Status.active,)) if successor is None else None
            if same is not None:
                raise Conflict(f"memory_id: memory {same.id} already says this and is active; nothing was restored")
            # Back as history, closed as it was; or current, open (what replaced it is in the trash, or gone).
            valid_until = memory.valid_until if status == Status.superseded else None
            await tx.set_status(user_id, memory_id, status, updated_at=now, valid_until=valid_until)
            await tx.mark_tombstones_restored(user_id, memory_id, now)
            if memory.delete_reason == DeleteReason.expired:
                # Brought back on purpose: not to expire again at the next maintenance run, but as a memory of its
                # category restored now (an episode lasts POCKETMEM_EPISODE_DAYS from now; any other, given an
                # expires_at of its own that passed, no longer expires: nobody said until when it matters now).
                expires_at = lifetime_end(memory.category, now, self.settings.episode_days)
                await tx.update_memory(user_id, memory_id, expires_at=expires_at)
            await tx.add_event(user_id, EventKind.restored, now, memory_id=memory_id, payload={"status": status.value})
            closed = await chains.close_again(tx, user_id, memory, now) if status == Status.active else None
            evicted = await self.enforce_cap(tx, user_id, now, keep=[memory_id]) if status == Status.active else []
            restored = await tx.get_memory(user_id, memory_id)
        assert restored is not None
        return RestoreResult(
            memory=MemoryView.of(restored),
            superseded=closed.id if closed else None,
            evicted=evicted,
            message=_restored_message(memory, status, closed) + self._lasts(memory, restored),
        )

    def _lasts(self, memory: Memory, restored: Memory) -> str:
        """For a memory restored from expiry: until when it lasts now, or ""."""
        if memory.delete_reason != DeleteReason.expired:
            return ""
        if restored.expires_at is None:
            return " It had expired; restored on purpose, it no longer expires."
        return (
            f" It had expired; as a {restored.category.value} restored now it expires on "
            f"{absolute(restored.expires_at, self.settings.zone)} (POCKETMEM_EPISODE_DAYS)."
        )

    async def _not_here(self, tx: TrashReads, user_id: str, memory_id: str) -> str:
        """Why there is nothing to restore. With the trash handed over to the cloud library (sync scope
        memory.trash), the notebook keeps only the tombstone (cloud_synced_at set, neither restored nor purged):
        the memory is in the library's trash, and a restore there comes back here with the next sync."""
        handed = [
            t for t in await tx.tombstones_for(user_id, [memory_id])
            if t.cloud_synced_at is not None and t.restored_at is None and t.purged_at is None
            and t.reason != DeleteReason.evicted
        ]
        if not handed or not self.settings.sync_trash:
            return f"memory_id: nothing with id {memory_id!r} in the trash; it may have been purged. See list_trash"
        due = max((t.purge_at for t in handed if t.purge_at is not None), default=None)
        kept = f" (to be purged there from {absolute(due, self.settings.zone)})" if due is not None else ""
        return (
            f"memory_id: memory {memory_id} is no longer on this device: sync handed the trash over to the cloud "
            f"library (POCKETMEM_SYNC_SCOPES includes memory.trash), and it is in the library's trash{kept}. Restore "
            f"it there and the next sync brings it back here: `pocketmem restore {memory_id}` on a device that "
            "still holds it in its trash (`pocketmem trash` lists it), or run against the library itself, with "
            "POCKETMEM_DATABASE_URL set to this device's POCKETMEM_CLOUD_URL, POCKETMEM_CLOUD_URL unset and a "
            "POCKETMEM_MAX_ACTIVE as large as the library holds"
        )

    async def list_trash(self, user_id: str, limit: int, offset: int) -> TrashList:
        async with self.store.read() as reader:
            items, total = await reader.list_memories(
                user_id, MemoryFilter(statuses=(Status.trashed,), limit=limit, offset=offset)
            )
        return TrashList(items=[TrashItem.of(m) for m in items], total=total)


def _restored_message(memory: Memory, status: Status, closed: Memory | None) -> str:
    if status == Status.superseded:
        return "Restored as history: a newer memory supersedes it."
    if closed is not None:
        return f"Restored as the current version. It replaces {closed.id} again, kept as history (include_history)."
    if memory.valid_until is not None:
        return (
            "Restored as the current version: the newer memory that replaced it is in the trash or gone. Restoring "
            "that one makes this one history again."
        )
    return "Restored."
