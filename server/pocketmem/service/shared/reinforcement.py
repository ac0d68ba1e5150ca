"""Reinforcement: a memory that shaped the agent's reply counts as used (docs/how-it-decides.md,
"Reinforcement and review").

    used   used_count += 1, last_active_at = now, and for a non-core memory J += USED_JUDGE_BOOST
           (max 1), so its info_importance rises by 0.2 * USED_JUDGE_BOOST = 0.02 per use

The one rule behind both recall_memories(used=[...]) and remember_conversation's BOOST.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import anyio

from pocketmem.base.models import EventKind, Scores, Status
from pocketmem.core.scoring import info_importance
from pocketmem.store.base import Transactions
from pocketmem.store.roles import MemoryTx

log = logging.getLogger(__name__)

USED_JUDGE_BOOST = 0.1


async def record_used(tx: MemoryTx, user_id: str, memory_ids: Sequence[str], now: datetime) -> list[str]:
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


class UseLedger:
    """Recall's bookkeeping: hits counted as recalled (use_count += 1, last_active_at = now) and the
    `recalled` / `retrieval_fail` events.

    Written with each recall by default. A server defers it (`deferred = True`): recall answers first,
    the entries wait here and are written together, one transaction per flush, by a timer
    (POCKETMEM_USE_FLUSH_INTERVAL), when MAX_PENDING recalls are waiting, and on a clean shutdown
    (PocketMem.close), so a clean shutdown loses none. A process killed outright loses at most the
    last interval's counts; these writes never waited for the disk anyway (synchronous=NORMAL).
    Counts add to what is stored (`use_count + n`), so several processes on one database add up.
    A flush that fails keeps its entries for the next one.
    """

    MAX_PENDING = 512

    def __init__(self, store: Transactions) -> None:
        self.store = store
        self.deferred = False
        self._uses: dict[str, dict[str, tuple[int, datetime]]] = {}  # user -> memory -> (count, last recalled)
        self._events: list[tuple[str, EventKind, datetime, dict[str, object]]] = []
        self._flushing = asyncio.Lock()

    @property
    def pending(self) -> int:
        return len(self._events)

    async def record(self, user_id: str, memory_ids: Sequence[str], failures: Sequence[str], now: datetime) -> None:
        """Count `memory_ids` as recalled at `now` and log `failures`; later when deferred."""
        events: list[tuple[str, EventKind, datetime, dict[str, object]]] = []
        if memory_ids:
            events.append((user_id, EventKind.recalled, now, {"ids": list(memory_ids)}))
        events += [(user_id, EventKind.retrieval_fail, now, {"error": f}) for f in failures]
        if not events:
            return
        self._add(user_id, memory_ids, now, events)
        if not self.deferred or len(self._events) >= self.MAX_PENDING:
            await self.flush()

    def _add(self, user_id: str, memory_ids: Sequence[str], now: datetime, events: list[Any]) -> None:
        uses = self._uses.setdefault(user_id, {})
        for memory_id in memory_ids:
            count, last = uses.get(memory_id, (0, now))
            uses[memory_id] = (count + 1, max(last, now))
        self._events += events

    async def flush(self) -> int:
        """Write what is waiting in one transaction; returns the number of recalls and failures written."""
        async with self._flushing:
            uses, events = self._uses, self._events
            if not events:
                return 0
            self._uses, self._events = {}, []
            try:
                async with self.store.write_short(durable=False) as tx:
                    await tx.lock_users([*uses, *(event[0] for event in events)])
                    for user_id, counted in uses.items():
                        groups: dict[tuple[int, datetime], list[str]] = {}
                        for memory_id, key in counted.items():
                            groups.setdefault(key, []).append(memory_id)
                        for (count, last), ids in groups.items():
                            await tx.touch(user_id, ids, last, by=count)
                    for user_id, kind, when, payload in events:
                        await tx.add_event(user_id, kind, when, payload=payload)
            except BaseException:
                self._restore(uses, events)
                raise
            return len(events)

    def _restore(self, uses: dict[str, dict[str, tuple[int, datetime]]], events: list[Any]) -> None:
        """Put back entries a failed flush did not write, ahead of those recorded meanwhile."""
        for user_id, counted in uses.items():
            mine = self._uses.setdefault(user_id, {})
            for memory_id, (count, last) in counted.items():
                other, other_last = mine.get(memory_id, (0, last))
                mine[memory_id] = (count + other, max(last, other_last))
        self._events = events + self._events

    async def run_periodically(self, interval: float) -> None:
        while True:
            await anyio.sleep(interval)
            try:
                await self.flush()
            except Exception:  # noqa: BLE001 - kept for the next flush; the timer goes on
                log.warning("could not write recall bookkeeping; retrying at the next flush", exc_info=True)
