"""Reads for the management page: the filtered list (plain text or recall ranking), one memory with its
history, and the figures behind the pictures. Nothing here writes; changes go through the write path,
review, todos and curation like the tools' do.

Search modes:
    text     memories holding every word of the query (Han bigrams, stemmed words) through the keyword
             index, every filter and order applies; a query without index terms, or one matching more than
             TEXT_CANDIDATES memories, falls back to a case-insensitive substring scan of content and keywords
    recall   the recall ranking of retrieval.py (semantic + keyword + freshness + importance) over the
             query, without counting the hits as used; the best RECALL_PAGE, then the filters
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, time, timedelta, tzinfo
from typing import Any, Literal

from pydantic import BaseModel, Field

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import InvalidInput, NotFound
from pocketmem.base.models import Category, Event, EventKind, Memory, Revision, Status
from pocketmem.base.results import MemoryView
from pocketmem.core import instants
from pocketmem.core.scoring import days_between, importance, importance_now
from pocketmem.core.shown_time import day
from pocketmem.core.text import clean_text, query_terms
from pocketmem.service.recall.retrieval import RecallRequest, Retrieval
from pocketmem.store.base import Transactions
from pocketmem.store.roles import StoreReader
from pocketmem.store.types import BrowseFilter, BrowseOrder

MAX_PER_PAGE = 200
MAX_QUERY_CHARS = 200
RECALL_PAGE = 50
TEXT_CANDIDATES = 5000
DETAIL_EVENTS = 50
CHAIN_LIMIT = 20
HISTOGRAM_BUCKETS = 20
NEXT_EVICTED = 5
# Next evicted: the lowest stored importance (refreshed by maintenance), this many times over, re-ranked at now.
EVICTION_POOL = 10
MOST_RECALLED = 10
CREATED_DAYS = 90
TODO_LIMIT = 200
RECALL_DAYS = 30
ALL_STATUSES = (Status.active, Status.superseded, Status.trashed)


class BrowseQuery(BaseModel):
    """What the list asks for; every field optional. Dates are calendar days in the user's time zone, within the
    years instants.accept takes (checked in UTC, like list_memories' since / until)."""

    q: str | None = None
    mode: Literal["text", "recall"] = "text"
    status: Literal["active", "superseded", "trashed", "all"] = "active"
    category: Category | None = None
    core: bool | None = None
    source: str | None = None
    since: date | None = None
    until: date | None = Field(None, description="inclusive")
    sort: BrowseOrder = "newest"
    page: int = Field(1, ge=1, le=1_000_000)
    per_page: int = Field(50, ge=1, le=MAX_PER_PAGE)


class ListedMemory(BaseModel):
    memory: MemoryView
    score: float | None = None  # the recall score, in recall mode


class BrowsePage(BaseModel):
    items: list[ListedMemory]
    total: int
    page: int
    pages: int
    per_page: int
    mode: Literal["text", "recall"]
    degraded: str | None = None


class MemoryDetail(BaseModel):
    memory: MemoryView
    age_days: int
    time_coef: float
    info_importance: float
    revisions: list[Revision]
    events: list[Event]
    older: list[MemoryView] = Field(description="what this memory superseded, newest first")
    newer: MemoryView | None = Field(None, description="the memory that supersedes this one")
    named: dict[str, MemoryView] = Field(
        default_factory=dict, description="the memories its chain events name, by id (one no longer kept is missing)"
    )


class DayCount(BaseModel):
    day: str
    key: str
    count: int


class Insights(BaseModel):
    today: date = Field(description="the calendar day it is now in the user's time zone (POCKETMEM_TZ)")
    created: list[DayCount] = Field(description="memories created per calendar day (POCKETMEM_TZ) and category, "
                                    "last CREATED_DAYS")
    recalls: list[DayCount] = Field(description="recalled / used events per calendar day (POCKETMEM_TZ), "
                                    "last RECALL_DAYS")
    histogram: list[int] = Field(description="active non-core memories per importance bucket (HISTOGRAM_BUCKETS)")
    active_non_core: int
    core: int
    max_active: int
    next_evicted: list[MemoryView]
    most_recalled: list[MemoryView]


class TodoOverview(BaseModel):
    todos: list[MemoryView]
    due: list[str] = Field(description="ids whose reminder time has come")
    overdue: list[str]


class Browse:
    def __init__(self, settings: Settings, store: Transactions, clock: Clock, retrieval: Retrieval) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.retrieval = retrieval

    def _filter(self, query: BrowseQuery, text: str | None) -> BrowseFilter:
        statuses = ALL_STATUSES if query.status == "all" else (Status(query.status),)
        zone = self.settings.zone
        since = instants.accept("since", datetime.combine(query.since, time(0), zone), zone) if query.since else None
        until = None
        if query.until:  # the day's start is checked, the filter ends where the next day starts
            until = instants.accept("until", datetime.combine(query.until, time(0), zone), zone) + timedelta(days=1)
        if since and until and until <= since:
            raise InvalidInput("until", "must be the same day as since or later")
        return BrowseFilter(
            statuses=statuses, category=query.category, core=query.core, source=query.source or None,
            since=since, until=until, text=text, order=query.sort,
            limit=query.per_page, offset=(query.page - 1) * query.per_page,
        )

    def _view(self, memory: Memory, now: datetime) -> MemoryView:
        return MemoryView.of(memory, importance_now(memory, now))

    async def page(self, user_id: str, query: BrowseQuery) -> BrowsePage:
        # Nothing left once control and invisible characters are removed is refused, as list_memories refuses it:
        # never read as "everything".
        text = clean_text(query.q, "q", max_chars=MAX_QUERY_CHARS) if query.q else None
        flt = self._filter(query, text)
        now = self.clock.now()
        if query.mode == "recall" and text:
            return await self._recall_page(user_id, query, flt, text, now)
        async with self.store.read() as reader:
            indexed = await self._indexed_text_page(reader, user_id, flt, text) if text else None
            found, total = indexed if indexed is not None else await reader.browse_memories(user_id, flt)
        return BrowsePage(
            items=[ListedMemory(memory=self._view(m, now)) for m in found],
            total=total, page=query.page, pages=max(1, -(-total // query.per_page)), per_page=query.per_page,
            mode="text" if not text else query.mode,
        )

    async def _indexed_text_page(
        self, reader: StoreReader, user_id: str, flt: BrowseFilter, text: str
    ) -> tuple[list[Memory], int] | None:
        """Plain-text search through the keyword index: memories holding every term of the query (Han bigrams,
        stemmed words), then the filters and the order. None when the index cannot answer it whole (no
        terms, or more than TEXT_CANDIDATES matches): the caller scans the table instead."""
        terms = query_terms(text)
        if not terms:
            return None
        hits = await reader.keyword_hits(user_id, terms, TEXT_CANDIDATES, flt.statuses, all_terms=True)
        if len(hits) >= TEXT_CANDIDATES:
            return None
        found = [m for m in await reader.get_memories(user_id, [h[0] for h in hits]) if _matches(m, flt)]
        found.sort(key=_ORDER_KEYS[flt.order])
        return found[flt.offset : flt.offset + flt.limit], len(found)

    async def _recall_page(
        self, user_id: str, query: BrowseQuery, flt: BrowseFilter, text: str, now: datetime
    ) -> BrowsePage:
        result = await self.retrieval.recall(
            user_id,
            RecallRequest(
                query=text, top_k=RECALL_PAGE, record=False, include_history=query.status != "active",
                categories=[query.category] if query.category else None,
            ),
        )
        scores = {hit.id: hit.score for hit in result.memories if hit.source == "local"}
        async with self.store.read() as reader:
            found = await reader.get_memories(user_id, list(scores))
        kept = [m for m in found if _matches(m, flt)]
        start = (query.page - 1) * query.per_page
        return BrowsePage(
            items=[
                ListedMemory(memory=self._view(m, now), score=round(scores[m.id], 4))
                for m in kept[start : start + query.per_page]
            ],
            total=len(kept), page=query.page, pages=max(1, -(-len(kept) // query.per_page)),
            per_page=query.per_page, mode="recall", degraded=result.degraded,
        )

    async def detail(self, user_id: str, memory_id: str) -> MemoryDetail:
        now = self.clock.now()
        async with self.store.read() as reader:
            memory = await reader.get_memory(user_id, memory_id)
            if memory is None:
                raise NotFound(f"no memory with id {memory_id!r}")
            revisions = await reader.list_revisions(user_id, memory_id)
            events = await reader.memory_events(user_id, memory_id, DETAIL_EVENTS)
            older: list[MemoryView] = []
            previous = memory.supersedes
            while previous is not None and len(older) < CHAIN_LIMIT:
                before = await reader.get_memory(user_id, previous)
                if before is None:
                    break
                older.append(self._view(before, now))
                previous = before.supersedes
            newer = await reader.successor_of(user_id, memory_id)
            named = await reader.get_memories(user_id, [*{other for e in events if (other := e.other_memory)}])
        info, coef, current = importance(memory.scores, memory.last_active_at or memory.created_at, now)
        return MemoryDetail(
            memory=MemoryView.of(memory, current),
            age_days=max(0, int(days_between(memory.valid_from or memory.created_at, now))),
            time_coef=round(coef, 4), info_importance=round(info, 4),
            revisions=revisions, events=events, older=older,
            newer=self._view(newer, now) if newer is not None else None,
            named={m.id: self._view(m, now) for m in named},
        )

    async def insights(self, user_id: str) -> Insights:
        now = self.clock.now()
        zone = self.settings.zone
        today = now.astimezone(zone).date()

        def first(days: int) -> datetime:  # the start of the oldest whole day a chart shows
            return datetime.combine(today - timedelta(days=days - 1), time(0), zone)

        async with self.store.read() as reader:
            created = await reader.created_per_quarter(user_id, first(CREATED_DAYS), ALL_STATUSES)
            recalls = await reader.events_per_quarter(user_id, (EventKind.recalled, EventKind.used), first(RECALL_DAYS))
            buckets = dict(await reader.importance_histogram(user_id, HISTOGRAM_BUCKETS))
            stats = await reader.stats(user_id)
            lowest = await reader.lowest_importance(user_id, NEXT_EVICTED * EVICTION_POOL)
            most, _ = await reader.browse_memories(user_id, BrowseFilter(order="uses", limit=MOST_RECALLED))
        return Insights(
            today=today, created=_per_day(created, zone), recalls=_per_day(recalls, zone),
            histogram=[buckets.get(i, 0) for i in range(HISTOGRAM_BUCKETS)],
            active_non_core=stats.by_status.get("active", 0) - stats.core,
            core=stats.core,
            max_active=self.settings.max_active,
            next_evicted=sorted((self._view(m, now) for m in lowest), key=lambda v: v.importance)[:NEXT_EVICTED],
            most_recalled=[self._view(m, now) for m in most if m.use_count > 0],
        )

    async def todos(self, user_id: str, limit: int = TODO_LIMIT) -> TodoOverview:
        """Open todos, soonest first (undated last), and which of them should remind the user now."""
        now = self.clock.now()
        async with self.store.read() as reader:
            open_todos = await reader.open_todos(user_id, now, limit)
            due = await reader.open_todos(user_id, now, limit, due_by=now)
        return TodoOverview(
            todos=[self._view(m, now) for m in open_todos],
            due=[m.id for m in due],
            overdue=[m.id for m in open_todos if m.due_at is not None and m.due_at < now],
        )

    async def latest_event_id(self, user_id: str) -> int:
        async with self.store.read() as reader:
            return await reader.latest_event_id(user_id)


def _newest(memory: Memory) -> datetime:
    return memory.deleted_at or memory.created_at if memory.status == Status.trashed else memory.created_at


_ORDER_KEYS: dict[str, Callable[[Memory], Any]] = {
    "newest": lambda m: -_newest(m).timestamp(),
    "oldest": lambda m: _newest(m).timestamp(),
    "importance": lambda m: -m.importance,
    "uses": lambda m: -m.use_count,
}


def _matches(memory: Memory, flt: BrowseFilter) -> bool:
    return (
        memory.status in flt.statuses
        and (flt.category is None or memory.category == flt.category)
        and (flt.core is None or memory.core == flt.core)
        and (flt.source is None or memory.source == flt.source)
        and (flt.since is None or memory.created_at >= flt.since)
        and (flt.until is None or memory.created_at < flt.until)
    )


def _per_day(quarters: list[tuple[str, str, int]], zone: tzinfo) -> list[DayCount]:
    """The store's counts per UTC quarter hour summed per calendar day in `zone` (a time a person sees)."""
    days: dict[tuple[str, str], int] = {}
    for quarter, key, count in quarters:
        start = datetime.fromisoformat(f"{quarter}:00+00:00")
        slot = (day(start, zone), key)
        days[slot] = days.get(slot, 0) + count
    return [DayCount(day=d, key=k, count=n) for (d, k), n in sorted(days.items())]
