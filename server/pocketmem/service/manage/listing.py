"""list_memories: a page of a user's memories (or open pending candidates) by status, category, text and time."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import InvalidInput
from pocketmem.base.models import OPEN_PENDING, Category, Status
from pocketmem.base.results import MemoryList, MemoryView, PendingView
from pocketmem.core.scoring import importance_now
from pocketmem.core.text import clean_text
from pocketmem.service.writing.add_request import instant
from pocketmem.store.base import Transactions
from pocketmem.store.roles import PendingReads
from pocketmem.store.types import MemoryFilter


class Listing:
    def __init__(self, settings: Settings, store: Transactions, clock: Clock) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock

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
        if text is not None:
            text = clean_text(text, "text", max_chars=200)  # nothing left to match is an error, not "everything"
        since, until = instant(self.settings, "since", since), instant(self.settings, "until", until)
        if since is not None and until is not None and until <= since:
            raise InvalidInput("until", "must be after since")
        now = self.clock.now()
        async with self.store.read() as reader:
            if status == "pending":
                return await list_pending(reader, user_id, category, text, since, until, limit, offset)
            flt = MemoryFilter(
                statuses=(Status(status),), category=category, text=text, since=since, until=until, limit=limit,
                offset=offset,
            )
            memories, total = await reader.list_memories(user_id, flt)
            counts = await reader.category_counts(user_id, flt)
        return MemoryList(
            counts=counts,
            items=[
                MemoryView.of(m, importance_now(m, now)) for m in memories
            ],
            total=total,
        )


async def list_pending(
    reader: PendingReads,
    user_id: str,
    category: Category | None,
    text: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int,
    offset: int,
) -> MemoryList:
    """Open candidates, filtered before paging so `total` and every page agree with the filter; `counts` per
    category over the time range and text (before the category filter); proposed profile changes have no category:
    listed without a category filter, never counted."""
    _, every = await reader.list_pending(user_id, OPEN_PENDING, limit=1, offset=0)
    pending, _ = await reader.list_pending(user_id, OPEN_PENDING, limit=max(every, 1), offset=0)
    needle = text.casefold() if text else None
    in_range = sorted(  # newest first by when it was said, the date the list shows (a memory's order)
        (
            view for view in map(PendingView.of, pending)
            if (since is None or view.created_at >= since) and (until is None or view.created_at < until)
            and (needle is None or needle in view.content.casefold())
        ),
        key=lambda view: view.created_at,
        reverse=True,
    )
    counts: dict[str, int] = {}
    for view in in_range:
        if view.category is not None:  # a proposed profile change is no memory of a category
            counts[view.category.value] = counts.get(view.category.value, 0) + 1
    kept = [view for view in in_range if category is None or view.category == category]
    views: list[MemoryView | PendingView] = list(kept[offset : offset + limit])
    return MemoryList(items=views, total=len(kept), counts=counts)
