"""`pocketmem serve` as a subprocess over stdio, the way Claude Desktop and other hosts start it."""

from __future__ import annotations

import sys

import anyio
import pytest
from mcp import Client

from .helpers import server_params
from .servers import checkout_env

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_memories_survive_a_server_restart(tmp_path, mode):
    home = tmp_path / "home"
    async with Client(server_params(home), mode=mode) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"recall_memories", "mark_memory", "remember_conversation"} <= tools and len(tools) == 11
        added = await client.call_tool(
            "add_memory", {"content": "用户不喜欢香菜，吃到会很反感。", "keywords": ["香菜", "coriander"]}
        )
        assert added.structured_content["status"] == "stored"
    assert (home / "memory.db").exists()
    async with Client(server_params(home), mode=mode) as client:
        result = await client.call_tool("recall_memories", {"query": "晚饭能放香菜吗"})
        assert result.structured_content["memories"][0]["id"] == added.structured_content["memory_id"]
        assert result.structured_content["injection"].startswith("今天的对话摘要“用户不喜欢香菜")


async def test_a_bad_setting_stops_the_server_with_a_clear_message(tmp_path):
    import subprocess

    env = {**checkout_env(), "POCKETMEM_HOME": str(tmp_path), "POCKETMEM_MAX_ACTIVE": "-5"}
    with anyio.fail_after(60):
        proc = await anyio.run_process(
            [sys.executable, "-m", "pocketmem", "serve"], env=env, check=False, stdin=subprocess.DEVNULL
        )
    stderr = proc.stderr.decode()
    assert proc.returncode == 2
    assert "POCKETMEM_MAX_ACTIVE" in stderr and "greater than 0" in stderr and "'-5'" in stderr
    assert proc.stdout == b""
