"""Reinforcement and review (docs/how-it-decides.md, "Reinforcement and review"), with the agent as the reviewer.

Reinforcement:
    recalled   every recall hit: use_count += 1, last_active_at = now (its decay restarts)
    used       the agent says a recalled memory shaped its reply (recall_memories `used`):
               used_count += 1, last_active_at = now, and for a non-core memory J += USED_JUDGE_BOOST
               (max 1), so its info_importance rises by 0.2 * USED_JUDGE_BOOST = 0.02 per use

Review queue (resource memory://review); a memory is listed, never changed, until the agent decides:
    promote candidate   active, not core, not a todo / episode / context, and since its last review
                        used in >= PROMOTE_AFTER_USES replies or recalled >= PROMOTE_AFTER_RECALLS times
    decay candidate     active, not core, not an open todo, importance now < DECAY_BELOW while its
                        info_importance >= DECAY_BELOW (it fell under by decay, it was not born low)

Decisions (mark_memory):
    promote   persistence = 1: a core memory (never decays, never evicted, changed only by patch); refused for
              a todo, episode or context (core/scoring.py may_be_core: short-lived, never core)
    keep      stays as it is; its counters are marked (promotion asks again only after as many new
              uses) and it counts as active now (last_active_at = now: a decay candidate's importance
              returns to its info importance, >= 0.5, and it decays again from there)
    forget    to the trash like forget_memory (restorable for POCKETMEM_TRASH_DAYS)
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import Conflict, ConflictReason, NotFound
from pocketmem.base.models import Category, EventKind, Memory, Scores, Status, Usage
from pocketmem.base.results import MarkResult, MemoryView
from pocketmem.core import privacy
from pocketmem.core.scoring import importance, info_importance, may_be_core
from pocketmem.service.writing.add_request import MAX_SOURCE_CHARS as MAX_REASON_CHARS
from pocketmem.service.writing.trash import Trash
from pocketmem.store.base import Transactions

PROMOTE_AFTER_USES = 3
PROMOTE_AFTER_RECALLS = 10
DECAY_BELOW = 0.5
QUEUE_LIMIT = 20
SCAN_BATCH = 500

INSTRUCTIONS = f"""\
Review these memories with the user's interests in mind, one decision per memory, with mark_memory.

Promotion candidates keep being used. Promote (action "promote") only what is a long-term, stable fact
about the user: their name, birthday, lasting likes and dislikes, chronic conditions, important
agreements. Do not promote temporary states ("tired today"), short-term plans, or things that were
merely a frequent topic lately; answer "keep" for those.

Decay candidates have lost importance (below {DECAY_BELOW}) because they were not used. Ask yourself:
is it still worth knowing? Has a newer memory replaced it? Would forgetting it make you forget something
that matters to the user? If it still matters, "keep" (it counts as fresh again); if not, "forget" (it
goes to the trash and can be restored for a while).

