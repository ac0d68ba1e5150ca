"""`pocketmem serve --transport http --workers N`: several stateless processes on one port and one database;
every request can land on any of them, and tokens, isolation and durability hold whichever answers."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import anyio
import httpx2
import pytest

from pocketmem.mcp.workers import WORKER_MIN_LIFETIME

from .servers import ServerProcess, cli, connect, create_token, run_cli

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def workers_of(parent: int) -> list[int]:
    """The worker processes the parent started (Linux /proc)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat[1]) == parent and b"--listen-fd" in cmdline:
            found.append(int(pid))
    return sorted(found)


def alive(pid: int) -> bool:
    """Running: a process that exited but was not reaped yet (a zombie, state Z) counts as gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


async def remember_and_recall(url: str, token: str, text: str, mode: str) -> list[str]:
    async with connect(url, token, mode=mode) as client:
        added = await client.call_tool("add_memory", {"content": text, "keywords": ["香菜"]})
        assert not added.is_error and added.structured_content["status"] in ("stored", "duplicate")
        seen: set[str] = set()
        for _ in range(6):  # each call may be answered by another worker
            result = await client.call_tool("recall_memories", {"query": "香菜", "keywords": ["香菜"], "top_k": 10})
            assert not result.is_error
            seen.update(m["content"] for m in result.structured_content["memories"])
        return sorted(seen)


@pytest.mark.backends
async def test_two_workers_answer_with_tokens_and_isolation(tmp_path, backend):
    home = tmp_path / "home"
    alice, bob = create_token(backend, home, "alice"), create_token(backend, home, "bob")
    with ServerProcess(backend, home, "http", "--workers", "2") as server:
        assert server.proc is not None
        wait_for(lambda: len(workers_of(server.proc.pid)) == 2)
        workers_up = time.monotonic()
        assert "2 stateless workers" in server.log()
        for mode in ("legacy", "auto"):
            assert await remember_and_recall(server.url, alice, f"alice 不吃香菜 ({mode})", mode) == sorted(
                f"alice 不吃香菜 ({m})" for m in ("legacy", "auto")[: 1 + (mode == "auto")]
            )
            assert await remember_and_recall(server.url, bob, f"bob 爱吃香菜 ({mode})", mode) == sorted(
                f"bob 爱吃香菜 ({m})" for m in ("legacy", "auto")[: 1 + (mode == "auto")]
            )
        async with httpx2.AsyncClient() as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            for headers in ({}, {"Authorization": "Bearer pm_wrong"}):
                response = await http.post(server.url, json=body, headers=headers)
                assert response.status_code == 401
        # Stateless: a legacy initialize gets no session id, so the next request may go to any worker.
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {alice}"}) as http:
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
            response = await http.post(server.url, json=init, headers={"Accept": "application/json, text/event-stream"})
            assert response.status_code == 200 and "mcp-session-id" not in response.headers
            assert response.headers["content-type"].startswith("application/json")

        # A worker that dies is replaced; the other answers meanwhile.
        first = workers_of(server.proc.pid)
        # A worker dying within WORKER_MIN_LIFETIME of its start is a start-up failure that stops the server
        # (no restart loop); this test is about a worker that dies later, while serving.
        await anyio.sleep(max(0.0, WORKER_MIN_LIFETIME + 1 - (time.monotonic() - workers_up)))
        os.kill(first[0], signal.SIGKILL)
        try:
            answered = await remember_and_recall(server.url, alice, "alice 不吃香菜 (legacy)", "legacy")
        except httpx2.TransportError:  # a connection the killed worker had accepted is lost: a client retries
            answered = await remember_and_recall(server.url, alice, "alice 不吃香菜 (legacy)", "legacy")
        assert answered
        wait_for(lambda: len(workers_of(server.proc.pid)) == 2 and workers_of(server.proc.pid) != first)
        survivors = workers_of(server.proc.pid)
    # Stopping the parent stops every worker.
    wait_for(lambda: not any(alive(pid) for pid in survivors))
    out = cli(backend, home, "stats")
    assert out.returncode == 0, out.stderr


def test_workers_need_streamable_http(tmp_path, capsys):
    out = run_cli(capsys, tmp_path / "home", "serve", "--transport", "sse", "--workers", "2")
    assert out.returncode == 2 and "--workers apply to --transport http" in out.stderr
    out = run_cli(capsys, tmp_path / "home", "serve", "--transport", "http", "--workers", "0")
    assert out.returncode == 2 and "--workers must be between 1 and" in out.stderr


@pytest.mark.backends
async def test_concurrent_first_sign_ins_on_two_workers_all_stay_signed_in(tmp_path, backend):
    """The key that signs page sessions is made on the first sign-in; racing workers must all keep the same one."""
    home = tmp_path / "home"
    token = create_token(backend, home, "alice")
    with ServerProcess(backend, home, "http", "--workers", "2", "--ui") as server:
        assert server.proc is not None
        wait_for(lambda: len(workers_of(server.proc.pid)) == 2)
        login = f"{server.base}/ui/login"

        async def sign_in() -> str:
            # Twelve token checks at once on two workers that are still warming up: a loaded machine can take
            # longer than httpx's default 5 s, and this test is about the key, not the time.
            async with httpx2.AsyncClient(timeout=60) as http:
                signed = await http.post(login, data={"token": token})
                assert signed.status_code == 303, signed.text
                return signed.cookies["pocketmem_ui"]

        cookies: list[str] = []

        async def one() -> None:
            cookies.append(await sign_in())

        async with anyio.create_task_group() as tasks:
            for _ in range(12):
                tasks.start_soon(one)
        cookies.append(await sign_in())  # and one more once the key exists
        async with httpx2.AsyncClient(timeout=60) as http:
            for cookie in cookies:
                for _ in range(6):  # each load may be answered by the other worker
                    page = await http.get(f"{server.base}/ui/memories", headers={"Cookie": f"pocketmem_ui={cookie}"})
                    assert page.status_code == 200 and 'id="user">alice<' in page.text
