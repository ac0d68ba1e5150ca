"""A start-up failure over stdio still answers the host.

A desktop host starts `pocketmem serve` and speaks MCP to it; a server that exits before the handshake shows
there as a closed connection only. So after a failed start (a file that is not a database, a bad setting) the
server answers the handshake and every tool call, resource read and list with one error naming the cause
and the fix, prints the same one line on stderr, and exits non-zero once stdin closes. Through the SDK's own
stdio client, on both protocol eras.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from .servers import server_env

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
PROTOCOLS = ["legacy", "2026-07-28"]  # the 2025-11-25 initialize handshake, and the 2026-07-28 era


def not_a_database(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "memory.db").write_bytes(os.urandom(20_000))
    return home


@pytest.mark.parametrize("mode", PROTOCOLS)
async def test_a_store_that_cannot_open_is_named_in_every_answer(tmp_path, mode, backend):
    home = not_a_database(tmp_path)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "pocketmem", "serve"], env=server_env(backend, home)
    )
    async with Client(params, mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else mode)
        called = await client.call_tool("add_memory", {"content": "用户喜欢喝乌龙茶"})
        assert called.is_error
        text = called.content[0].text
        assert text.startswith("pocketmem could not start: cannot open the memory store"), text
        assert "not a database" in text and "restart" in text
        for request in (
            lambda: client.read_resource("memory://user-card"),
            client.list_tools,
            client.list_resources,
            client.list_prompts,
            lambda: client.get_prompt("extract_memories", {"conversation": "你好"}),
        ):
            with pytest.raises(MCPError) as refused:
                await request()
            assert refused.value.message == text
    assert not (home / "memory.db-wal").exists()  # nothing was written beside the file


@pytest.mark.parametrize("mode", PROTOCOLS)
def test_a_bad_setting_is_named_and_the_exit_is_non_zero(tmp_path, mode, backend):
    code = (
        "import asyncio, sys\n"
        "from mcp import Client, StdioServerParameters\n"
        "async def main():\n"
        "    params = StdioServerParameters(command=sys.executable, args=['-m', 'pocketmem', 'serve'], env=ENV)\n"
        "    async with Client(params, mode=MODE) as client:\n"
        "        result = await client.call_tool('recall_memories', {'query': 'x'})\n"
        "        print(result.is_error, result.content[0].text)\n"
        "asyncio.run(main())\n"
    )
    env = server_env(backend, tmp_path / "home", POCKETMEM_MAX_ACTIVE="many")
    done = subprocess.run(
        [sys.executable, "-c", f"ENV = {env!r}\nMODE = {mode!r}\n" + code],
        capture_output=True, text=True, timeout=120, env={**os.environ},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True pocketmem could not start:") and "POCKETMEM_MAX_ACTIVE" in done.stdout
    # The server's own stderr (passed through by the stdio client): the same cause, once.
    assert done.stderr.count("pocketmem: invalid pocketmem settings") == 1, done.stderr
    assert "POCKETMEM_MAX_ACTIVE" in done.stderr and "Traceback" not in done.stderr


def test_the_exit_code_stays_non_zero_after_stdin_closes(tmp_path, backend):
    home = not_a_database(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "pocketmem", "serve"], env=server_env(backend, home), capture_output=True, text=True,
        timeout=60, input="",
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().startswith("pocketmem: cannot open the memory store"), done.stderr
