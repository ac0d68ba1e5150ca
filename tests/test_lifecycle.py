"""The write path and a memory's life, through the service on a real SQLite file."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.errors import Conflict, EmbedderMismatch, InvalidInput, NotFound
from pocketmem.base.models import Category, DeleteReason, EventKind, Status
from pocketmem.service.writing.add_request import AddRequest

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"


async def add(app: PocketMem, content: str, **kw) -> object:
    return await app.writing.add(USER, AddRequest(content=content, **kw))


async def snapshot(app: PocketMem) -> dict:
    """Everything a rejected call must leave untouched."""
    async with app.store.read() as r:
        active, _ = await r.list_memories(USER, _flt(Status.active))
        trashed, _ = await r.list_memories(USER, _flt(Status.trashed))
        superseded, _ = await r.list_memories(USER, _flt(Status.superseded))
        pending, _ = await r.list_pending(USER, ("pending", "snoozed", "confirmed", "rejected"), 500)
        events = await r.list_events(USER, 10_000)
    return {
        "active": sorted((m.id, m.content, m.use_count) for m in active),
        "trashed": sorted(m.id for m in trashed),
        "superseded": sorted(m.id for m in superseded),
        "pending": sorted((p.id, p.status) for p in pending),
        "events": len(events),
    }


def _flt(status):
    from pocketmem.store.types import MemoryFilter

    return MemoryFilter(statuses=(status,), limit=500)


async def test_confidence_routing(app):
    stored = await add(app, "用户不喜欢香菜", confidence=0.85)
    pending = await add(app, "用户可能喜欢爵士乐", confidence=0.849)
    low_pending = await add(app, "用户也许在学吉他", confidence=0.60)
    discarded = await add(app, "用户好像会开飞机", confidence=0.599)
    assert (stored.status, pending.status, low_pending.status, discarded.status) == (
        "stored", "pending", "pending", "discarded",
    )
    assert stored.memory_id and pending.pending_id and discarded.memory_id is None
    snap = await snapshot(app)
    assert [c for _, c, _ in snap["active"]] == ["用户不喜欢香菜"]
    assert len(snap["pending"]) == 2
    async with app.store.read() as r:
        kinds = [e.kind for e in await r.list_events(USER)]
    assert EventKind.discarded in kinds and EventKind.pending in kinds


async def test_exact_duplicate_returns_existing_and_reinforces(app, clock):
    first = await add(app, "用户不喜欢香菜。", keywords=["香菜"])
    clock.advance(days=2)
    again = await add(app, "  用户不喜欢香菜 ", keywords=["coriander"])
    assert again.status == "duplicate" and again.memory_id == first.memory_id
    async with app.store.read() as r:
        memory = await r.get_memory(USER, first.memory_id)
        assert await r.count_active(USER) == 1
    assert memory.use_count == 1 and memory.last_active_at == clock.now()
    assert memory.keywords == ["香菜", "coriander"]


async def test_operation_id_makes_retries_harmless(app):
    a = await add(app, "用户的生日是3月5日", operation_id="op-1")
    before = await snapshot(app)
    b = await add(app, "用户的生日是3月5日", operation_id="op-1")
    assert b == a
    assert await snapshot(app) == before
    with pytest.raises(InvalidInput, match="operation_id: 'op-1' was already used"):
        await add(app, "另一件事", operation_id="op-1")
    assert await snapshot(app) == before


async def test_supersede_keeps_history(app, clock):
    old = await add(app, "用户喜欢用 Vue 3", category=Category.preference)
    clock.advance(days=30)
    new = await add(app, "用户现在更喜欢用 React", category=Category.preference, supersedes=old.memory_id)
    assert new.superseded == old.memory_id
    async with app.store.read() as r:
        o = await r.get_memory(USER, old.memory_id)
        n = await r.get_memory(USER, new.memory_id)
    assert o.status == Status.superseded and o.valid_until == n.valid_from == clock.now()
    assert n.supersedes == old.memory_id
    with pytest.raises(Conflict, match="only an active memory can be superseded"):
        await add(app, "第三个版本", supersedes=old.memory_id)
    with pytest.raises(NotFound, match="supersedes: no memory"):
        await add(app, "第四个版本", supersedes="nope")


async def test_core_memories_cannot_be_superseded_only_patched(app):
    core = await add(app, "你很爱吃辣。", scores={"persistence": 1.0})
    with pytest.raises(Conflict, match="patch_core_memory"):
        await add(app, "你不吃辣了", supersedes=core.memory_id)


async def test_eviction_over_the_cap_spares_core_memories(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, max_active=5)
    async with PocketMem(settings, clock=clock) as app:
        cores = [await add(app, f"核心事实{i}", scores={"persistence": 1.0, "info": 0.1}) for i in range(3)]
        low = await add(app, "不太重要的闲聊", category=Category.context)
        mid = await add(app, "用户在学日语", category=Category.goal)
        result = await add(app, "用户的猫叫小白", category=Category.person)
        assert [e.id for e in result.evicted] == [low.memory_id]
        evicted_at = clock.now()
        result2 = await add(app, "用户住在杭州", category=Category.fact)
        assert [e.id for e in result2.evicted] == [mid.memory_id]
        async with app.store.read() as r:
            assert await r.count_active(USER) == 5
            trashed = await r.get_memory(USER, low.memory_id)
            tombstones = await r.list_tombstones(USER)
        assert trashed.status == Status.trashed and trashed.delete_reason == DeleteReason.evicted
        assert trashed.purge_at == evicted_at + timedelta(days=7)
        assert {t.memory_id for t in tombstones} == {low.memory_id, mid.memory_id}
        assert all(t.reason == DeleteReason.evicted for t in tombstones)
        # Only core memories left besides the two newest: more cores are kept over the cap.
        more = [await add(app, f"核心事实{i}", scores={"persistence": 1.0}) for i in range(3, 7)]
        async with app.store.read() as r:
            active = await r.count_active(USER)
            core = await r.core_memories(USER, 100)
        assert len(core) == 7 and active == 7
        assert all(m.status == "stored" for m in more)
        assert {c.memory_id for c in cores} <= {m.id for m in core}


async def test_forget_then_restore(app, clock):
    m = await add(app, "用户讨厌下雨天")
    forgotten = await app.trash.forget(USER, m.memory_id, reason="user asked")
    assert forgotten.item.reason == DeleteReason.user_delete
    assert forgotten.item.purge_at == clock.now() + timedelta(days=7)
    trash = await app.trash.list_trash(USER, 50, 0)
    assert [i.id for i in trash.items] == [m.memory_id] and trash.total == 1
    with pytest.raises(Conflict, match="already in the trash"):
        await app.trash.forget(USER, m.memory_id, None)
    clock.advance(days=3)
    restored = await app.trash.restore(USER, m.memory_id)
    assert restored.memory.status == Status.active and restored.memory.deleted_at is None
    async with app.store.read() as r:
        tomb = await r.list_tombstones(USER)
    assert tomb[0].restored_at == clock.now()
    with pytest.raises(Conflict, match="not in the trash"):
        await app.trash.restore(USER, m.memory_id)
    with pytest.raises(NotFound):
        await app.trash.restore(USER, "missing")


async def test_restoring_a_superseded_memory_keeps_it_history(app):
    old = await add(app, "用户住在北京")
    new = await add(app, "用户搬到了上海", supersedes=old.memory_id)
    await app.trash.forget(USER, old.memory_id, None)
    restored = await app.trash.restore(USER, old.memory_id)
    assert restored.memory.status == Status.superseded
    assert new.status == "stored"


async def test_restore_and_patch_never_make_the_same_content_active_twice(app):
    """The same content is stored once: restoring a memory whose text another active memory says, or patching a
    core memory into another's text, is refused and changes nothing."""
    old = await add(app, "用户住在杭州")
    await app.trash.forget(USER, old.memory_id, None)
    again = await add(app, "用户住在杭州")
    core = await add(app, "用户喜欢喝咖啡。", scores={"persistence": 1.0})
    tea = await add(app, "用户喜欢喝茶。")
    before = await snapshot(app)
    with pytest.raises(Conflict, match=f"memory {again.memory_id} already says this and is active"):
        await app.trash.restore(USER, old.memory_id)
    with pytest.raises(Conflict, match=f"memory {tea.memory_id} already says this and is active"):
        await app.patching.patch_core(USER, core.memory_id, "用户喜欢喝茶。", "replace", None)
    assert await snapshot(app) == before
    await app.trash.forget(USER, again.memory_id, None)
    assert (await app.trash.restore(USER, old.memory_id)).memory.status == Status.active


