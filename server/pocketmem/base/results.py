"""What the service answers: the structured results the MCP tools return as-is."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from pocketmem.base.models import Category, DeleteReason, Memory, PendingItem, PendingStatus, Revision, Status


class ScoresView(BaseModel):
    emotion: float
    info: float
    persistence: float
    judge: float


class MemoryView(BaseModel):
    id: str
    content: str
    category: Category
    keywords: list[str]
    status: Status
    core: bool = Field(description="persistence == 1: never decays, never evicted, changed only by patch")
    importance: float
    confidence: float
    scores: ScoresView
    created_at: datetime
    valid_from: datetime
    valid_until: datetime | None = None
    last_active_at: datetime | None = None
    use_count: int
    supersedes: str | None = None
    due_at: datetime | None = None
    remind_at: datetime | None = None
    expires_at: datetime | None = None
    completed_at: datetime | None = None
    source: str | None = None
    source_ref: str | None = None
    deleted_at: datetime | None = None
    purge_at: datetime | None = None
    delete_reason: DeleteReason | None = None

    @classmethod
    def of(cls, memory: Memory, importance: float | None = None) -> MemoryView:
        return cls(
            id=memory.id,
            content=memory.content,
            category=memory.category,
            keywords=memory.keywords,
            status=memory.status,
            core=memory.core,
            importance=round(memory.importance if importance is None else importance, 4),
            confidence=memory.confidence,
            scores=ScoresView(**memory.scores.model_dump()),
            created_at=memory.created_at,
            valid_from=memory.valid_from,
            valid_until=memory.valid_until,
            last_active_at=memory.last_active_at,
            use_count=memory.use_count,
            supersedes=memory.supersedes,
            due_at=memory.due_at,
            remind_at=memory.remind_at,
            expires_at=memory.expires_at,
            completed_at=memory.completed_at,
            source=memory.source,
            source_ref=memory.source_ref,
            deleted_at=memory.deleted_at,
            purge_at=memory.purge_at,
            delete_reason=memory.delete_reason,
        )


class RevisionView(BaseModel):
    id: str
    memory_id: str
    previous_content: str
    new_content: str
    mode: str
    reason: str | None
    created_at: datetime

    @classmethod
    def of(cls, revision: Revision) -> RevisionView:
        return cls(**revision.model_dump(exclude={"user_id"}))


class MemoryRecord(MemoryView):
    """One memory with its earlier texts, newest first (memory://memories/{memory_id}, `pocketmem show`)."""

    revisions: list[RevisionView]


class PendingView(BaseModel):
    pending_id: str
    content: str
    category: Category | None = Field(description="the memory's category; null for a proposed profile change")
    confidence: float
    status: PendingStatus
    created_at: datetime
    cooldown_until: datetime | None = None
    memory_id: str | None = None
    supersedes: str | None = None
    kind: Literal["memory", "profile"] = Field("memory", description="profile: a proposed change of the profile")

    @classmethod
    def of(cls, item: PendingItem) -> PendingView:
        profile = "profile" in item.candidate
        return cls(
            pending_id=item.id,
            content=item.candidate["content"],
            category=None if profile else Category(item.candidate.get("category", Category.fact)),
            confidence=item.confidence,
            status=item.status,
            created_at=item.said_at(),
            cooldown_until=item.cooldown_until,
            memory_id=item.memory_id,
            supersedes=item.candidate.get("supersedes"),
            kind="profile" if profile else "memory",
        )


class EvictedItem(BaseModel):
    id: str
    content: str
    importance: float
    purge_at: datetime


class AddResult(BaseModel):
    status: Literal["stored", "pending", "discarded", "duplicate"]
    memory_id: str | None = None
    pending_id: str | None = None
    importance: float | None = None
    core: bool = False
    superseded: str | None = Field(None, description="id of the memory this one replaced")
    evicted: list[EvictedItem] = Field(default_factory=list)
    reason: Literal["low_confidence", "temporary", "secret", "rejected", "forgotten"] | None = Field(
        None,
        description="why it was discarded: low_confidence, temporary (temporary mode), secret, rejected (the "
        "user rejected it when asked) or forgotten (the user asked to forget it)",
    )
    redacted: list[str] = Field(
        default_factory=list,
        description="kinds of secrets removed from the content (api_key, password, private_key, card_number, "
        "security_code, id_number, passport_number); with status discarded they were the reason",
    )
    message: str


class ScoreBreakdown(BaseModel):
    semantic: float
    keyword: float
    freshness: float
    importance: float
    relevance: float


class RecallHit(BaseModel):
    id: str
    content: str
    category: Category
    created_at: datetime
    age: str = Field(description="relative age as injected, e.g. 3天前 or 3 days ago")
    age_days: int
    score: float
    importance: float
    core: bool
    outdated: bool = Field(False, description="superseded by a newer memory (only with include_history)")
    due_at: datetime | None = None
    remind_at: datetime | None = None
    completed_at: datetime | None = Field(None, description="set for a todo that is done")
    source: Literal["local", "library"] = Field(
        "local", description="library: found in the cloud library, not in this device's notebook"
    )
    breakdown: ScoreBreakdown | None = None


class ReminderView(BaseModel):
    id: str
    content: str
    due_at: datetime | None = None
    remind_at: datetime | None = None
    overdue: bool = Field(description="due_at has passed")
    label: str = Field(description="as injected, e.g. 截止 2026-11-28 18:00 or overdue since 2026-11-28 18:00")


class RecallResult(BaseModel):
    memories: list[RecallHit]
    injection: str = Field(description="ready to paste into the system prompt; empty when nothing is relevant")
    reminders: list[ReminderView] = Field(
        default_factory=list, description="open todos whose remind_at (or due_at) has come; also first in injection"
    )
    pending_confirmations: list[PendingView] = Field(default_factory=list)
    reinforced: list[str] = Field(
        default_factory=list, description="ids from `used` counted as having shaped your reply"
    )
    temporary: bool = Field(False, description="temporary mode: nothing was recalled or recorded")
    degraded: str | None = Field(
        None,
        description=(
            "set when a part failed and recall fell back: the path that answered ('keyword path', 'vector path' "
            "or 'user card only'), then what failed"
        ),
    )
    onboarding: str | None = Field(
        None, description="set until the user has confirmed their profile: what to ask them (once) and how to save "
        "it with update_profile",
    )


class PatchResult(BaseModel):
    status: Literal["patched", "unchanged"] = Field(
        description="unchanged: the memory already says this text; nothing was written"
    )
    memory: MemoryView
    revision_id: str | None = Field(description="the revision keeping the previous text; null when unchanged")
    previous_content: str
    redacted: list[str] = Field(default_factory=list, description="kinds of secrets removed from the patch")


class ConfirmResult(BaseModel):
    status: PendingStatus
    pending_id: str
    memory_id: str | None = None
    cooldown_until: datetime | None = None
    evicted: list[EvictedItem] = Field(
        default_factory=list, description="memories moved to the trash to stay under the cap, as add_memory lists them"
    )
    message: str


class TrashItem(BaseModel):
    id: str
    content: str
    category: Category
    deleted_at: datetime
    purge_at: datetime | None = Field(
        None, description="null only for a row stored without one (an old import): it is kept until restored"
    )
    reason: DeleteReason | None = Field(None, description="null only for a row stored without one (an old import)")

    @classmethod
    def of(cls, memory: Memory) -> TrashItem:
        """Every trashed row the store holds, even one an older import stored without its dates or reason: its
        last change stands for when it was deleted."""
        return cls(
            id=memory.id,
            content=memory.content,
            category=memory.category,
            deleted_at=memory.deleted_at or memory.updated_at,
            purge_at=memory.purge_at,
            reason=memory.delete_reason,
        )


class TrashList(BaseModel):
    items: list[TrashItem]
    total: int


class ForgetResult(BaseModel):
    item: TrashItem
    current_again: str | None = Field(
        None,
        description="id of the memory the forgotten one had replaced, current again (the forgotten one was the "
        "current version of a supersedes chain)",
    )
    message: str


class RestoreResult(BaseModel):
    memory: MemoryView
    superseded: str | None = Field(
        None, description="id of the memory the restored one replaces again (it had been current while it was away)"
    )
    evicted: list[EvictedItem] = Field(default_factory=list)
    message: str


class MemoryList(BaseModel):
    items: list[MemoryView | PendingView]
    total: int
    counts: dict[str, int] = Field(
        default_factory=dict,
        description="matching memories per category (status, text, since and until applied; category not); "
        "proposed profile changes have none and are not counted",
    )


class MarkResult(BaseModel):
    memory: MemoryView
    action: Literal["complete", "reopen", "promote", "keep", "forget"]
    message: str
