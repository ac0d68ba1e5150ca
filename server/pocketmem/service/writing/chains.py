"""A supersedes chain's rule, for every write that moves a version in or out of it (add, forget, restore):
its newest version outside the trash is current (active, valid_until open); each older version is history
(superseded, closed when the next one began to be true).

    add / confirm a correction   the memory it supersedes is closed by it (`close`)
    forget the current version   the version it superseded is current again (`reopen`)
    restore                      with a newer version outside the trash: back as history; otherwise current,
                                 and the nearest version below it outside the trash, if current, is closed by
                                 it again (`close_again`)

Each step logs what happened on each memory it moved, naming the other (base/models.py CHAIN_LINKS): `updated`
on the version that replaced an older one, `superseded` on the one it replaced, `current_again` on a version
the forgetting of its successor made current.

A core memory is changed only by patch: it is never closed. Eviction and expiry are not a change to what is
true, so they leave the chain as it is. Each change goes through the store's ordinary status update (updated_at
now), so sync carries a reopened or closed version as an update beside the forgotten one's tombstone.
"""

from __future__ import annotations

from datetime import datetime

from pocketmem.base.models import EventKind, Memory, Status
from pocketmem.store.roles import MemoryTx


async def close(
    tx: MemoryTx, user_id: str, old: Memory, by: Memory, valid_from: datetime, now: datetime,
    operation_id: str | None = None,
) -> None:
    """Inside a transaction: `old` becomes history, closed at `valid_from` by `by` (the new memory, the duplicate
    that already says the new content, or a restored correction). `by` keeps one link back: an earlier one stays."""
    await tx.set_status(user_id, old.id, Status.superseded, updated_at=now, valid_until=valid_from)
    if by.supersedes is None:
        await tx.update_memory(user_id, by.id, supersedes=old.id, updated_at=now)
    await tx.add_event(
        user_id, EventKind.updated, now, memory_id=by.id, operation_id=operation_id, payload={"supersedes": old.id}
    )
    await tx.add_event(
        user_id, EventKind.superseded, now, memory_id=old.id, operation_id=operation_id, payload={"by": by.id}
    )


async def reopen(tx: MemoryTx, user_id: str, gone: Memory, now: datetime) -> Memory | None:
    """Inside a transaction, after `gone` (the chain's current version) went to the trash: the version it
    superseded is current again, unless it is no longer history or another version outside the trash follows
    it. Returns the memory made current, or None."""
    if gone.supersedes is None:
        return None
    earlier = await tx.get_memory(user_id, gone.supersedes)
    if earlier is None or earlier.status != Status.superseded or await tx.successor_of(user_id, earlier.id):
        return None
    await tx.set_status(user_id, earlier.id, Status.active, updated_at=now, valid_until=None)
    await tx.add_event(user_id, EventKind.current_again, now, memory_id=earlier.id, payload={"after": gone.id})
    return earlier


async def close_again(tx: MemoryTx, user_id: str, restored: Memory, now: datetime) -> Memory | None:
    """Inside a transaction, after `restored` came back current: the nearest version below it outside the trash
    (versions in the trash are passed over: v1 ← v2 ← v3 with v2 and v3 forgotten, v1 reopened, then v3 restored),
    if it is current and not core, is history again, closed when `restored` began to be true. Returns the memory
    closed, or None."""
    earlier = await _below(tx, user_id, restored)
    if earlier is None or earlier.status != Status.active or earlier.core:
        return None
    await close(tx, user_id, earlier, restored, restored.valid_from, now)
    return earlier


async def _below(tx: MemoryTx, user_id: str, memory: Memory) -> Memory | None:
    """The nearest version `memory` superseded, directly or through versions in the trash, that is not in it."""
    seen = {memory.id}
    link = memory.supersedes
    while link is not None and link not in seen:
        seen.add(link)
        earlier = await tx.get_memory(user_id, link)
        if earlier is None or earlier.status != Status.trashed:
            return earlier
        link = earlier.supersedes
    return None
