"""Typed records that cross module boundaries: what the store returns and what the tools answer."""

from __future__ import annotations

import contextlib
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Category(StrEnum):
    preference = "preference"  # likes, dislikes, habits, style
    fact = "fact"  # objective facts about the user, their work and projects
    lesson = "lesson"  # what failed and what fixed it
    goal = "goal"  # plans and longer-term aims
    person = "person"  # people in the user's life
    todo = "todo"  # something to do, optionally with due_at / remind_at
    event = "event"  # something that happened or will happen at a time (reminded only as a todo)
    episode = "episode"  # a conversation summary; expires after 14 days
    context = "context"  # short-lived situational context
    project = "project"  # the state of a project the user works on (Project.md)


class Status(StrEnum):
    active = "active"
    superseded = "superseded"
    trashed = "trashed"


class DeleteReason(StrEnum):
    """Why a memory went to the trash (tombstone reasons in the design's contract).

    `replaced` and `conflict_patch` are not written by this version (a superseded memory stays recallable as
    history; a core patch keeps its revision instead) but remain valid values for stored data and sync peers.
    """

    evicted = "evicted"
    replaced = "replaced"
    user_delete = "user_delete"
    conflict_patch = "conflict_patch"
    expired = "expired"
    purged = "purged"


class PendingStatus(StrEnum):
    pending = "pending"
    confirmed = "confirmed"
    rejected = "rejected"
    snoozed = "snoozed"


OPEN_PENDING = (PendingStatus.pending, PendingStatus.snoozed)  # still a question for the user


class EventKind(StrEnum):
    created = "created"
    # A supersedes chain moved (service/writing/chains.py); each event is logged on the memory it happened to and
    # names the other one in its payload (CHAIN_LINKS).
    updated = "updated"  # this memory replaced an older one (payload `supersedes`)
    superseded = "superseded"  # a newer memory replaced this one (payload `by`)
    current_again = "current_again"  # the version that replaced this one was forgotten (payload `after`)
    patched = "patched"
    deleted = "deleted"
    restored = "restored"
    evicted = "evicted"
    expired = "expired"
    purged = "purged"
    recalled = "recalled"
    retrieval_fail = "retrieval_fail"
    duplicate = "duplicate"
    pending = "pending"
    discarded = "discarded"
    confirmed = "confirmed"
    rejected = "rejected"
    snoozed = "snoozed"
    reindexed = "reindexed"
    used = "used"  # the agent said these memories shaped its reply (recall_memories `used`)
    completed = "completed"  # a todo was done
    reopened = "reopened"  # a completed todo is open again
    promoted = "promoted"  # review: made core
    kept = "kept"  # review: kept as it is
    rescored = "rescored"  # maintenance refreshed stored time coefficients and importance
    imported = "imported"  # rows read from an export file
    synced = "synced"  # sync with the cloud library changed this notebook (downloaded, trash handed over)
    token_created = "token_created"
    token_revoked = "token_revoked"
    profile_updated = "profile_updated"  # persona or identity saved (update_profile, a confirmed proposal, a file edit)
    profile_file_rejected = "profile_file_rejected"  # part of a person's edit of a Markdown file was not taken in
    # doctor --repair: a row no read could decode, removed, or a value that was not UTF-8 text, rewritten; the stored
    # values in the payload
    set_aside = "set_aside"


class Scores(BaseModel):
    """E/I/P/J, each in [0, 1] (design "Scoring")."""

    model_config = ConfigDict(frozen=True)

    emotion: float
    info: float
    persistence: float
    judge: float


def unreminded_field(category: Category, due_at: object, remind_at: object) -> str | None:
    """The due_at or remind_at a memory of `category` may not carry, or None. A reminder comes from a todo alone
    (service/upkeep/todos.py), so only a todo takes them: on any other memory they would be kept and never
    remind anyone. `REMINDER_RULE` says so in the error."""
    if category == Category.todo:
        return None
    return "due_at" if due_at is not None else "remind_at" if remind_at is not None else None


REMINDER_RULE = (
    "only a todo has a due time and is reminded; add what the user should be reminded of (an appointment, an "
    "interview, a check-up) as category \"todo\" with due_at, or leave {field} out and write the time in the content"
)


def expired(expires_at: datetime | None, now: datetime) -> bool:
    """Past its expires_at: recall, memory_context and every list of open todos (the user card, User.md, the page:
    the store's open_todos say this in SQL) no longer show it; maintenance then moves it to the trash."""
    return expires_at is not None and expires_at <= now


