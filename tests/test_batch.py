"""Several write-path steps in one transaction, and reinforcement (BOOST), on a real SQLite file."""

from __future__ import annotations

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.errors import Conflict, InvalidInput
from pocketmem.base.models import EventKind, Status
from pocketmem.service.shared.reinforcement import record_used
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.service.writing.batch import AddStep, ForgetStep, PatchStep, ReinforceStep, apply_batch

from .scripted_llm import snapshot

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"


async def add(app: PocketMem, content: str, **kw) -> str:
    result = await app.writing.add(USER, AddRequest(content=content, **kw))
    assert result.memory_id is not None
    return result.memory_id


async def get(app: PocketMem, memory_id: str):
    async with app.store.read() as r:
        return await r.get_memory(USER, memory_id)


async def test_steps_follow_the_single_call_rules(app, clock):
    core = await add(app, "你很爱吃辣。", category="preference", scores={"persistence": 1})
    home = await add(app, "用户住在北京")
    tea = await add(app, "用户喜欢喝乌龙茶", category="preference")
    late = await add(app, "用户今晚要加班", category="context")
    clock.advance(days=3)
    batch = await apply_batch(app.writing, app.patching, USER, [
        AddStep(AddRequest(content="用户搬到杭州了", supersedes=home, confidence=0.95)),
        PatchStep(core, "最近胃炎，暂时不吃辣"),
        ReinforceStep((tea,)),
        ForgetStep(late, "不用加班了"),
        AddStep(AddRequest(content="用户可能在减肥", confidence=0.7)),
        AddStep(AddRequest(content="用户也许会开飞机", confidence=0.3)),
        AddStep(AddRequest(content="用户喜欢喝乌龙茶。", confidence=0.9)),
    ])
    moved, patched, reinforced, forgotten, pending, discarded, duplicate = batch.results
    assert moved.status == "stored" and moved.superseded == home
    assert patched.memory.content == "你很爱吃辣。（2026-11-29：最近胃炎，暂时不吃辣）"
    assert reinforced == [tea]
    assert forgotten.item.reason == "user_delete"
    assert (pending.status, discarded.status, duplicate.status) == ("pending", "discarded", "duplicate")
    assert (await get(app, home)).status == Status.superseded
    assert (await get(app, late)).status == Status.trashed
    tea_now = await get(app, tea)
    # The BOOST counts as a use (judgement +0.1); the duplicate adds a recall-style touch.
    assert tea_now.use_count == 1 and tea_now.last_active_at == clock.now()
    assert tea_now.scores.judge > 0.85


async def test_a_failing_step_rolls_back_the_whole_batch(app):
    home = await add(app, "用户住在北京")
    gone = await add(app, "用户今晚要加班")
    await app.trash.forget(USER, gone, None)
    before = await snapshot(app)
    with pytest.raises(Conflict, match="already in the trash"):
        await apply_batch(app.writing, app.patching, USER, [
            AddStep(AddRequest(content="用户搬到杭州了", supersedes=home)),
            AddStep(AddRequest(content="用户可能在减肥", confidence=0.7)),
            ReinforceStep((home,)),
            ForgetStep(gone),
        ])
    assert await snapshot(app) == before


async def test_bad_input_fails_before_anything_is_written(app):
    home = await add(app, "用户住在北京")
    before = await snapshot(app)
    with pytest.raises(InvalidInput, match=r"content: must not be empty"):
        await apply_batch(app.writing, app.patching, USER, [ReinforceStep((home,)), AddStep(AddRequest(content="  "))])
    with pytest.raises(Conflict, match="not a core memory"):
        await apply_batch(app.writing, app.patching, USER, [ReinforceStep((home,)), PatchStep(home, "搬家了")])
    assert await snapshot(app) == before


async def test_the_cap_is_enforced_once_and_spares_the_batch(tmp_path, clock, make_settings):
    app = PocketMem(make_settings(tmp_path, max_active=3), clock=clock)
    async with app:
        old = []
        for i in range(3):
            old.append(await add(app, f"用户的第{i}个事实", category="fact"))
            clock.advance(days=1)
        # Two low-importance memories: enforcing the cap after each step would evict the first one
        # to make room for the second; the batch keeps both and evicts the two oldest facts.
        batch = await apply_batch(app.writing, app.patching, USER, [
            AddStep(AddRequest(content="用户在咖啡馆", category="context")),
            AddStep(AddRequest(content="用户在等朋友", category="context")),
        ])
        assert [e.id for e in batch.evicted] == old[:2]
        async with app.store.read() as r:
            assert await r.count_active(USER) == 3
            kept = await r.get_memories(USER, [res.memory_id for res in batch.results])
        assert [m.status for m in kept] == [Status.active, Status.active]


async def test_reinforce_counts_uses_and_refreshes_the_decay_clock(app, clock):
    tea = await add(app, "用户喜欢喝乌龙茶", category="preference")
    gone = await add(app, "用户今晚要加班", category="context")
    await app.trash.forget(USER, gone, None)
    clock.advance(days=40)
    before = await get(app, tea)
    async with app.store.write(user_id=USER) as tx:
        assert await record_used(tx, USER, [tea, gone, "nope"], app.clock.now()) == [tea]
    memory = await get(app, tea)
    # The "used" rule (reinforcement.py): activity refreshed, judgement raised by 0.1.
    assert memory.last_active_at == clock.now()
    assert memory.scores.judge == pytest.approx(before.scores.judge + 0.1)
    async with app.store.read() as r:
        [event] = await r.list_events(USER, kinds=[EventKind.used])
        usage = await r.usage(USER, [tea])
    assert event.payload == {"ids": [tea]}
    assert usage[tea].used_count == 1
    listed = await app.listing.list_memories(USER, category=None, status="active", text=None, limit=10, offset=0)
    # last_active_at is today again, so the time coefficient is back to 1
    assert listed.items[0].importance == pytest.approx(memory.info_importance, abs=1e-4)
