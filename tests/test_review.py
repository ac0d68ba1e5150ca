"""Reinforcement (`used`) and the review queue: candidates appear, and nothing changes until the agent decides."""

from __future__ import annotations

import json

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.errors import Conflict
from pocketmem.base.models import Category, EventKind, Status
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.shared.reinforcement import USED_JUDGE_BOOST
from pocketmem.service.upkeep.review import DECAY_BELOW, PROMOTE_AFTER_RECALLS, PROMOTE_AFTER_USES
from pocketmem.service.writing.add_request import AddRequest

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"


async def add(app: PocketMem, content: str, **kw) -> str:
    result = await app.writing.add(USER, AddRequest(content=content, **kw))
    assert result.status == "stored"
    return result.memory_id


async def get(app: PocketMem, memory_id: str):
    async with app.store.read() as r:
        return await r.get_memory(USER, memory_id)


async def test_used_boosts_more_than_recalled(app, clock):
    cat = await add(app, "用户养了一只叫小白的猫", category=Category.person, keywords=["猫", "小白"])
    tea = await add(app, "用户喜欢喝乌龙茶", category=Category.preference, keywords=["茶"])
    before_cat, before_tea = await get(app, cat), await get(app, tea)
    clock.advance(days=5)
    await app.retrieval.recall(USER, RecallRequest(query="小白和乌龙茶", keywords=["猫", "茶"]))
    recalled_cat, recalled_tea = await get(app, cat), await get(app, tea)
    assert recalled_cat.use_count == recalled_tea.use_count == 1
    assert recalled_tea.scores == before_tea.scores  # a recall restarts decay; it does not raise the scores

    clock.advance(minutes=1)
    result = await app.retrieval.recall(USER, RecallRequest(query="今天天气", used=[cat, "no-such-id"]))
    assert result.reinforced == [cat]
    used_cat = await get(app, cat)
    assert used_cat.scores.judge == pytest.approx(before_cat.scores.judge + USED_JUDGE_BOOST)
    assert used_cat.info_importance == pytest.approx(before_cat.info_importance + 0.2 * USED_JUDGE_BOOST)
    assert used_cat.last_active_at == clock.now() and used_cat.time_coef == 1.0
    async with app.store.read() as r:
        assert (await r.usage(USER, [cat]))[cat].used_count == 1
        (event,) = await r.list_events(USER, 5, kinds=[EventKind.used])
    assert event.payload == {"ids": [cat]}


async def test_promotion_candidates_need_an_explicit_decision(app, clock):
    name = await add(app, "用户喜欢别人叫他小林", category=Category.preference, keywords=["名字", "称呼"])
    chatter = await add(app, "用户最近常聊足球", category=Category.fact, keywords=["足球"])
    chore = await add(app, "买牛奶", category=Category.todo, keywords=["牛奶"])
    for _ in range(PROMOTE_AFTER_USES):
        clock.advance(hours=1)
        await app.retrieval.recall(USER, RecallRequest(query="你好", used=[name, chatter, chore]))
    queue = await app.review.queue(USER)
    assert {i.id for i in queue.promote} == {name, chatter}  # todos are never promoted
    assert "long-term, stable fact" in queue.instructions
    clock.advance(days=60)
    assert {i.id for i in (await app.review.queue(USER)).promote} == {name, chatter}  # waiting is not deciding
    assert (await get(app, name)).core is False

    promoted = await app.review.decide(USER, name, "promote", "it is how he wants to be called")
    assert promoted.memory.core and promoted.memory.scores.persistence == 1.0
    kept = await app.review.decide(USER, chatter, "keep", "just a topic lately")
    assert kept.memory.core is False
    assert (await app.review.queue(USER)).promote == []
    with pytest.raises(Conflict, match="already a core memory"):
        await app.review.decide(USER, name, "promote", None)

    # A kept memory comes back only after as many new uses as it took the first time.
    for _ in range(PROMOTE_AFTER_USES - 1):
        await app.retrieval.recall(USER, RecallRequest(query="你好", used=[chatter]))
    assert (await app.review.queue(USER)).promote == []
    await app.retrieval.recall(USER, RecallRequest(query="你好", used=[chatter]))
    assert [i.id for i in (await app.review.queue(USER)).promote] == [chatter]


