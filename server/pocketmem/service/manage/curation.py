"""Changes a person makes by hand on the management page that the tools do not already offer.

    revise    a new version of a memory: add_memory with supersedes (the old one stays as history);
              category, keywords, scores and dates carry over. A core memory is patched instead.
    rescore   change the category and/or the E/I/P/J scores of an active memory: importance is
              recomputed at once, one `rescored` event with the memory id records before and after.
              Raising persistence to 1 makes it core; lowering it from 1 puts it under the cap again.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import Conflict, InvalidInput, NotFound
from pocketmem.base.models import Category, EventKind, Scores, Status
from pocketmem.base.results import AddResult, EvictedItem, MemoryView
from pocketmem.core.scoring import importance
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.service.writing.writing import Writing
from pocketmem.store.base import Transactions

SCORE_NAMES = ("emotion", "info", "persistence", "judge")
UI_SOURCE = "ui"


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

    async def revise(self, user_id: str, memory_id: str, content: str) -> AddResult:
        async with self.store.read() as reader:
            old = await reader.get_memory(user_id, memory_id)
        if old is None:
            raise NotFound(f"memory_id: no memory with id {memory_id!r}")
        todo = old.category == Category.todo  # only a todo is reminded; another keeps no due time it was given once
        request = AddRequest(
            content=content, category=old.category, keywords=old.keywords, scores=old.scores.model_dump(),
            confidence=1.0, supersedes=memory_id, due_at=old.due_at if todo else None,
            remind_at=old.remind_at if todo else None, expires_at=old.expires_at, source=UI_SOURCE,
        )
        return await self.writing.add(user_id, request)

    async def rescore(
        self, user_id: str, memory_id: str, category: Category | None, scores: dict[str, float | None] | None
    ) -> RescoreResult:
        given = {k: v for k, v in (scores or {}).items() if v is not None}
        for name, value in given.items():
            if name not in SCORE_NAMES:
                raise InvalidInput(f"scores.{name}", f"unknown score; use {', '.join(SCORE_NAMES)}")
            if not 0.0 <= value <= 1.0:
                raise InvalidInput(f"scores.{name}", "must be between 0 and 1")
        now = self.clock.now()
        async with self.store.write(user_id=user_id) as tx:
            memory = await tx.get_memory(user_id, memory_id)
            if memory is None:
                raise NotFound(f"memory_id: no memory with id {memory_id!r}")
            if memory.status != Status.active:
                raise Conflict(f"memory {memory_id} is {memory.status.value}; only an active memory can be rescored")
            new_scores = Scores(**{**memory.scores.model_dump(), **given})
            new_category = category or memory.category
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
