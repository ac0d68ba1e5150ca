"""The current fact wins (issue 11, item 5), through the MCP client on both backends: a recalled memory that
has a newer version brings it, even when the newer one shares no words with the question."""

from __future__ import annotations

from datetime import timedelta

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.mcp.server import build_server

from .helpers import call

pytestmark = [pytest.mark.anyio, pytest.mark.backends]

OLD = "用户住在北京朝阳区，离公司很近。"
NEW = "用户上个月搬到杭州了。"
QUESTION = "我还住在北京朝阳区吗？"


async def write_chain(client: Client, clock, *contents: str) -> list[str]:
    ids: list[str] = []
    for content in contents:
        args = {"content": content, **({"supersedes": ids[-1]} if ids else {})}
        result = await call(client, "add_memory", args)
        assert result["status"] == "stored", result
        ids.append(result["memory_id"])
        clock.advance(days=30)
    return ids


async def test_a_hit_on_an_old_version_brings_the_current_one(client: Client, clock):
    old, new = await write_chain(client, clock, OLD, NEW)
    answer = await call(client, "recall_memories", {"query": QUESTION})
    assert [m["id"] for m in answer["memories"]] == [new]
    assert "杭州" in answer["injection"] and "朝阳区" not in answer["injection"]


async def test_with_history_both_come_and_the_newer_ranks_first(client: Client, clock):
    old, new = await write_chain(client, clock, OLD, NEW)
    answer = await call(client, "recall_memories", {"query": QUESTION, "include_history": True})
    assert [m["id"] for m in answer["memories"]] == [new, old]
    assert answer["memories"][1]["outdated"] is True


async def test_the_chain_is_followed_to_its_end(client: Client, clock):
    first, second, third = await write_chain(client, clock, OLD, "用户搬到了上海浦东。", NEW)
    answer = await call(client, "recall_memories", {"query": QUESTION})
    assert [m["id"] for m in answer["memories"]] == [third]


async def test_a_chain_ending_in_the_trash_brings_nothing(client: Client, app: PocketMem, clock):
    old = (await call(client, "add_memory", {"content": OLD}))["memory_id"]
    expiring = {"content": NEW, "supersedes": old, "expires_at": (clock.now() + timedelta(days=1)).isoformat()}
    await call(client, "add_memory", expiring)
    clock.advance(days=30)
    report = await app.maintenance.run()  # the newest version expires: nothing said it stopped being true
    assert len(report.users[0].expired) == 1
    answer = await call(client, "recall_memories", {"query": QUESTION})
    assert answer["memories"] == []


async def test_forgetting_the_current_version_brings_the_one_it_replaced(client: Client, clock):
    old, new = await write_chain(client, clock, OLD, NEW)
    await call(client, "forget_memory", {"memory_id": new})
    answer = await call(client, "recall_memories", {"query": QUESTION})
    assert [(m["id"], m["outdated"]) for m in answer["memories"]] == [(old, False)]


async def test_a_current_hit_found_on_its_own_is_listed_once(client: Client, clock):
    old, new = await write_chain(client, clock, "用户住在北京朝阳区。", "用户现在住在北京海淀区。")
    answer = await call(client, "recall_memories", {"query": "我住在北京哪个区", "top_k": 5})
    assert [m["id"] for m in answer["memories"]] == [new]


async def test_recall_of_the_service_matches(app: PocketMem, clock):
    """The same through a second connection: the store, not the session, holds the chain."""
    async with Client(build_server(app.settings, app=app)) as client:
        old, new = await write_chain(client, clock, OLD, NEW)
    async with Client(build_server(app.settings, app=app)) as client:
        answer = await call(client, "recall_memories", {"query": QUESTION})
    assert [m["id"] for m in answer["memories"]] == [new]