async def test_many_recalls_also_make_a_candidate(app, clock):
    coffee = await add(app, "用户每天早上喝咖啡", category=Category.preference, keywords=["咖啡"])
    for _ in range(PROMOTE_AFTER_RECALLS):
        clock.advance(hours=1)
        hits = await app.retrieval.recall(USER, RecallRequest(query="来杯咖啡吧", keywords=["咖啡"]))
        assert [m.id for m in hits.memories] == [coffee]
    (item,) = (await app.review.queue(USER)).promote
    assert item.id == coffee and item.use_count == PROMOTE_AFTER_RECALLS and "recalled" in item.why


async def test_decay_candidates_keep_and_forget(app, clock):
    # info_importance 0.4*0.5 + 0.2*0.6 + 0.2*0.2 + 0.2*0.7 = 0.5: any decay takes it under 0.5.
    trip = await add(app, "用户下个月想去成都玩", category=Category.event,
                     scores={"emotion": 0.6, "info": 0.5, "persistence": 0.2, "judge": 0.7})
    gym = await add(app, "用户办了健身卡", category=Category.fact,
                    scores={"emotion": 0.6, "info": 0.5, "persistence": 0.2, "judge": 0.7})
    born_low = await add(app, "用户说今天有点累", category=Category.context)  # 0.30 from the start: never a candidate
    open_todo = await add(app, "周末收拾房间", category=Category.todo,
                          scores={"emotion": 0.6, "info": 0.5, "persistence": 0.2, "judge": 0.7})
    assert (await app.review.queue(USER)).decay == []
    clock.advance(days=3)
    queue = await app.review.queue(USER)
    assert {i.id for i in queue.decay} == {trip, gym}
    assert all(i.importance < DECAY_BELOW <= i.info_importance for i in queue.decay)
    assert born_low not in {i.id for i in queue.decay} and open_todo not in {i.id for i in queue.decay}

    kept = await app.review.decide(USER, trip, "keep", None)
    assert kept.memory.importance == pytest.approx(0.5) and kept.memory.last_active_at == clock.now()
    forgotten = await app.review.decide(USER, gym, "forget", "membership cancelled")
    assert forgotten.memory.status == Status.trashed and forgotten.memory.delete_reason == "user_delete"
    assert (await app.review.queue(USER)).decay == []
    clock.advance(days=3)
    assert [i.id for i in (await app.review.queue(USER)).decay] == [trip]  # decays again from the keep


async def test_review_through_the_client(client: Client, clock):
    added = await client.call_tool("add_memory", {"content": "用户的生日是 3 月 14 日", "keywords": ["生日"]})
    memory_id = added.structured_content["memory_id"]
    for _ in range(PROMOTE_AFTER_USES):
        clock.advance(hours=1)
        await client.call_tool("recall_memories", {"query": "在吗", "used": [memory_id]})
    queue = json.loads((await client.read_resource("memory://review")).contents[0].text)
    assert [i["id"] for i in queue["promote"]] == [memory_id] and queue["decay"] == []
    result = await client.call_tool("mark_memory", {"memory_id": memory_id, "action": "promote"})
    assert not result.is_error and result.structured_content["memory"]["core"] is True
    card = (await client.read_resource("memory://user-card")).contents[0].text
    assert "用户的生日是 3 月 14 日" in card
    wrong = await client.call_tool("mark_memory", {"memory_id": memory_id, "action": "shelve"})
    assert wrong.is_error
    missing = await client.call_tool("mark_memory", {"memory_id": "nope", "action": "keep"})
    assert missing.is_error and "no memory with id 'nope'" in missing.content[0].text


async def test_an_episode_promoted_before_promotion_refused_it_no_longer_expires(app, clock):
    talk = await add(app, "和用户约定每周日一起复盘", category=Category.episode)
    with pytest.raises(Conflict, match="never promoted to a core memory"):
        await app.review.decide(USER, talk, "promote", "a standing agreement")
    # As an earlier version promoted it: core, with no expiry.
    async with app.store.write(user_id=USER) as tx:
        await tx.update_memory(USER, talk, persistence=1.0, expires_at=None, updated_at=clock.now())
    clock.advance(days=30)
    report = await app.maintenance.run()
    assert report.users[0].expired == []
    assert (await get(app, talk)).status == Status.active
