"""Several servers on one database file at once: stdio servers (one per host, as Claude Desktop and
Claude Code each start their own) and an HTTP server with several clients, all writing and
recalling together. No call may fail, nothing may be lost, and the indexes must agree after.
"""

from __future__ import annotations

import sys

import anyio
import pytest
from mcp import Client, StdioServerParameters

from pocketmem.app import PocketMem
from pocketmem.base.config import Settings
from tests.helpers import Backend
from tests.servers import ServerProcess, connect, create_token, server_env

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROUNDS = 20


def stdio(backend: Backend, home, user: str) -> Client:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "pocketmem", "serve"], env=server_env(backend, home, POCKETMEM_USER=user)
    )
    return Client(params, mode="legacy")


async def workload(client: Client, label: str, errors: list[str], rounds: int = ROUNDS) -> int:
    """add / recall / list in a loop; every failure is collected with its text."""
    added = 0
    for i in range(rounds):
        calls = [
            ("add_memory", {"content": f"{label} 第{i}条：用户今天学了第{i}课日语", "keywords": ["日语", label]}),
            ("recall_memories", {"query": f"第{i}课日语学得怎么样", "keywords": ["日语"]}),
        ]
        if i % 5 == 0:
            calls.append(("list_memories", {"text": label, "limit": 10}))
        for name, args in calls:
            try:
                result = await client.call_tool(name, args)
            except Exception as exc:  # noqa: BLE001 - the test reports every failure
                errors.append(f"{label} {name}: {type(exc).__name__}: {exc}")
                continue
            if result.is_error:
                errors.append(f"{label} {name}: {result.content[0].text}")
            elif name == "add_memory":
                assert result.structured_content["status"] == "stored", result.structured_content
                added += 1
    return added


async def check_store(home, expected: dict[str, int]) -> None:
    async with PocketMem(Settings(home=home, tz="Asia/Shanghai", embedder="hash")) as app:
        health = await app.store.health()
        assert health["integrity"] == "ok"
        assert health["keyword_orphans"] == 0 and health["vector_mismatches"] == 0
        assert health["memories"] == health["keyword_rows"] == health["vector_rows"] == sum(expected.values())
        for user, count in expected.items():
            assert (await app.stats(user))["active"] == count, user


async def test_stdio_servers_and_http_clients_share_one_file(tmp_path, backend):
    home = tmp_path / "home"
    tokens = {user: create_token(backend, home, user) for user in ("alice", "bob")}
    errors: list[str] = []
    added: dict[str, int] = {}

    async def over_stdio(user: str, label: str) -> None:
        async with stdio(backend, home, user) as client:
            added[label] = await workload(client, label, errors)

    async def over_http(url: str, user: str, label: str, mode: str) -> None:
        async with connect(url, tokens[user], mode=mode) as client:
            added[label] = await workload(client, label, errors)

    with ServerProcess(backend, home, "http", env={"POCKETMEM_MAX_ACTIVE": "10000"}) as server:
        async with anyio.create_task_group() as tg:
            for n, user in enumerate(("alice", "carol", "carol")):
                tg.start_soon(over_stdio, user, f"stdio{n}-{user}")
            pairs = (("alice", "legacy"), ("alice", "auto"), ("bob", "legacy"), ("bob", "auto"))
            for n, (user, mode) in enumerate(pairs):
                tg.start_soon(over_http, server.url, user, f"http{n}-{user}", mode)
        log = server.log()
    assert errors == []
    assert "locked" not in log and "Traceback" not in log
    per_user: dict[str, int] = {}
    for label, count in added.items():
        per_user[label.split("-")[1]] = per_user.get(label.split("-")[1], 0) + count
    assert per_user == {"alice": 3 * ROUNDS, "bob": 2 * ROUNDS, "carol": 2 * ROUNDS}
    await check_store(home, per_user)


async def test_servers_starting_together_on_a_new_file(tmp_path, backend):
    """The first start creates the file, switches it to WAL and migrates; four at once must all succeed."""
    home = tmp_path / "home"
    errors: list[str] = []

    async def one(n: int) -> None:
        async with stdio(backend, home, "dora") as client:
            await workload(client, f"s{n}", errors, rounds=3)

    async with anyio.create_task_group() as tg:
        for n in range(4):
            tg.start_soon(one, n)
    assert errors == []
    await check_store(home, {"dora": 12})
