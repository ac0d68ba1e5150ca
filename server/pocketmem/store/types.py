"""The store's value types: what goes into and comes out of its queries besides the records of base/models.py.

Imported by the role protocols (roles.py, profile_base.py), the composed store (base.py), the queries and the
services alike; it imports nothing of the store, so those modules never import each other in a circle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pocketmem.base.models import Category, DeleteReason, EventKind, Scores, Status

# After a write commits: {user_id: the event kinds that transaction wrote}.
CommitListener = Callable[[Mapping[str, frozenset[EventKind]]], Awaitable[None]]


@dataclass(frozen=True)
class IndexedText:
    """What the keyword index stores for a memory: pre-split terms (see text.index_terms)."""

    terms: str
    keyword_terms: str


@dataclass(frozen=True)
class Unsent:
    """Trashed memories a purge leaves alone because sync has yet to carry them to the cloud library: those
    with one of `reasons` (every reason when None) last changed at or after `since`, a position in the store's
    change order (store/base.py; None: from the beginning, nothing has been carried yet)."""

    reasons: tuple[DeleteReason, ...] | None
    since: str | None


class UndecodedText(str):
    """Stored text that is not UTF-8 (SQLite keeps whatever bytes another program wrote): read with U+FFFD in place
    of the bytes that do not decode, and the bytes as stored in `raw`. A row mapper (sql/records.py) that meets one
    leaves its row out of its user's reads; the doctor lists the row and `--repair` mends it or sets it aside."""

    raw: bytes

    def __new__(cls, raw: bytes) -> UndecodedText:
        text = super().__new__(cls, raw.decode("utf-8", "replace"))
        text.raw = raw
        return text

    def stored(self) -> str:
        """The bytes as stored, in SQL's blob form (x'…'), for a report or an event that keeps them."""
        return f"x'{self.raw.hex()}'"


def stored_number(column: str, value: Any) -> Any:
    """A number column's value, or ValueError naming the column (SQLite keeps text a hand edit put there)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{column}: {str(value)[:40]!r} is not a number")
    return value


@dataclass(frozen=True, slots=True)
class ScoreRow:
    """What rescoring needs of a memory; maintenance reads these instead of whole rows."""

    id: str
    scores: Scores
    last_active: datetime  # last_active_at, or created_at when it was never used
    info_importance: float
    time_coef: float
    importance: float

    # The columns both backends select, in this order; `last_active` comes as each backend stores time.
    COLUMNS = (
        "id, emotion, info, persistence, judge, coalesce(last_active_at, created_at), info_importance, "
        "time_coef, importance"
    )

    @classmethod
    def of(cls, row: Sequence[Any], to_time: Callable[[Any], datetime]) -> ScoreRow:
        n = stored_number
        return cls(
            id=row[0],
            scores=Scores.model_construct(
                emotion=n("emotion", row[1]), info=n("info", row[2]), persistence=n("persistence", row[3]),
                judge=n("judge", row[4]),
            ),
            last_active=to_time(row[5]),
            info_importance=n("info_importance", row[6]),
            time_coef=n("time_coef", row[7]),
            importance=n("importance", row[8]),
        )


@dataclass(frozen=True, slots=True)
class Holder:
    """An active memory as the versions step first weighs it (service/recall/versions.py): what it says, its
    category and its dates. Whole rows are read only for the few the step lists."""

    id: str
    content: str
    category: Category
    valid_from: datetime
    expires_at: datetime | None

    # The columns both backends select, in this order; the times come as each backend stores them.
    COLUMNS = "id, content, category, valid_from, expires_at"

    @classmethod
    def of(cls, row: Sequence[Any], to_time: Callable[[Any], datetime]) -> Holder:
        return cls(row[0], row[1], Category(row[2]), to_time(row[3]), to_time(row[4]) if row[4] is not None else None)


@dataclass(frozen=True)
class MemoryFilter:
    statuses: Sequence[Status] = (Status.active,)
    category: Category | None = None
    text: str | None = None  # plain substring match on content
    since: datetime | None = None  # created_at at or after
    until: datetime | None = None  # created_at before
    limit: int = 50
    offset: int = 0


BrowseOrder = Literal["newest", "oldest", "importance", "uses"]


@dataclass(frozen=True)
class BrowseFilter:
    """The management page's list: MemoryFilter plus core, source, a created_at range and an order."""

    statuses: Sequence[Status] = (Status.active,)
    category: Category | None = None
    core: bool | None = None  # True: persistence >= 1 only; False: the others
    source: str | None = None  # exact match
    since: datetime | None = None  # created_at at or after
    until: datetime | None = None  # created_at before
    text: str | None = None  # as MemoryFilter.text
    order: BrowseOrder = "newest"  # newest / oldest: created_at (deleted_at for the trash alone)
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
    unreadable: list[str] = field(default_factory=list)  # why a value could not be read; the rest is counted


def term_deltas(old: IndexedText | None, new: IndexedText | None) -> dict[str, int]:
    """How a memory's change moves its owner's term counts: -1 for each distinct term it loses, +1 for each
    it gains; the term '' counts the memory itself."""

    def terms(text: IndexedText | None) -> set[str]:
        return set() if text is None else {"", *f"{text.terms} {text.keyword_terms}".split()}

    before, after = terms(old), terms(new)
    return {**{t: -1 for t in before - after}, **{t: 1 for t in after - before}}
