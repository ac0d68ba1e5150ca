"""The rules the store's SQL applies come from core/scoring.py: eviction order, the core rule, expiry."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.models import Category
from pocketmem.core import scoring
from pocketmem.service.lifecycle import AddRequest

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"

# (content, persistence, info, days since last active): importance orders differ from info importance orders
# once time has passed, and one memory sits exactly at the core threshold.
ROWS = [
    ("用户住在杭州", 0.9, 0.9, 200),
    ("用户喜欢爬山", 0.1, 0.9, 200),
    ("用户的猫叫小白", 0.5, 0.6, 5),
    ("用户在学钢琴", 0.2, 0.7, 40),
    ("用户下周去上海", 0.0, 0.8, 100),
    ("用户不吃香菜", scoring.CORE_PERSISTENCE, 0.5, 300),
]


async def fill(app: PocketMem, clock) -> dict[str, str]:
    ids = {}
    start = clock.now()
    for content, persistence, info, days in ROWS:
        clock.set(start - timedelta(days=days))
        scores = {"persistence": persistence, "info": info, "emotion": 0.3, "judge": 0.5}
        result = await app.lifecycle.add(USER, AddRequest(content=content, category=Category.fact, scores=scores))
        ids[content] = result.memory_id
    clock.set(start)
    return ids


async def test_eviction_order_is_the_current_importance_of_scoring_py(app, clock):
    ids = await fill(app, clock)
    now = clock.now()
    async with app.store.read() as r:
        memories = await r.get_memories(USER, list(ids.values()))
        candidates = await r.eviction_candidates(USER, 10, now, exclude=[])
    expected = sorted(
        (m for m in memories if not scoring.is_core(m.scores)),
        key=lambda m: scoring.importance(m.scores, m.last_active_at or m.created_at, now)[2],
    )
    assert [m.id for m in candidates] == [m.id for m in expected]
    assert ids["用户不吃香菜"] not in {m.id for m in candidates}  # core: never evicted
    # Time matters: the order is not that of the stored info importance alone.
    by_info = sorted(expected, key=lambda m: m.info_importance)
    assert [m.id for m in by_info] != [m.id for m in expected]


async def test_the_core_rule_is_scorings(app, clock):
    ids = await fill(app, clock)
    async with app.store.read() as r:
        core = await r.core_memories(USER, 10)
        stats = await r.stats(USER)
    assert [m.id for m in core] == [ids["用户不吃香菜"]]
    assert stats.core == 1