async def test_patch_append_and_replace_keep_revisions(app, clock):
    core = await add(app, "你很爱吃辣。", scores={"persistence": 1.0})
    patched = await app.patching.patch_core(USER, core.memory_id, "最近胃炎，暂时不吃辣", "append", "user said")
    assert patched.memory.content == "你很爱吃辣。（2026-11-26：最近胃炎，暂时不吃辣）"
    assert patched.previous_content == "你很爱吃辣。"
    clock.advance(days=40)
    replaced = await app.patching.patch_core(USER, core.memory_id, "你不能吃辣。", "replace", None)
    assert replaced.memory.content == "你不能吃辣。"
    async with app.store.read() as r:
        revisions = await r.list_revisions(USER, core.memory_id)
        events = await r.list_events(USER, kinds=[EventKind.patched])
    assert [(v.previous_content, v.mode) for v in revisions] == [
        ("你很爱吃辣。", "append"),
        ("你很爱吃辣。（2026-11-26：最近胃炎，暂时不吃辣）", "replace"),
    ]
    assert len(events) == 2
    english = await add(app, "Loves spicy food.", scores={"persistence": 1.0})
    out = await app.patching.patch_core(USER, english.memory_id, "gastritis, no spice for now", "append", None)
    assert out.memory.content == "Loves spicy food. (2027-01-05: gastritis, no spice for now)"


