"""Versions of a fact (docs/ranking.md, section 6), through the MCP client on both backends and both protocol
eras: the newer of two unlinked facts about the same thing answers; include_history brings a whole
`supersedes` chain, newest first; a question about what was true before (我以前…用过什么) brings the earlier
versions."""

from __future__ import annotations

import pytest
from mcp import Client

from .helpers import call

pytestmark = [pytest.mark.anyio, pytest.mark.backends]

CHAIN = ("用户写前端用 Vue。", "用户写前端改用 React 了。", "用户写前端现在用 Svelte。")


async def write(client: Client, clock, *contents: str, linked: bool) -> list[str]:
    """Each memory 45 days after the one before, naming the one before in `supersedes` when `linked`."""
    ids: list[str] = []
    for content in contents:
        args = {"content": content, **({"supersedes": ids[-1]} if linked and ids else {})}
        result = await call(client, "add_memory", args)
        assert result["status"] == "stored", result
        ids.append(result["memory_id"])
        clock.advance(days=45)
    return ids


async def recall(client: Client, query: str, **extra) -> list[dict]:
    return (await call(client, "recall_memories", {"query": query, **extra}))["memories"]


async def test_the_newer_of_two_unlinked_facts_answers(client: Client, clock):
    clock.advance(days=-90)
    old, new = await write(client, clock, "用户住在北京。", "用户住在杭州。", linked=False)
    for question in ("我住在哪", "我住在哪？"):
        memories = await recall(client, question)
        assert memories and memories[0]["id"] == new, memories
        assert all(m["id"] != old or i > 0 for i, m in enumerate(memories))


async def test_include_history_brings_the_whole_chain_in_order(client: Client, clock):
    vue, react, svelte = await write(client, clock, *CHAIN, linked=True)
    memories = await recall(client, "我写前端用什么", include_history=True)
    assert [m["id"] for m in memories] == [svelte, react, vue]
    assert [m["outdated"] for m in memories] == [False, True, True]
    # without the history: the current version alone
    assert [m["id"] for m in await recall(client, "我写前端用什么")] == [svelte]


async def test_a_question_about_before_brings_the_earlier_versions(client: Client, clock):
    vue, react, svelte = await write(client, clock, *CHAIN, linked=True)
    memories = await recall(client, "我以前写前端用过什么")
    assert [m["id"] for m in memories] == [svelte, react, vue]
    assert memories[1]["outdated"] and memories[2]["outdated"]