Nothing here changes until you decide. When unsure, keep. Ask the user when it is about them and unclear."""


class ReviewItem(BaseModel):
    id: str
    content: str
    category: Category
    importance: float
    info_importance: float
    use_count: int = Field(description="times recalled")
    used_count: int = Field(description="times it shaped a reply")
    last_active_at: datetime | None
    why: str


class ReviewQueue(BaseModel):
    instructions: str
    promote: list[ReviewItem]
    decay: list[ReviewItem]


def promotion_reason(memory: Memory, usage: Usage | None) -> str | None:
    if memory.core or not may_be_core(memory.category):
        return None
    used = (usage.used_count - usage.used_mark) if usage else 0
    recalled = memory.use_count - (usage.recalled_mark if usage else 0)
    if used >= PROMOTE_AFTER_USES:
        return f"shaped {used} replies since it was last reviewed"
    if recalled >= PROMOTE_AFTER_RECALLS:
        return f"recalled {recalled} times since it was last reviewed"
    return None


def decay_reason(memory: Memory, now: datetime) -> str | None:
    if memory.core or (memory.category == Category.todo and memory.completed_at is None):
        return None
    info, _, current = importance(memory.scores, memory.last_active_at or memory.created_at, now)
    if current < DECAY_BELOW <= info:
        return f"importance fell to {current:.2f} (< {DECAY_BELOW}) from {info:.2f}"
    return None


class Review:
    def __init__(self, settings: Settings, store: Transactions, clock: Clock, trash: Trash) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.trash = trash

    async def queue(self, user_id: str, limit: int = QUEUE_LIMIT) -> ReviewQueue:
        now = self.clock.now()
        promote: list[tuple[int, ReviewItem]] = []
        decay: list[ReviewItem] = []
        after: str | None = None
        async with self.store.read() as reader:
            usages = await reader.usage(user_id)
            while True:
                batch = await reader.scan_memories(user_id, (Status.active,), after, SCAN_BATCH)
                for memory in batch:
                    usage = usages.get(memory.id)
                    if why := promotion_reason(memory, usage):
                        promote.append(
                            (
                                -(usage.used_count if usage else 0) * 100 - memory.use_count,
                                self._item(memory, usage, why, now),
                            )
                        )
                    elif why := decay_reason(memory, now):
                        decay.append(self._item(memory, usage, why, now))
                if len(batch) < SCAN_BATCH:
                    break
                after = batch[-1].id
        promote.sort(key=lambda pair: pair[0])
        decay.sort(key=lambda item: item.importance)
        return ReviewQueue(
            instructions=INSTRUCTIONS, promote=[i for _, i in promote][:limit], decay=decay[:limit]
        )

    @staticmethod
    def _item(memory: Memory, usage: Usage | None, why: str, now: datetime) -> ReviewItem:
        info, _, current = importance(memory.scores, memory.last_active_at or memory.created_at, now)
        return ReviewItem(
            id=memory.id,
            content=memory.content,
            category=memory.category,
            importance=round(current, 4),
            info_importance=round(info, 4),
            use_count=memory.use_count,
            used_count=usage.used_count if usage else 0,
            last_active_at=memory.last_active_at,
            why=why,
        )

    async def decide(
        self, user_id: str, memory_id: str, decision: Literal["promote", "keep", "forget"], reason: str | None
    ) -> MarkResult:
        if reason is not None:
            reason = privacy.kept_text(reason, "reason", max_chars=MAX_REASON_CHARS)
        if decision == "forget":
            forgotten = await self.trash.forget(
                user_id, memory_id, f"review: {reason}" if reason else "review"
            )
            async with self.store.read() as reader:
                trashed = await reader.get_memory(user_id, memory_id)
            assert trashed is not None
            return MarkResult(memory=MemoryView.of(trashed), action="forget", message=forgotten.message)
        now = self.clock.now()
        async with self.store.write(user_id=user_id) as tx:
            memory = await tx.get_memory(user_id, memory_id)
            if memory is None:
                raise NotFound(
                    f"memory_id: no memory with id {memory_id!r}; see the memory://review resource"
                )
            if memory.status != Status.active:
                raise Conflict(
                    f"memory {memory_id} is {memory.status.value}; only an active memory can be reviewed",
                    ConflictReason.not_active, status=memory.status.value,
                )
            if decision == "promote" and not may_be_core(memory.category):
                raise Conflict(
                    f"action: memory {memory_id} is a {memory.category.value}; a todo, episode or context is "
                    "short-lived and never promoted to a core memory: answer keep or forget",
                    ConflictReason.never_core, category=memory.category.value,
                )
            usage = (await tx.usage(user_id, [memory_id])).get(memory_id) or Usage(
                user_id=user_id, memory_id=memory_id
            )
            await tx.put_usage(
                usage.model_copy(update={"used_mark": usage.used_count, "recalled_mark": memory.use_count})
            )
            payload: dict[str, object] = {"reason": reason, "importance": round(memory.importance, 4)}
            if decision == "promote":
                if memory.core:
                    raise Conflict(f"memory {memory_id} is already a core memory")
                core = Scores(**{**memory.scores.model_dump(), "persistence": 1.0})
                info = info_importance(core)
                await tx.update_memory(
                    user_id,
                    memory_id,
                    persistence=1.0,
                    info_importance=info,
                    time_coef=1.0,
                    importance=info,
                    expires_at=None,
                    updated_at=now,
                )
                payload["persistence"] = memory.scores.persistence
                await tx.add_event(user_id, EventKind.promoted, now, memory_id=memory_id, payload=payload)
                message = "Promoted: now a core memory (never decays, never evicted; change it with patch_core_memory)."
            else:
                await tx.update_memory(
                    user_id,
                    memory_id,
                    last_active_at=now,
                    time_coef=1.0,
                    importance=memory.info_importance,
                    updated_at=now,
                )
                await tx.add_event(user_id, EventKind.kept, now, memory_id=memory_id, payload=payload)
                message = "Kept as it is; it leaves the review queue."
            updated = await tx.get_memory(user_id, memory_id)
        assert updated is not None
        return MarkResult(memory=MemoryView.of(updated), action=decision, message=message)
