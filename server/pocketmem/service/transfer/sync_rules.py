"""How one change from one store lands in another: the conflict rules of sync (pure policy over the Store API).

    version       (updated_at, hash of what sync carries); the greater wins (last writer wins, ties settled
                  the same way on every side, so both ends converge)
    eviction      local state, not a change: an evicted memory travels as active, with the updated_at it had
                  before it was evicted, and an arriving active version never un-evicts a local row
    tombstone     a delete beats every write of a non-trashed version, whatever its time (an edit made where
                  the delete was not yet known is not a restore); only a restore later than the delete, seen
                  as a tombstone's restored_at, brings the memory back. Tombstones travel before memories, so
                  a restore arrives before the version it made. An evicted tombstone only guards the notebook
                  that evicted against versions at or before it (the library ignores it)
    purge         a purged tombstone purges the receiver's trashed copy too (deleted for good everywhere)
    trash         trashed content reaches the library only through the trash handover (scope memory.trash);
                  a notebook never receives trash it does not hold
    core patches  two devices patched one active core memory: appends on both sides are joined, a replace on
                  either side lets the later version win and is reported (core_merge.py)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import NamedTuple

from pocketmem.base.models import DeleteReason, Memory, Revision, Status, Tombstone
from pocketmem.core.instants import encode as to_iso
from pocketmem.service.shared.rows import embedding_text, indexed_text
from pocketmem.service.transfer.core_merge import Resolution, settle
from pocketmem.store.roles import StoreWriter

SYNCED_FIELDS = (
    "content", "category", "keywords", "confidence", "source", "source_ref", "created_at", "updated_at",
    "valid_from", "valid_until", "status", "deleted_at", "purge_at", "delete_reason", "supersedes", "expires_at",
    "due_at", "remind_at", "completed_at", "content_hash",
)


def evicted(memory: Memory) -> bool:
    return memory.status == Status.trashed and memory.delete_reason == DeleteReason.evicted


def sync_view(memory: Memory) -> Memory:
    """What a store says to the others about a memory: eviction is its own business."""
    if not evicted(memory):
        return memory
    return memory.model_copy(
        update={"status": Status.active, "deleted_at": None, "purge_at": None, "delete_reason": None}
    )


def sync_hash(memory: Memory) -> str:
    body: dict[str, object] = {}
    for name in SYNCED_FIELDS:
        value = getattr(memory, name)
        body[name] = to_iso(value) if isinstance(value, datetime) else str(value) if value is not None else None
    scores = memory.scores
    body["scores"] = [repr(float(scores.emotion)), repr(float(scores.info)), repr(float(scores.persistence))]
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


def version(memory: Memory) -> tuple[datetime, str]:
    return memory.updated_at, sync_hash(memory)


def deleted(tombstones: Sequence[Tombstone]) -> bool:
    """Whether a store holding these tombstones of one memory keeps it deleted: a delete stands unless some restore
    came after it. Set-like, so every store holding the same tombstones agrees, whatever order they arrived in."""
    restored = max((t.restored_at for t in tombstones if t.restored_at is not None), default=None)
    return any(
        t.reason != DeleteReason.evicted and t.restored_at is None and (restored is None or t.deleted_at > restored)
        for t in tombstones
    )


def blocks(tombstones: Sequence[Tombstone], incoming: Memory, *, library: bool) -> bool:
    """Whether the receiver's tombstones keep `incoming` out: a delete not undone by a restore, or (in the notebook
    that evicted it) an eviction no older than the version arriving."""
    if incoming.status == Status.trashed:
        return False
    if deleted(tombstones):
        return True
    return not library and any(
        t.reason == DeleteReason.evicted and t.restored_at is None and t.deleted_at >= incoming.updated_at
        for t in tombstones
    )


Embed = Callable[[str], Awaitable[Sequence[float]]]


class Landing(NamedTuple):
    changed: bool  # the store behind the transaction changed
    conflict: Resolution | None = None  # both sides patched the core memory since their common version


async def apply_memory(
    tx: StoreWriter,
    incoming: Memory,
    vector: Sequence[float] | None,
    *,
    library: bool,
    record_change: bool,
    revisions: Sequence[Revision],
    embed: Embed,
) -> Landing:
    """Land one memory (its sync view, with the revisions that came with it) in the store behind `tx`."""
    user_id = incoming.user_id
    existing = await tx.get_memory(user_id, incoming.id)
    if blocks(await tx.tombstones_for(user_id, [incoming.id]), incoming, library=library):
        return Landing(False)
    if existing is None:
        if (incoming.status == Status.trashed and not library) or vector is None:
            return Landing(False)
        await tx.upsert_memory(
            incoming, vector, indexed_text(incoming.content, incoming.keywords), record_change=record_change
        )
        return Landing(True)
    ours = sync_view(existing)
    incoming_wins = version(ours) < version(incoming)
    conflict = None
    if ours.core and incoming.core and Status.active == ours.status == incoming.status:
        conflict = await settle(tx, ours, incoming, revisions, incoming_wins=incoming_wins, announce=record_change)
    if conflict is not None and conflict.settled is not None:
        # A new version made here: it travels on from here as any other change does.
        incoming, incoming_wins, record_change = conflict.settled, True, True
        vector = await embed(text_to_embed(incoming)) if incoming.content != existing.content else None
        if conflict.revision is not None:
            await tx.import_revision(conflict.revision)
    resolution = conflict.resolution if conflict else None
    if not incoming_wins:
        return Landing(False, resolution)
    merged = incoming.model_copy(
        update={
            "use_count": max(existing.use_count, incoming.use_count),
            "last_active_at": _latest(existing.last_active_at, incoming.last_active_at),
        }
    )
    if evicted(existing) and incoming.status == Status.active:
        merged = merged.model_copy(
            update={
                "status": existing.status,
                "deleted_at": existing.deleted_at,
                "purge_at": existing.purge_at,
                "delete_reason": existing.delete_reason,
            }
        )
    await tx.upsert_memory(
        merged, vector, indexed_text(merged.content, merged.keywords), record_change=record_change
    )
    return Landing(True, resolution)


async def apply_tombstone(
    tx: StoreWriter, tombstone: Tombstone, *, library: bool, record_change: bool
) -> bool:
    """Record a tombstone from elsewhere and let it act on the receiver's copy; True when anything changed."""
    changed = await tx.upsert_tombstone(tombstone, record_change=record_change)
    if tombstone.restored_at is not None or tombstone.reason == DeleteReason.evicted:
        return changed
    memory = await tx.get_memory(tombstone.user_id, tombstone.memory_id)
    if memory is None or not deleted(await tx.tombstones_for(tombstone.user_id, [memory.id])):
        return changed  # nothing here, or restored here after this delete
    if tombstone.purged_at is not None:
        # Deleted for good where it was deleted, and not restored here since.
        return await tx.purge_memory(tombstone.user_id, memory.id, tombstone.purged_at) or changed
    if memory.status != Status.trashed or evicted(memory):
        await tx.set_status(
            tombstone.user_id,
            memory.id,
            Status.trashed,
            updated_at=tombstone.deleted_at,
            deleted_at=tombstone.deleted_at,
            purge_at=tombstone.purge_at,
            delete_reason=tombstone.reason,
            valid_until=memory.valid_until,
        )
        return True
    return changed


def text_to_embed(memory: Memory) -> str:
    return embedding_text(memory.content, memory.keywords)


def _latest(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None or b is None:
        return a or b
    return max(a, b)
