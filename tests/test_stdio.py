"""`pocketmem serve` as a subprocess over stdio, the way Claude Desktop and other hosts start it."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import pytest
from mcp import Client

from pocketmem.core.text import UNPAIRED_SURROGATE

from .helpers import server_params
from .servers import RawStdio, checkout_env

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

    env = {**checkout_env(), "POCKETMEM_HOME": str(tmp_path), "POCKETMEM_MAX_ACTIVE": "-5"}
    with anyio.fail_after(60):
        proc = await anyio.run_process(
            [sys.executable, "-m", "pocketmem", "serve"], env=env, check=False, stdin=subprocess.DEVNULL
        )
    stderr = proc.stderr.decode()
    assert proc.returncode == 2
    assert "POCKETMEM_MAX_ACTIVE" in stderr and "greater than 0" in stderr and "'-5'" in stderr
    assert proc.stdout == b""


def test_a_request_the_sdk_cannot_parse_is_answered_with_its_id(tmp_path, backend):
    """Lines the SDK's parser refuses though they are JSON (an escaped lone surrogate, 200 levels of nesting) are
    answered with the request's id, so the host stops waiting; nothing is stored, the server goes on."""
    raw = RawStdio(backend, tmp_path / "home")
    send, reply = raw.send, raw.reply

    def add_memory(keywords: str) -> str:
        return ('{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"add_memory","arguments":'
                '{"content":"user likes oolong tea","keywords":' + keywords + "}}}")

    try:
        raw.handshake()
        send('{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"add_memory",'
             '"arguments":{"content":"user likes oolong\\ud800 tea"}}}')
        assert reply() == {"jsonrpc": "2.0", "id": 77, "error": {"code": -32602, "message": (
            f"Invalid params: params.arguments.content {UNPAIRED_SURROGATE}; nothing was done")}}

        send(add_memory("[" * 200 + "]" * 200))
        assert reply() == {"jsonrpc": "2.0", "id": 77, "error": {"code": -32602, "message": (
            "Invalid params: params.arguments.keywords is nested too deeply: a message may be at most 201 levels "
            "deep; nothing was done")}}
        send(add_memory("[" * 128 + "]" * 128))  # within the parser's reach: the tool's own field error
        refused = reply()
        assert refused["id"] == 77 and refused["result"]["isError"], refused
        assert "keywords" in refused["result"]["content"][0]["text"]

        send('{"jsonrpc":"2.0","id":"s-1","method":"tools/\\udc00list"}')  # outside params: an invalid request
        assert reply() == {"jsonrpc": "2.0", "id": "s-1", "error": {"code": -32600, "message": (
            f"Invalid request: method {UNPAIRED_SURROGATE}; nothing was done")}}

        # A notification gets no reply: the next line's reply is the next one out.
        send('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x\\ud800"}}')
        send("{oops")  # not JSON: no id to read
        assert reply() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": (
            "Parse error: the line is not a JSON-RPC message pocketmem can read (not UTF-8, invalid JSON, or nested "
            "too deeply); nothing was done")}}

        send(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "list_memories", "arguments": {}}}))
        listed = reply()
        assert listed["id"] == 5 and listed["result"]["structuredContent"]["total"] == 0  # nothing was stored
    finally:
        stderr = raw.close()
    assert b"oolong" not in stderr and b"ud800" not in stderr and b"\xed\xa0\x80" not in stderr
