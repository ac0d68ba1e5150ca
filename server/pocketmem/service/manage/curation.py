"""Changes a person makes by hand on the management page that the tools do not already offer.

    revise    a new version of a memory: add_memory with supersedes (the old one stays as history);
              category, keywords, scores, dates and a todo's completion carry over (`_new_version`, the one
              rule for what a new version inherits). Text that is the memory's own (the same once normalised,
              as the duplicate rule reads it) is `unchanged`: nothing is written or reinforced. A core memory
              is patched instead.
    rescore   change the category and/or the E/I/P/J scores of an active memory: importance is
              recomputed at once, one `rescored` event with the memory id records before and after.
              Raising persistence to 1 makes it core, unless its category is short-lived (a todo, episode or
              context: core/scoring.py may_be_core), which is refused; lowering it from 1 puts it under the
              cap again.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import Conflict, ConflictReason, InvalidInput, InvalidReason, NotFound
from pocketmem.base.models import Category, EventKind, Memory, Scores, Status
from pocketmem.base.results import AddResult, EvictedItem, MemoryView
from pocketmem.core.scoring import importance, is_core, may_be_core
from pocketmem.core.text import content_hash
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.service.writing.writing import Writing
from pocketmem.store.base import Transactions

SCORE_NAMES = ("emotion", "info", "persistence", "judge")
UI_SOURCE = "ui"


class ReviseResult(BaseModel):
    status: Literal["unchanged", "stored", "pending", "discarded", "duplicate"] = Field(
        description="unchanged: the text is the memory's own, nothing was written; otherwise add_memory's status"
    )
    added: AddResult | None = Field(None, description="add_memory's answer; none when unchanged")


class RescoreResult(BaseModel):
    memory: MemoryView
    evicted: list[EvictedItem]
    message: str


class Curation:
    def __init__(self, settings: Settings, store: Transactions, clock: Clock, writing: Writing) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.writing = writing

    async def revise(self, user_id: str, memory_id: str, content: str) -> ReviseResult:
        async with self.store.read() as reader:
            old = await reader.get_memory(user_id, memory_id)
        if old is None:
            raise NotFound(f"memory_id: no memory with id {memory_id!r}")
        request = self.writing.clean(_new_version(old, content))
        if old.status == Status.active and content_hash(request.content) == old.content_hash:
            return ReviseResult(status="unchanged")  # a person's unchanged save is not the user saying it again
        added = await self.writing.add(user_id, request)
        return ReviseResult(status=added.status, added=added)

    async def rescore(
        self, user_id: str, memory_id: str, category: Category | None, scores: dict[str, float | None] | None
    ) -> RescoreResult:
        given = {k: v for k, v in (scores or {}).items() if v is not None}
        for name, value in given.items():
            if name not in SCORE_NAMES:
                raise InvalidInput(f"scores.{name}", f"unknown score; use {', '.join(SCORE_NAMES)}")
            if not 0.0 <= value <= 1.0:
                raise InvalidInput(f"scores.{name}", "must be between 0 and 1", InvalidReason.between, low=0, high=1)
        now = self.clock.now()
        async with self.store.write(user_id=user_id) as tx:
            memory = await tx.get_memory(user_id, memory_id)
            if memory is None:
                raise NotFound(f"memory_id: no memory with id {memory_id!r}")
            if memory.status != Status.active:
                raise Conflict(
                    f"memory {memory_id} is {memory.status.value}; only an active memory can be rescored",
                    ConflictReason.not_active, status=memory.status.value,
                )
            new_scores = Scores(**{**memory.scores.model_dump(), **given})
            new_category = category or memory.category
            if is_core(new_scores) and not may_be_core(new_category):
                raise Conflict(
                    f"scores.persistence: a {new_category.value} is short-lived and never a core memory (persistence "
                    "1); give it a persistence below 1, or another category",
                    ConflictReason.never_core, category=new_category.value,
                )
            if new_scores == memory.scores and new_category == memory.category:
                return RescoreResult(memory=MemoryView.of(memory), evicted=[], message="Nothing changed.")
            info, coef, current = importance(new_scores, memory.last_active_at or memory.created_at, now)
            fields: dict[str, Any] = {**new_scores.model_dump(), "category": new_category}
            await tx.update_memory(
                user_id, memory_id, **fields, info_importance=info, time_coef=coef, importance=current,
                updated_at=now,
            )
            await tx.add_event(
                user_id, EventKind.rescored, now, memory_id=memory_id,
                payload={
                    "by": UI_SOURCE,
                    "before": {**memory.scores.model_dump(), "category": memory.category.value},
                    "after": {**new_scores.model_dump(), "category": new_category.value},
                },
            )
            evicted = await self.writing.trash.enforce_cap(tx, user_id, now, keep=[memory_id])
            updated = await tx.get_memory(user_id, memory_id)
        assert updated is not None
        return RescoreResult(memory=MemoryView.of(updated, current), evicted=evicted, message="Rescored.")


def _new_version(old: Memory, content: str) -> AddRequest:
    """What a new version of `old` inherits: its category, keywords, scores, expiry and, for a todo, its due and
    remind times and whether it is done; stated by the person (confidence 1, source ui), superseding `old`."""
    todo = old.category == Category.todo  # only a todo is reminded; another keeps no due time it was given once
    return AddRequest(
        content=content, category=old.category, keywords=old.keywords, scores=old.scores.model_dump(),
        confidence=1.0, supersedes=old.id, due_at=old.due_at if todo else None,
        remind_at=old.remind_at if todo else None, expires_at=old.expires_at,
        completed_at=old.completed_at if todo else None, source=UI_SOURCE,
    )