async def test_patch_refuses_non_core(app):
    plain = await add(app, "用户在学日语")
    before = await snapshot(app)
    with pytest.raises(Conflict, match="not a core memory"):
        await app.patching.patch_core(USER, plain.memory_id, "改了", "append", None)
    with pytest.raises(NotFound):
        await app.patching.patch_core(USER, "nope", "改了", "append", None)
    assert await snapshot(app) == before


async def test_pending_confirm_reject_snooze(app, clock):
    a = await add(app, "用户可能喜欢爵士乐", confidence=0.7)
    b = await add(app, "用户也许养了狗", confidence=0.7)
    c = await add(app, "用户大概在减肥", confidence=0.7)
    again = await add(app, "用户可能喜欢爵士乐", confidence=0.7)
    assert again.pending_id == a.pending_id
    confirmed = await app.pending.confirm_pending(USER, a.pending_id, "confirm", None)
    assert confirmed.memory_id
    rejected = await app.pending.confirm_pending(USER, b.pending_id, "reject", None)
    assert rejected.status == "rejected"
    snoozed = await app.pending.confirm_pending(USER, c.pending_id, "snooze", 2)
    assert snoozed.cooldown_until == clock.now() + timedelta(hours=2)
    async with app.store.read() as r:
        assert [p.id for p in await r.due_pending(USER, clock.now(), 10)] == []
        assert [p.id for p in await r.due_pending(USER, clock.now() + timedelta(hours=3), 10)] == [c.pending_id]
        memory = await r.get_memory(USER, confirmed.memory_id)
    assert memory.content == "用户可能喜欢爵士乐" and memory.confidence == 1.0
    with pytest.raises(Conflict, match="already confirmed"):
        await app.pending.confirm_pending(USER, a.pending_id, "confirm", None)
    with pytest.raises(InvalidInput, match="snooze_hours"):
        await app.pending.confirm_pending(USER, c.pending_id, "snooze", 0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"content": ""}, "content: must not be empty"),
        ({"content": "x" * 2001}, "content: is 2001 characters"),
        ({"content": "ok", "scores": {"info": 1.5}}, "scores.info: must be between 0 and 1"),
        ({"content": "ok", "scores": {"mood": 0.5}}, "scores.mood: unknown score"),
        ({"content": "ok", "confidence": -0.1}, "confidence: must be between 0 and 1"),
        ({"content": "ok", "keywords": ["k"] * 13}, "keywords: at most 12"),
        ({"content": "ok", "keywords": [""]}, r"keywords\[0\]: must not be empty"),
    ],
)
async def test_bad_input_is_named_and_changes_nothing(app, kwargs, message):
    await add(app, "已有的记忆")
    before = await snapshot(app)
    with pytest.raises(InvalidInput, match=message):
        await app.writing.add(USER, AddRequest(**kwargs))
    assert await snapshot(app) == before


async def test_episodes_expire_after_fourteen_days(app, clock):
    ep = await add(app, "聊了下周二的面试准备", category=Category.episode)
    async with app.store.read() as r:
        memory = await r.get_memory(USER, ep.memory_id)
    assert memory.expires_at == clock.now() + timedelta(days=14)


async def test_users_are_isolated(app):
    mine = await add(app, "我的秘密")
    other = await app.writing.add("alice", AddRequest(content="alice 的秘密"))
    with pytest.raises(NotFound):
        await app.trash.forget("alice", mine.memory_id, None)
    with pytest.raises(NotFound):
        await app.trash.forget(USER, other.memory_id, None)
    listed = await app.listing.list_memories(USER, category=None, status="active", text=None, limit=50, offset=0)
    assert [m.content for m in listed.items] == ["我的秘密"]


