"""Recall's bookkeeping off the answer's path: a server lets use counts and `recalled` events wait and writes
them together; a clean shutdown keeps every one, and a failed write keeps them for the next."""

from __future__ import annotations

import json
import sys
from datetime import datetime

import pytest
from mcp import Client, StdioServerParameters

from pocketmem.app import PocketMem
from pocketmem.base.errors import StoreError
from pocketmem.base.models import EventKind
from pocketmem.mcp.server import build_server
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.shared.reinforcement import UseLedger
from pocketmem.service.writing.add_request import AddRequest

from .helpers import call
from .servers import server_env

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"


async def counts(app: PocketMem, ids: list[str]) -> tuple[list[int], int]:
    async with app.store.read() as reader:
        memories = await reader.get_memories(USER, ids)
        events = await reader.list_events(USER, kinds=[EventKind.recalled], limit=1000)
    return [m.use_count for m in memories], len(events)


async def seeded(settings, clock) -> tuple[PocketMem, list[str]]:
    app = PocketMem(settings, clock=clock)
    await app.open()
    ids = [
        (await app.writing.add(USER, AddRequest(content=text, keywords=[kw]))).memory_id
        for text, kw in (("用户不喜欢香菜", "香菜"), ("用户每周去两次健身房", "健身房"))
    ]
    return app, ids


async def test_deferred_counts_wait_then_a_clean_close_writes_every_one(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path)
    app, ids = await seeded(settings, clock)
    app.retrieval.uses.deferred = True
    for _ in range(5):
        result = await app.retrieval.recall(USER, RecallRequest(query="香菜", keywords=["香菜"]))
        assert [m.id for m in result.memories] == [ids[0]]
    clock.advance(minutes=3)
    await app.retrieval.recall(USER, RecallRequest(query="健身房", keywords=["健身房"]))
    assert await counts(app, ids) == ([0, 0], 0)  # answered; nothing written yet
    assert app.retrieval.uses.pending == 6
    await app.close()

    app = PocketMem(settings, clock=clock)
    async with app:
        assert await counts(app, ids) == ([5, 1], 6)
        async with app.store.read() as reader:
            gym = await reader.get_memory(USER, ids[1])
        assert gym is not None and gym.last_active_at == clock.now()


async def test_a_failed_flush_keeps_its_entries_for_the_next(tmp_path, clock, make_settings):
    app, ids = await seeded(make_settings(tmp_path), clock)
    try:
        app.retrieval.uses.deferred = True
        await app.retrieval.recall(USER, RecallRequest(query="香菜", keywords=["香菜"]))
        await app.store.close()  # the database goes away under the waiting entries
        with pytest.raises(StoreError):
            await app.retrieval.uses.flush()
        assert app.retrieval.uses.pending == 1
        await app.store.open()
        await app.retrieval.recall(USER, RecallRequest(query="香菜", keywords=["香菜"]))
        assert await app.retrieval.uses.flush() == 2
        assert await counts(app, ids) == ([2, 0], 2)
    finally:
        await app.close()


async def test_many_waiting_recalls_are_written_without_waiting_for_the_timer(
    tmp_path, clock, monkeypatch, make_settings
):
    monkeypatch.setattr(UseLedger, "MAX_PENDING", 3)
    app, ids = await seeded(make_settings(tmp_path), clock)
    try:
        app.retrieval.uses.deferred = True
        for _ in range(4):
            await app.retrieval.recall(USER, RecallRequest(query="香菜", keywords=["香菜"]))
        assert await counts(app, ids) == ([3, 0], 3)
        assert app.retrieval.uses.pending == 1
    finally:
        await app.close()


async def test_a_server_shut_down_cleanly_keeps_every_use_count(tmp_path, clock, backend, make_settings):
    home = tmp_path / "home"
    settings = make_settings(tmp_path)
    app, ids = await seeded(settings, clock)
    await app.close()
    # Only the shutdown can write them: the timer would wait an hour.
    env = server_env(backend, home, POCKETMEM_USE_FLUSH_INTERVAL="3600")
    params = StdioServerParameters(command=sys.executable, args=["-m", "pocketmem", "serve"], env=env)
    async with Client(params, mode="legacy") as client:
        for _ in range(7):
            result = await client.call_tool("recall_memories", {"query": "香菜", "keywords": ["香菜"]})
            assert not result.is_error
            assert [m["id"] for m in result.structured_content["memories"]] == [ids[0]]
    async with PocketMem(settings, clock=clock) as app:
        assert await counts(app, ids) == ([7, 0], 7)


async def test_a_deferred_count_written_after_a_later_use_keeps_the_later_time(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, use_flush_interval=3600)  # only the explicit flush below writes the counts
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        memory_id = (await call(client, "add_memory", {"content": "用户不喜欢香菜", "keywords": ["香菜"]}))["memory_id"]
        hit = await call(client, "recall_memories", {"query": "香菜", "keywords": ["香菜"]})
        assert [m["id"] for m in hit["memories"]] == [memory_id]  # counted at START, waiting for the flush
        clock.advance(seconds=3)
        used = await call(client, "recall_memories", {"query": "👍", "used": [memory_id]})  # written at once
        assert used["reinforced"] == [memory_id]
        assert app.retrieval.uses.pending == 1
        await app.retrieval.uses.flush()
        shown = json.loads((await client.read_resource(f"memory://memories/{memory_id}")).contents[0].text)
    assert datetime.fromisoformat(shown["last_active_at"]) == clock.now()
    assert shown["use_count"] == 1
