"""One aspect of a project is no version of another (docs/ranking.md, section 6), through the MCP client on both
backends and both embedders: every memory of a coding user names the project, so the project's name and a change
word do not make a deployment move a new version of the frontend; a move of a deployment (moved the deployment,
仪表盘部署…搬到) is no home; a change that names the value it left (from Heroku to Fly.io) versions only a memory
holding that value. The real versions still win: the frontend switched from React to Svelte, 北京 → 杭州, a phone."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.mcp.server import build_server

from .helpers import call

pytestmark = [pytest.mark.anyio, pytest.mark.backends]


@pytest.fixture(params=["hash", "use"])
async def client(request: pytest.FixtureRequest, tmp_path, clock, make_settings) -> AsyncIterator[Client]:
    settings = make_settings(tmp_path, embedder=request.param)
    async with Client(build_server(settings, app=PocketMem(settings, clock=clock))) as c:
        yield c


async def add(client: Client, content: str, created_at: str | None = None) -> str:
    args = {"content": content, "category": "project", **({"created_at": created_at} if created_at else {})}
    result = await call(client, "add_memory", args)
    assert result["status"] == "stored", result
    return result["memory_id"]


async def recall(client: Client, query: str, keywords: list[str] | None = None) -> list[dict]:
    args = {"query": query, **({"keywords": keywords} if keywords else {})}
    return (await call(client, "recall_memories", args))["memories"]


def outdated(memories: list[dict]) -> set[str]:
    return {m["id"] for m in memories if m["outdated"]}


async def test_a_deployment_move_is_no_version_of_the_frontend(client: Client):
    svelte = await add(client, "The dashboard frontend is built with Svelte 5.", "2026-10-01")
    flyio = await add(client, "We moved the dashboard deployment from Heroku to Fly.io.")
    memories = await recall(client, "What is the dashboard frontend built with?", ["frontend", "framework"])
    assert memories[0]["id"] == svelte, memories
    assert not outdated(memories)
    assert not outdated(await recall(client, "Where is the dashboard deployed?", ["deployment", "hosting"]))
    assert flyio


async def test_the_frontend_switched_is_a_version_and_the_deployment_is_not(client: Client):
    react = await add(client, "The dashboard frontend is built with React 18.", "2026-08-01")
    heroku = await add(client, "The dashboard is deployed on Heroku.", "2026-08-02")
    svelte = await add(client, "We switched the dashboard frontend from React 18 to Svelte 5.", "2026-10-01")
    flyio = await add(client, "We moved the dashboard deployment from Heroku to Fly.io.")
    memories = await recall(client, "What is the dashboard frontend built with?", ["frontend", "framework"])
    ids = [m["id"] for m in memories]
    assert ids[0] == svelte, memories
    assert react not in ids or ids.index(react) > ids.index(svelte)
    assert outdated(memories) <= {react, heroku}
    assert flyio not in outdated(memories)
    memories = await recall(client, "Where is the dashboard deployed?", ["deployment", "hosting"])
    ids = [m["id"] for m in memories]
    assert ids[0] == flyio and heroku in outdated(memories), memories
    assert svelte not in outdated(memories)


async def test_a_chinese_deployment_move_is_no_version_and_no_home(client: Client):
    home = await add(client, "用户住在北京。", "2026-06-01")
    vue = await add(client, "仪表盘前端用 Vue 写的。", "2026-10-01")
    move = await add(client, "仪表盘部署从阿里云搬到了腾讯云。")
    memories = await recall(client, "仪表盘前端用什么写的？", ["前端", "框架"])
    assert memories[0]["id"] == vue and not outdated(memories), memories
    memories = await recall(client, "我住在哪？")
    assert memories[0]["id"] == home and not outdated(memories), memories
    assert move not in [m["id"] for m in memories[:1]]


async def test_an_english_deployment_move_is_no_home(client: Client):
    home = await add(client, "I live in Boston.", "2026-06-01")
    await add(client, "We moved the dashboard deployment from Heroku to Fly.io.")
    memories = await recall(client, "where do I live?")
    assert memories[0]["id"] == home and not outdated(memories), memories


async def test_a_move_home_and_a_new_phone_are_still_versions(client: Client):
    beijing = await add(client, "用户住在北京。", "2026-06-01")
    phone = await add(client, "用户用的手机是 iPhone 13。", "2026-06-02")
    hangzhou = await add(client, "我上个月从北京搬到杭州了。", "2026-10-01")
    xiaomi = await add(client, "用户现在用小米 14，说安卓更方便折腾。", "2026-10-02")
    memories = await recall(client, "我还住在北京吗？")
    assert [m["id"] for m in memories][:2] == [hangzhou, beijing] and outdated(memories) == {beijing}, memories
    memories = await recall(client, "我的手机是 iPhone 13 吗？")
    assert [m["id"] for m in memories][:2] == [xiaomi, phone] and phone in outdated(memories), memories
    boston = await add(client, "I live in Boston.", "2026-06-03")
    denver = await add(client, "We moved from Boston to Denver last month.")
    memories = await recall(client, "Do I still live in Boston?")
    assert [m["id"] for m in memories][:2] == [denver, boston] and boston in outdated(memories), memories