class Memory(BaseModel):
    """One row of `memories`, as the service sees it."""

    id: str
    user_id: str
    content: str
    category: Category
    keywords: list[str] = Field(default_factory=list)
    scores: Scores
    info_importance: float
    time_coef: float
    importance: float
    confidence: float
    source: str | None = None
    source_ref: str | None = None
    created_at: datetime
    updated_at: datetime
    valid_from: datetime
    valid_until: datetime | None = None
    last_active_at: datetime | None = None
    use_count: int = 0
    status: Status
    deleted_at: datetime | None = None
    purge_at: datetime | None = None
    delete_reason: DeleteReason | None = None
    supersedes: str | None = None
    expires_at: datetime | None = None
    due_at: datetime | None = None
    remind_at: datetime | None = None
    completed_at: datetime | None = None
    content_hash: str
    embed_model: str

    @property
    def core(self) -> bool:
        return self.scores.persistence >= 1.0


class PendingItem(BaseModel):
    id: str
    user_id: str
    candidate: dict[str, Any]
    confidence: float
    status: PendingStatus
    cooldown_until: datetime | None = None
    created_at: datetime
    updated_at: datetime
    memory_id: str | None = None

    def said_at(self) -> datetime:
        """When the user said the candidate: the created_at its writer passed (add_memory's, kept in the candidate
        in UTC), else when it was proposed; never after it was proposed. confirm_pending dates the memory by it, and
        every list of pending items shows it as the item's created_at, so the two agree."""
        said = self.candidate.get("created_at")
        if isinstance(said, str):
            with contextlib.suppress(ValueError):
                when = datetime.fromisoformat(said)
                if when.tzinfo is not None:
                    return min(when, self.created_at)
        return self.created_at

    def candidate_fault(self) -> tuple[str, str] | None:
        """(field, why) when the candidate is not one a write path makes, else None. add_memory's candidate is its
        request (content, category, ...) with content_hash; a proposed profile change adds `profile` (section ->
        fields). Listing, recall and confirm read `content` and `category`."""
        content, category = self.candidate.get("content"), self.candidate.get("category", Category.fact.value)
        if not isinstance(content, str) or not content.strip():
            return "candidate.content", "must be the memory's text (a non-empty string)"
        if not isinstance(category, str) or category not in {c.value for c in Category}:
            return "candidate.category", f"must be one of {', '.join(Category)}"
        profile = self.candidate.get("profile")
        if profile is not None and not (
            isinstance(profile, dict) and all(isinstance(fields, dict) for fields in profile.values())
        ):
            return "candidate.profile", "must map each profile section to its fields"
        return None


class Tombstone(BaseModel):
    tombstone_id: str
    memory_id: str
    user_id: str
    deleted_at: datetime
    purge_at: datetime | None
    reason: DeleteReason
    cloud_synced_at: datetime | None = None
    payload_hash: str | None = None
    restored_at: datetime | None = None
    purged_at: datetime | None = None  # the memory row is gone for good; the tombstone stays
    # A person's forget (user_delete): the forgotten memory's content hash, never its text, so that what the user
    # forgot stays forgotten after the purge (Duplicates.forgotten). None for other reasons, and where unknown.
    content_hash: str | None = None


class Usage(BaseModel):
    """How often the agent said a memory shaped its reply, and where the last review left the counters."""

    user_id: str
    memory_id: str
    used_count: int = 0
    last_used_at: datetime | None = None
    used_mark: int = 0  # used_count when the memory was last kept by a review
    recalled_mark: int = 0  # use_count (recalls) when the memory was last kept by a review


class Revision(BaseModel):
    id: str
    memory_id: str
    user_id: str
    previous_content: str
    new_content: str
    mode: str
    reason: str | None
    created_at: datetime


# The payload field in which a chain event names the other memory: the older one, the newer one, the forgotten one.
CHAIN_LINKS = {EventKind.updated: "supersedes", EventKind.superseded: "by", EventKind.current_again: "after"}


class Event(BaseModel):
    id: int
    user_id: str
    kind: EventKind
    memory_id: str | None
    operation_id: str | None
    payload: dict[str, Any]
    created_at: datetime

    @property
    def other_memory(self) -> str | None:
        """The id of the other memory a chain event names (CHAIN_LINKS); None for any other event."""
        field = CHAIN_LINKS.get(self.kind)
        named = self.payload.get(field) if field else None
        return named if isinstance(named, str) else None


class ApiToken(BaseModel):
    """A bearer token of the network transports. The token itself is never stored, only its hash."""

    id: str
    user_id: str
    name: str | None = None
    token_hash: str
    created_at: datetime
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class ProfileRevision(BaseModel):
    """One change of a profile section (persona or identity): the fields before and after."""

    id: str
    user_id: str
    section: str
    previous: dict[str, Any]
    new: dict[str, Any]
    source: str  # tool, confirmed, file, import
    created_at: datetime
