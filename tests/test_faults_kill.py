"""Faults: a SIGKILL storm over stdio. Ten rounds of `pocketmem serve` (stdio, as Claude Desktop starts it),
each killed at a random moment inside a stream of adds, forgets, patches with reasons and secrets in side
texts; after every round each acknowledged write is there, exactly as acknowledged, replaying an
acknowledged operation_id returns the first answer, and the file passes SQLite's integrity check.
(test_crash.py does the same over HTTP with four concurrent writers.)"""

from __future__ import annotations

import os
import random
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from pocketmem.app import PocketMem
from pocketmem.base.models import Status
from pocketmem.store.types import MemoryFilter

from .helpers import MakeSettings
from .servers import server_env

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
ROUNDS = 10
USER = "global"
SECRET = "sk-proj-" + "Kx9" * 9


@dataclass
class Acked:
    added: dict[str, str] = field(default_factory=dict)  # memory id -> content
    operations: dict[str, str] = field(default_factory=dict)  # operation id -> memory id
    forgotten: set[str] = field(default_factory=set)
    patched: dict[str, str] = field(default_factory=dict)  # core id -> content after the patch
    count: int = 0
    # Sent but perhaps not acknowledged (the kill may land between commit and reply): allowed, not required.
    tried_forgets: set[str] = field(default_factory=set)
    tried_patches: set[str] = field(default_factory=set)


def launcher(pid_file: Path) -> list[str]:
    """A server whose pid we know: the child writes it, then becomes `pocketmem serve` (same pid)."""
    code = (
        "import os, sys\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'pocketmem', 'serve'])\n"
    )
    return ["-c", code]


async def stream(client: Client, rng: random.Random, acked: Acked, round_no: int) -> None:
    core = next(iter(acked.patched), None)
    for i in range(10_000):
        roll = rng.random()
        live = [m for m in acked.added if m not in acked.forgotten and m not in acked.patched]
        if roll < 0.15 and live:
            target = rng.choice(live)
            acked.tried_forgets.add(target)
            result = await client.call_tool("forget_memory", {"memory_id": target, "reason": f"token={SECRET}"})
            if not result.is_error:
                acked.forgotten.add(target)
        elif roll < 0.25 and core is not None:
            acked.tried_patches.add(f"第{round_no}轮第{i}次补充")
            result = await client.call_tool("patch_core_memory", {
                "memory_id": core, "patch": f"第{round_no}轮第{i}次补充", "mode": "replace", "reason": f"pw: {SECRET}"})
            if not result.is_error:
                acked.patched[core] = result.structured_content["memory"]["content"]
                acked.tried_patches.clear()  # only patches sent after the last acknowledged one may show
        else:
            content = f"第{round_no}轮第{i}条：用户记录了一件事 {rng.randrange(10**9)}"
            op = f"r{round_no}-{i}"
            result = await client.call_tool("add_memory", {
                "content": content, "operation_id": op, "source": f"chat {SECRET}", "keywords": ["记录"]})
            if not result.is_error:
                memory_id = result.structured_content["memory_id"]
                acked.added[memory_id] = content
                acked.operations[op] = memory_id
        acked.count += 1


async def check(make_settings: MakeSettings, home: Path, tmp_path: Path, acked: Acked) -> None:
    settings = make_settings(tmp_path, home=home)
    async with PocketMem(settings) as app:
        async with app.store.read() as reader:
            active, _ = await reader.list_memories(USER, MemoryFilter(statuses=(Status.active,), limit=10_000))
            trashed, _ = await reader.list_memories(USER, MemoryFilter(statuses=(Status.trashed,), limit=10_000))
        by_id = {m.id: m.content for m in active}
        gone = {m.id for m in trashed}
        for memory_id, content in acked.added.items():
            if memory_id in acked.forgotten:
                assert memory_id in gone, memory_id
            elif memory_id in acked.patched:
                # The last acknowledged patch, or a later one whose reply the kill cut off.
                assert by_id[memory_id] in {acked.patched[memory_id], *acked.tried_patches}
            elif memory_id in acked.tried_forgets and memory_id in gone:
                continue  # forgotten, but the reply never came: allowed
            else:
                assert by_id.get(memory_id) == content, memory_id
        health = await app.store.health()
        assert health["integrity"] == "ok" and health["keyword_orphans"] == 0, health
        assert (await app.doctor())["unreadable_times"] == []
    raw = await anyio.Path(settings.db_path).read_bytes()
    assert SECRET.encode() not in raw


async def test_a_sigkill_storm_over_stdio_loses_nothing_acknowledged(tmp_path, backend, make_settings):
    rng = random.Random(20261126)
    home = tmp_path / "home"
    pid_file = tmp_path / "server.pid"
    acked = Acked()
    env = server_env(backend, home, POCKETMEM_USER=USER, POCKETMEM_MAX_ACTIVE="100000")
    params = StdioServerParameters(command=sys.executable, args=launcher(pid_file), env=env)
    kills = 0
    replays: list[tuple[str, str]] = []
    for round_no in range(ROUNDS):
        pid_file.unlink(missing_ok=True)
        before = acked.count
        with anyio.move_on_after(60):
            try:
                async with Client(params, mode="legacy") as client:
                    if round_no == 0:
                        core = await client.call_tool("add_memory", {
                            "content": "用户的名字叫林晓", "scores": {"persistence": 1.0}, "category": "person"})
                        acked.added[core.structured_content["memory_id"]] = "用户的名字叫林晓"
                        acked.patched[core.structured_content["memory_id"]] = "用户的名字叫林晓"
                    else:  # replaying an acknowledged operation returns the first answer
                        op, memory_id = rng.choice(sorted(acked.operations.items()))
                        replay = await client.call_tool("add_memory", {
                            "content": acked.added[memory_id], "operation_id": op, "source": f"chat {SECRET}",
                            "keywords": ["记录"]})
                        replays.append((memory_id, replay.structured_content["memory_id"]))
                    pid = int(pid_file.read_text())
                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(stream, client, random.Random(rng.random()), acked, round_no)
                        while acked.count == before:  # noqa: ASYNC110 - a loaded machine may take seconds to the first ack
                            await anyio.sleep(0.02)
                        await anyio.sleep(rng.uniform(0.3, 1.5))
                        os.kill(pid, signal.SIGKILL)
                        kills += 1
            except Exception:  # noqa: BLE001 - the client sees its server die; that is the point
                pass
        assert acked.count > before, f"round {round_no} acknowledged nothing"
        assert all(expected == got for expected, got in replays), replays
        await check(make_settings, home, tmp_path, acked)
    assert kills == ROUNDS
    print(f"storm: {kills} kills, {acked.count} calls, {len(acked.added)} adds, {len(acked.forgotten)} forgets, "
          f"{len(replays)} replays acknowledged and found")
