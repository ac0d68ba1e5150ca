"""Maintenance on a fixed clock: expiry, purge with tombstones kept, rescoring, the cap, idempotence, the timer."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import anyio
import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.models import Category, DeleteReason, EventKind, Status
from pocketmem.mcp.server import build_server
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest

from .helpers import START
from .servers import checkout_env

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"


async def add(app: PocketMem, content: str, **kw) -> str:
    result = await app.writing.add(USER, AddRequest(content=content, **kw))
    assert result.status == "stored", result
    return result.memory_id


async def events(app: PocketMem, *kinds: EventKind) -> list:
    async with app.store.read() as r:
        return list(reversed(await r.list_events(USER, 10_000, kinds=kinds or None)))


async def rows(app: PocketMem) -> dict:
    """Every row maintenance may touch, for before/after comparisons."""
    async with app.store.read() as r:
        memories = await r.scan_memories(USER, tuple(Status), None, 10_000)
        return {
            "memories": [m.model_dump() for m in memories],
            "tombstones": [t.model_dump() for t in await r.all_tombstones(USER)],
            "events": len(await r.list_events(USER, 100_000)),
        }


async def test_episodes_expire_on_day_14_and_the_trash_is_purged_7_days_later(app, clock):
    episode = await add(app, "聊了面试和游戏", category=Category.episode)
    fact = await add(app, "用户在杭州工作", keywords=["杭州"])
    core = await add(app, "用户叫小林", scores={"persistence": 1})
    await app.patching.patch_core(USER, core, "大家都叫他林子", "append", None)
    forgotten = await add(app, "用户想学滑雪", category=Category.goal)
    await app.trash.forget(USER, forgotten, "user asked")

    clock.advance(days=7, minutes=-1)
    assert (await app.maintenance.run()).users[0].purged == []
    clock.advance(minutes=1)
    report = await app.maintenance.run()
    assert report.users[0].purged == [forgotten]
    async with app.store.read() as r:
        assert await r.get_memory(USER, forgotten) is None
        (tombstone,) = await r.all_tombstones(USER)
    seen = (tombstone.memory_id, tombstone.reason, tombstone.purged_at)
    assert seen == (forgotten, DeleteReason.user_delete, clock.now())
    health = await app.store.health()
    assert health["memories"] == 3 and health["keyword_rows"] == 3 and health["vector_rows"] == 3
    assert health["keyword_orphans"] == 0 and health["vector_mismatches"] == 0

    clock.set(START + timedelta(days=14, minutes=-1))
    assert (await app.maintenance.run()).users[0].expired == []
    clock.set(START + timedelta(days=14))
    report = await app.maintenance.run()
    assert report.users[0].expired == [episode]
    async with app.store.read() as r:
        expired = await r.get_memory(USER, episode)
        assert (expired.status, expired.delete_reason) == (Status.trashed, DeleteReason.expired)
        assert expired.purge_at == clock.now() + timedelta(days=7)
        assert (await r.get_memory(USER, fact)).status == Status.active
        assert len(await r.list_revisions(USER, core)) == 1

    clock.set(START + timedelta(days=21))
    assert (await app.maintenance.run()).users[0].purged == [episode]
    async with app.store.read() as r:
        assert {t.memory_id: t.purged_at is not None for t in await r.all_tombstones(USER)} == {
            forgotten: True, episode: True,
        }
    kinds = [(e.kind, e.memory_id) for e in await events(app, EventKind.expired, EventKind.purged)]
    assert kinds == [(EventKind.purged, forgotten), (EventKind.expired, episode), (EventKind.purged, episode)]


async def test_purging_a_patched_core_memory_removes_its_revisions(app, clock):
    core = await add(app, "用户很爱吃辣", scores={"persistence": 1})
    await app.patching.patch_core(USER, core, "最近胃炎，暂时不吃辣", "append", None)
    await app.trash.forget(USER, core, None)
    clock.advance(days=7)
    await app.maintenance.run()
    async with app.store.read() as r:
        assert await r.get_memory(USER, core) is None
        assert await r.list_revisions(USER, core) == []
        assert len(await r.all_tombstones(USER)) == 1


async def test_a_second_run_at_the_same_time_changes_nothing(app, clock):
    await add(app, "聊了周末去哪玩", category=Category.episode)
    await add(app, "用户在学日语", category=Category.goal)
    gone = await add(app, "用户喜欢喝冰美式", category=Category.preference)
    await app.trash.forget(USER, gone, None)
    clock.advance(days=20)
    first = await app.maintenance.run()
    assert first.changed and first.users[0].expired and first.users[0].purged and first.users[0].rescored
    before = await rows(app)
    second = await app.maintenance.run()
    assert not second.changed
    assert await rows(app) == before


async def test_rescoring_follows_the_formula_and_leaves_core_alone(app, clock):
    plan = await add(app, "用户计划明年去冰岛", category=Category.goal)  # P = 0.5
    core = await add(app, "用户对花生过敏", scores={"persistence": 1})
    clock.advance(days=10)
    report = await app.maintenance.run()
    assert report.users[0].rescored == 1
    async with app.store.read() as r:
        decayed, kept = await r.get_memories(USER, [plan, core])
    assert decayed.time_coef == pytest.approx(2.718281828 ** (-0.01 * 0.5 * 10))
    assert decayed.importance == pytest.approx(decayed.info_importance * decayed.time_coef)
    assert (kept.time_coef, kept.importance) == (1.0, kept.info_importance)
    (rescored,) = await events(app, EventKind.rescored)
    assert rescored.payload["count"] == 1


async def test_rescoring_pages_through_every_memory_in_batches(app, clock, monkeypatch):
    from pocketmem.service.upkeep import maintenance

    monkeypatch.setattr(maintenance, "RESCORE_BATCH", 3)
    places = "冰岛挪威芬兰瑞典丹麦荷兰比利时"
    ids = [await add(app, f"用户计划第{i}年去{places[i * 2:i * 2 + 2]}", category=Category.goal) for i in range(7)]
    old = await add(app, "用户以前住在南京", category=Category.goal)
    await app.writing.add(USER, AddRequest(content="用户现在住在苏州", category=Category.goal, supersedes=old))
    clock.advance(days=30)
    report = await app.maintenance.run()
    assert report.users[0].rescored == 9  # active and superseded, over four batches
    async with app.store.read() as r:
        memories = await r.get_memories(USER, [*ids, old])
    assert len(memories) == 8
    for memory in memories:
        assert memory.time_coef == pytest.approx(2.718281828 ** (-0.01 * 0.5 * 30))
        assert memory.importance == pytest.approx(memory.info_importance * memory.time_coef)
    assert sum(e.payload["count"] for e in await events(app, EventKind.rescored)) == 9
    assert (await app.maintenance.run()).users[0].rescored == 0


async def test_maintenance_enforces_a_lowered_cap(tmp_path, clock, make_settings):
    path = tmp_path / "m.db"
    async with PocketMem(make_settings(tmp_path, db=path), clock=clock) as app:
        for i in range(4):
            await add(app, f"用户的第{i}个爱好是{'象棋围棋书法绘画'[i * 2:i * 2 + 2]}", category=Category.context)
        await add(app, "用户叫小林", scores={"persistence": 1})
    async with PocketMem(make_settings(tmp_path, db=path, max_active=2), clock=clock) as app:
        report = await app.maintenance.run()
        assert len(report.users[0].evicted) == 3
        stats = await app.stats(USER)
        assert (stats["active"], stats["core"], stats["trashed"]) == (2, 1, 3)


async def test_two_processes_maintaining_one_store_do_nothing_twice(tmp_path, make_settings):
    path = tmp_path / "shared.db"
    clock = FixedClock(START)
    async with PocketMem(make_settings(tmp_path, db=path), clock=clock) as writer:
        ids = [await add(writer, f"第{i}次聊天：聊了{'面试游戏天气电影'[i * 2:i * 2 + 2]}", category=Category.episode)
               for i in range(4)]
    later = FixedClock(START + timedelta(days=22))
    first, second = PocketMem(make_settings(tmp_path, db=path), clock=later), PocketMem(
        make_settings(tmp_path, db=path), clock=later
    )
    async with first, second:
        reports = []

        async def run(app: PocketMem) -> None:
            reports.append(await app.maintenance.run())

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, first)
            tg.start_soon(run, second)
        expired = sorted(i for r in reports for u in r.users for i in u.expired)
        assert expired == sorted(ids)
        # Expired at day 22 means purge_at = day 29: nothing to purge yet, in either run.
        assert [i for r in reports for u in r.users for i in u.purged] == []
        assert len(await events(first, EventKind.expired)) == 4
        async with first.store.read() as r:
            assert len(await r.all_tombstones(USER)) == 4


async def test_the_server_maintains_on_a_timer_without_holding_up_the_handshake(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, maintain_interval=0.05)
    app = PocketMem(settings, clock=clock)
    await app.open()
    try:
        episode = await add(app, "聊了面试", category=Category.episode)
        clock.advance(days=15)
        real_run = app.maintenance.run
        release = anyio.Event()
        entered = anyio.Event()
        ran = anyio.Event()

        async def slow_run(now=None):
            entered.set()
            await release.wait()  # a run that takes as long as the test wants
            report = await real_run(now)
            ran.set()
            return report

        app.maintenance.run = slow_run  # type: ignore[method-assign]
        with anyio.fail_after(10):
            async with Client(build_server(settings, app=app), mode="legacy") as client:
                await entered.wait()  # the timer has fired and is stuck in the run
                tools = await client.list_tools()
                assert "mark_memory" in {t.name for t in tools.tools}
                release.set()
                await ran.wait()
                trash = await client.call_tool("list_trash", {})
                assert [i["id"] for i in trash.structured_content["items"]] == [episode]
                assert trash.structured_content["items"][0]["reason"] == "expired"
    finally:
        await app.close()


@pytest.mark.slow
def test_cli_maintain_now(tmp_path, backend, make_settings):
    home = tmp_path / "home"

    async def seed() -> str:
        async with PocketMem(make_settings(tmp_path), clock=FixedClock(START)) as app:
            return await add(app, "聊了周末的计划", category=Category.episode)

    episode = anyio.run(seed)
    env = {**checkout_env(), "POCKETMEM_HOME": str(home), "POCKETMEM_TZ": "Asia/Shanghai",
           **backend.env(home)}

    def maintain(now: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "pocketmem", "maintain", "--now", now], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    early = maintain("2026-12-10T09:59")  # 14 days minus a minute, wall-clock time in POCKETMEM_TZ
    assert early["users"][0]["expired"] == []
    due = maintain("2026-12-10T10:00+08:00")
    assert due["users"][0]["expired"] == [episode] and due["changed"]
    again = maintain("2026-12-10T10:00+08:00")
    assert again["changed"] is False
    bad = subprocess.run([sys.executable, "-m", "pocketmem", "maintain", "--now", "next tuesday"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "not an ISO 8601 time" in bad.stderr


async def test_a_restored_episode_lasts_its_days_again_from_the_restore(app, clock, client):
    """Restored from expiry, an episode is one restored now: it expires POCKETMEM_EPISODE_DAYS later, not never."""
    said = await client.call_tool("add_memory", {"content": "最近工作压力很大，经常加班到很晚。", "category": "episode",
                                                 "keywords": ["压力", "加班"]})
    episode = said.structured_content["memory_id"]
    clock.advance(days=15)
    assert (await app.maintenance.run()).users[0].expired == [episode]

    restored = (await client.call_tool("restore", {"memory_id": episode})).structured_content

    assert restored["memory"]["status"] == "active"
    assert restored["memory"]["expires_at"] == "2026-12-25T10:00:00+08:00"  # restored 12-11 10:00, plus 14 days
    assert "expires on 2026-12-25 10:00" in restored["message"]
    clock.advance(days=1)
    assert (await app.maintenance.run()).users[0].expired == []
    hits = await app.retrieval.recall(USER, RecallRequest(query="压力大", keywords=["压力"]))
    assert [m.id for m in hits.memories] == [episode]
    clock.advance(days=13)
    assert (await app.maintenance.run()).users[0].expired == [episode]


async def test_a_memory_restored_past_its_own_expiry_no_longer_expires(app, clock, client):
    """A fact the caller gave an expires_at that passed: its category has no lifetime, so restored it stays."""
    said = await client.call_tool("add_memory", {"content": "用户这周在上海出差。", "category": "context",
                                                 "expires_at": "2026-11-30"})
    memory_id = said.structured_content["memory_id"]
    clock.advance(days=5)
    assert (await app.maintenance.run()).users[0].expired == [memory_id]

    restored = (await client.call_tool("restore", {"memory_id": memory_id})).structured_content

    assert (restored["memory"]["status"], restored["memory"]["expires_at"]) == ("active", None)
    assert "no longer expires" in restored["message"]
    clock.advance(days=60)
    assert (await app.maintenance.run()).users[0].expired == []


async def test_the_purge_query_leaves_what_sync_has_yet_to_carry(make_settings, tmp_path, clock):
    from pocketmem.store.types import Unsent

    async with PocketMem(make_settings(tmp_path, max_active=2), clock=clock) as app:
        evicted = await add(app, "用户小时候在成都住过", scores={"info": 0.1, "judge": 0.1})
        clock.advance(minutes=1)
        await add(app, "用户喜欢爬山", scores={"info": 0.9})
        forgotten = await add(app, "用户想学滑雪", scores={"info": 0.95})
        await app.trash.forget(USER, forgotten, None)
        clock.advance(days=8)

        async def purgeable(unsent: Unsent | None) -> set[str]:
            async with app.store.read() as r:
                return {m.id for m in await r.purgeable_memories(USER, clock.now(), 10, unsent)}

        async with app.store.read() as r:
            pushed = await r.change_marker()  # a push that started now would carry both
        assert await purgeable(None) == {evicted, forgotten}
        assert await purgeable(Unsent(reasons=(DeleteReason.evicted,), since=None)) == {forgotten}
        assert await purgeable(Unsent(reasons=(DeleteReason.evicted,), since=pushed)) == {evicted, forgotten}
        assert await purgeable(Unsent(reasons=None, since=None)) == set()
