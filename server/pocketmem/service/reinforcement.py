"""Reinforcement: a memory that shaped the agent's reply counts as used (seed 001's BOOST).

    used   used_count += 1, last_active_at = now, and for a non-core memory J += USED_JUDGE_BOOST
           (max 1), so its info_importance rises by 0.2 * USED_JUDGE_BOOST = 0.02 per use

The one rule behind both recall_memories(used=[...]) and remember_conversation's BOOST.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pocketmem.base.models import EventKind, Scores, Status
from pocketmem.core.scoring import info_importance
from pocketmem.store import StoreWriter

USED_JUDGE_BOOST = 0.1


async def record_used(tx: StoreWriter, user_id: str, memory_ids: Sequence[str], now: datetime) -> list[str]:
    """Count memories as having shaped the agent's reply; ids that are not active memories are skipped."""
    wanted = list(dict.fromkeys(memory_ids))
    memories = [m for m in await tx.get_memories(user_id, wanted) if m.status == Status.active]
    if not memories:
        return []
    ids = [m.id for m in memories]
    await tx.add_uses(user_id, ids, now)
    for memory in memories:
        fields: dict[str, object] = {"last_active_at": now, "time_coef": 1.0}
        if memory.core:
            fields["importance"] = memory.info_importance
        else:
            boosted = Scores(
                **{**memory.scores.model_dump(), "judge": min(1.0, memory.scores.judge + USED_JUDGE_BOOST)}
            )
            info = info_importance(boosted)
            fields.update(judge=boosted.judge, info_importance=info, importance=info)
        await tx.update_memory(user_id, memory.id, **fields)
    await tx.add_event(user_id, EventKind.used, now, payload={"ids": ids})
    return ids
