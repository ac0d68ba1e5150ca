"""Looks before destructive steps, for the CLI to show and ask: what a maintenance run would purge for good,
and how far an import would push each user over the cap (POCKETMEM_MAX_ACTIVE). Read-only.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from pocketmem.base.config import Settings
from pocketmem.base.models import Memory, Status
from pocketmem.service.upkeep.unsent import unsent
from pocketmem.store.base import Transactions

PREVIEW_LIMIT = 10_000


class CapOverflow(BaseModel):
    user_id: str
    active: int
    incoming: int
    max_active: int

    @property
    def over(self) -> int:
        return self.active + self.incoming - self.max_active


async def purge_preview(
    store: Transactions, settings: Settings, now: datetime, limit: int = PREVIEW_LIMIT
) -> dict[str, list[Memory]]:
    """Per user, the trashed memories a maintenance run at `now` deletes for good (purge_at <= now)."""
    out: dict[str, list[Memory]] = {}
    async with store.read() as reader:
        for user_id in await reader.user_ids():
            doomed = await reader.purgeable_memories(user_id, now, limit, await unsent(settings, reader, user_id))
            if doomed:
                out[user_id] = doomed
    return out


async def import_overflow(store: Transactions, settings: Settings, records: Sequence[Any]) -> list[CapOverflow]:
    """Users whose active memories would exceed the cap once the new active rows of an import are in."""
    incoming: dict[str, set[str]] = {}
    for record in records:
        memory = getattr(record, "memory", None)
        if isinstance(memory, Memory) and memory.status == Status.active:
            incoming.setdefault(memory.user_id, set()).add(memory.id)
    out = []
    async with store.read() as reader:
        for user_id, ids in incoming.items():
            ordered = sorted(ids)
            known = {m.id for start in range(0, len(ordered), 500)
                     for m in await reader.get_memories(user_id, ordered[start : start + 500])}
            fresh = len(ids - known)
            active = await reader.count_active(user_id)
            if fresh and active + fresh > settings.max_active:
                out.append(CapOverflow(user_id=user_id, active=active, incoming=fresh, max_active=settings.max_active))
    return out
