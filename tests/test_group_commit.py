"""Concurrent adds share durable commits (group commit) without sharing failures: each add is answered
only after the commit that holds it, and one add that fails undoes only its own writes."""

from __future__ import annotations

import asyncio

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.errors import NotFound
from pocketmem.base.models import Status
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.types import MemoryFilter

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"
TOPICS = ["香菜", "火锅", "拉面", "寿司", "芒果", "咖啡", "绿茶", "辣椒", "牛排", "饺子", "奶茶", "披萨"]


async def test_concurrent_adds_share_commits_and_all_survive(tmp_path, clock, backend, make_settings):
    settings = make_settings(tmp_path)
    commits: list[object] = []
    async with PocketMem(settings, clock=clock) as app:
        await app.writing.add(USER, AddRequest(content="用户住在杭州"))  # the user row and vector index exist

        async def counted(changes: object) -> None:
            commits.append(changes)

        app.store.on_commit(counted)
        requests = [AddRequest(content=f"用户第{i}次尝试{topic}", keywords=[topic]) for i, topic in enumerate(TOPICS)]
        results = await asyncio.gather(*(app.writing.add(USER, r) for r in requests))
        assert [r.status for r in results] == ["stored"] * len(TOPICS)
        if backend.name == "sqlite":
            assert len(commits) < len(TOPICS)  # they waited together and committed together
    async with PocketMem(settings, clock=clock) as app:
        async with app.store.read() as reader:
            stored = await reader.get_memories(USER, [r.memory_id for r in results])
        assert sorted(m.content for m in stored) == sorted(r.content for r in requests)
        health = await app.store.health()
        assert health["count_mismatches"] == 0 and health["keyword_orphans"] == 0


async def test_one_failing_add_in_a_group_undoes_only_itself(tmp_path, clock, make_settings):
    async with PocketMem(make_settings(tmp_path), clock=clock) as app:
        await app.writing.add(USER, AddRequest(content="用户住在杭州"))
        good = [AddRequest(content=f"用户喜欢{topic}", keywords=[topic]) for topic in TOPICS[:5]]
        bad = AddRequest(content="用户搬到了上海", supersedes="no-such-memory")
        outcomes = await asyncio.gather(
            *(app.writing.add(USER, r) for r in [*good[:2], bad, *good[2:]]), return_exceptions=True
        )
        assert isinstance(outcomes[2], NotFound)
        stored = [o for i, o in enumerate(outcomes) if i != 2]
        assert all(o.status == "stored" for o in stored)
        async with app.store.read() as reader:
            rows, _ = await reader.list_memories(USER, MemoryFilter(statuses=(Status.active,), limit=100))
        assert sorted(m.content for m in rows) == sorted(["用户住在杭州", *(r.content for r in good)])
        assert (await app.store.health())["count_mismatches"] == 0