async def test_store_made_by_another_embedder_is_refused(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as app:
        await add(app, "用户不喜欢香菜")
        await app.store.set_meta("embedder", "openai:text-embedding-3-small")
    with pytest.raises(EmbedderMismatch, match="pocketmem reindex"):
        await PocketMem(settings, clock=clock).open(serving=True)
    async with PocketMem(settings, clock=clock) as app:  # another command reads it by its words, changing nothing
        result = await app.retrieval.recall(USER, _recall("香菜"))
        assert [m.content for m in result.memories] == ["用户不喜欢香菜"]
        assert result.degraded is not None and "pocketmem reindex" in result.degraded
        assert await app.store.get_meta("embedder") == "openai:text-embedding-3-small"
    fixer = PocketMem(settings, clock=clock)
    await fixer.open()
    try:
        assert await fixer.reindex() == 1
    finally:
        await fixer.close()
    async with PocketMem(settings, clock=clock) as app:
        result = await app.retrieval.recall(USER, _recall("香菜"))
        assert [m.content for m in result.memories] == ["用户不喜欢香菜"]


def _recall(query: str, **kw):
    from pocketmem.service.recall.retrieval import RecallRequest

    return RecallRequest(query=query, **kw)


async def test_data_survives_reopening(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as app:
        m = await add(app, "用户的猫叫小白")
    async with PocketMem(settings, clock=clock) as app:
        async with app.store.read() as r:
            assert (await r.get_memory(USER, m.memory_id)).content == "用户的猫叫小白"


async def test_indexes_and_counters_agree_with_the_memories_table(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, max_active=4)
    async with PocketMem(settings, clock=clock) as app:
        ids = [(await add(app, f"记忆{i}", category=Category.context)).memory_id for i in range(6)]
        new = await add(app, "新版本", supersedes=ids[-1])
        await app.trash.forget(USER, new.memory_id, None)
        trash = await app.trash.list_trash(USER, 50, 0)
        await app.trash.restore(USER, trash.items[-1].id)
        await app.writing.add("alice", AddRequest(content="alice 的记忆"))
        health = await app.store.health()
        async with app.store.read() as r:
            assert await r.count_active(USER) == 4 and await r.count_active("alice") == 1
    assert health["integrity"] == "ok"
    assert (health["keyword_orphans"], health["vector_mismatches"], health["count_mismatches"]) == (0, 0, 0)
    assert health["memories"] == health["keyword_rows"] == health["vector_rows"]


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ("用户不喜欢香菜。", "香菜，用户不喜欢", True),  # same words, other order and punctuation
        ("用户不喜欢香菜，吃到会很反感。", "用户不喜欢香菜", True),  # says less than what is known
        ("The user prefers TypeScript strict mode.", "User prefers TypeScript strict mode", True),
        ("用户不喜欢香菜", "用户喜欢香菜", False),  # negation
        ("用户每周跑步3次", "用户每周跑步5次", False),  # numbers
        ("用户不喜欢香菜", "用户不喜欢香菜，吃到会很反感", False),  # adds a detail
        ("用户喜欢猫，不喜欢狗", "用户不喜欢猫", False),  # same characters, other meaning
        ("用户喜欢猫", "用户喜欢狗", False),
        ("I do not like tea", "I like tea", False),
    ],
)
async def test_near_duplicates(app, first, second, same):
    a = await add(app, first)
    b = await add(app, second)
    if same:
        assert (b.status, b.memory_id) == ("duplicate", a.memory_id)
    else:
        assert b.status == "stored" and b.memory_id != a.memory_id


async def test_dates_without_an_offset_are_in_the_users_zone_and_far_years_are_refused(app):
    from datetime import datetime

    naive = datetime(2026, 11, 20, 9, 30)
    stored = await add(app, "用户上周五面试了字节", created_at=naive, valid_from=naive)
    memory = (await app.get_memory(USER, stored.memory_id))
    assert memory["created_at"].startswith("2026-11-20T01:30:00")  # 09:30 in Asia/Shanghai
    before = await snapshot(app)
    for field, value in (("due_at", datetime(1, 1, 1)), ("expires_at", datetime(9999, 12, 31, 23, 59))):
        with pytest.raises(InvalidInput, match=f"{field}: must be between the years 1000 and 9000"):
            await add(app, "用户要交房租", category=Category.todo, **{field: value})
    assert await snapshot(app) == before
