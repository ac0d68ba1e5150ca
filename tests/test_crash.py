"""Crash safety: SIGKILL the server in the middle of a stream of writes, restart, and check that
every acknowledged write is there, nothing half-written is visible, the keyword and vector
indexes agree with the memories table, and SQLite's integrity check passes.

Each round starts `pocketmem serve --transport http` on the same file, lets four clients stream
add / supersede / forget calls (a small cap makes most adds also evict, so transactions span many
rows), and kills the process at a random moment. The moments come from a fixed seed, so a failure
can be replayed; the seed is in the test id.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import anyio
import pytest

from pocketmem.app import PocketMem
from pocketmem.base.config import Settings
from pocketmem.store.sqlite.driver import connect as sqlite_connect
from tests.servers import ServerProcess, connect

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROUNDS = 6
WRITERS = 4
USER = "crash"
CALL_TIMEOUT = 10


@dataclass
class Acked:
    """What the server confirmed before it died."""

    added: dict[str, str] = field(default_factory=dict)  # memory id -> content
    superseded: dict[str, str] = field(default_factory=dict)  # memory id -> the memory that superseded it
    forgotten: set[str] = field(default_factory=set)
    sent: set[str] = field(default_factory=set)  # every content ever sent, acknowledged or not
    operations: set[str] = field(default_factory=set)
    first: anyio.Event = field(default_factory=anyio.Event)  # set at the round's first acknowledgement


async def writer(url: str, mode: str, name: str, rng: random.Random, acked: Acked, free: list[str]) -> None:
    """Stream writes until the server goes away; record only what comes back as success."""
    try:
        async with connect(url, mode=mode) as client:
            for i in range(10_000):
                roll = rng.random()
                if roll < 0.15 and free:
                    target = free.pop(rng.randrange(len(free)))
                    tool, args = "forget_memory", {"memory_id": target}
                else:
                    content = f"{name} 第{i}条：用户记录了一件事 {rng.randrange(10**9)}"
                    args = {"content": content, "operation_id": f"{name}-{i}", "keywords": ["记录", name]}
                    target = free.pop(rng.randrange(len(free))) if roll < 0.30 and free else None
                    if target:
                        args["supersedes"] = target
                    tool = "add_memory"
                    acked.sent.add(content)
                with anyio.fail_after(CALL_TIMEOUT):
                    result = await client.call_tool(tool, args)
                if result.is_error:
                    continue  # e.g. the target was evicted meanwhile; rejected calls change nothing
                out = result.structured_content
                acked.first.set()
                if tool == "forget_memory":
                    acked.forgotten.add(target)
                else:
                    acked.added[out["memory_id"]] = args["content"]
                    acked.operations.add(args["operation_id"])
                    if target:
                        acked.superseded[target] = out["memory_id"]
                    free.append(out["memory_id"])
    except Exception:  # noqa: BLE001 - the server was killed under us: that is the point
        return


def verify(db_path, acked: Acked) -> dict[str, int]:
    db = sqlite_connect(str(db_path), load_vectors=True)
    try:
        assert [r[0] for r in db.execute("pragma integrity_check")] == ["ok"]
        rows = {r[0]: r[1:] for r in db.execute("select id, content, status, deleted_at from memories")}
        forgotten = {r[0] for r in db.execute("select id from memories where delete_reason = 'user_delete'")}
        for memory_id, content in acked.added.items():
            assert memory_id in rows, f"acknowledged memory {memory_id} lost"
            assert rows[memory_id][0] == content
        for memory_id, by in acked.superseded.items():
            # Forgetting the version that replaced it (acknowledged or not) made it current again, and the cap
            # may have evicted it since; otherwise it is history.
            wanted = {"active", "trashed"} if by in forgotten else {"superseded"}
            assert rows[memory_id][1] in wanted, memory_id
        for memory_id in acked.forgotten:
            assert rows[memory_id][1] == "trashed", memory_id
        ops = {r[0] for r in db.execute("select operation_id from memory_operations where user_id = ?", (USER,))}
        assert acked.operations <= ops

        # Nothing half-written: every row is one we sent, and everything a write touches came with it.
        assert {r[0] for r in rows.values()} <= acked.sent
        created = {r[0] for r in db.execute("select memory_id from memory_events where kind = 'created'")}
        assert created == set(rows)
        event_targets = {r[0] for r in db.execute("select memory_id from memory_events where memory_id is not null")}
        assert event_targets <= set(rows)
        for memory_id, (_, status, deleted_at) in rows.items():
            if status == "trashed":
                assert deleted_at is not None
                (stones,) = db.execute(
                    "select count(*) from memory_tombstones where memory_id = ?", (memory_id,)
                ).fetchone()
                assert stones >= 1, memory_id
            if status == "superseded":
                (successors,) = db.execute(
                    "select count(*) from memories where supersedes = ?", (memory_id,)
                ).fetchone()
                assert successors == 1, memory_id
        (fts,) = db.execute("select count(*) from memories_fts").fetchone()
        (vectors,) = db.execute("select count(*) from memory_vectors").fetchone()
        assert fts == vectors == len(rows)
        (stale,) = db.execute(
            "select count(*) from memories m left join memory_vectors v on v.rowid = m.rowid "
            "left join memories_fts f on f.rowid = m.rowid "
            "where v.rowid is null or f.rowid is null or v.status != m.status or v.user_id != m.user_id"
        ).fetchone()
        assert stale == 0
        return {"memories": len(rows), "acked": len(acked.added)}
    finally:
        db.close()


async def store_health(home) -> dict:
    async with PocketMem(Settings(home=home, tz="Asia/Shanghai", embedder="hash")) as app:
        return await app.store.health()


@pytest.mark.parametrize("seed", [20261126])
async def test_sigkill_mid_write_loses_nothing_acknowledged(tmp_path, seed, backend):
    rng = random.Random(seed)
    home = tmp_path / "home"
    env = {"POCKETMEM_USER": USER, "POCKETMEM_MAX_ACTIVE": "25"}
    acked = Acked()
    totals = []
    for round_no in range(ROUNDS):
        free: list[str] = [m for m in acked.added if m not in acked.superseded and m not in acked.forgotten]
        server = ServerProcess(backend, home, "http", env=env).start()
        try:
            kill_after = rng.uniform(0.05, 1.5)
            acked.first = anyio.Event()
            async with anyio.create_task_group() as tg:
                for w in range(WRITERS):
                    mode = "legacy" if w % 2 == 0 else "auto"
                    tg.start_soon(
                        writer, server.url, mode, f"r{round_no}w{w}", random.Random(rng.random()), acked, free
                    )
                with anyio.move_on_after(20):
                    await acked.first.wait()
                await anyio.sleep(kill_after)  # somewhere in a stream of writes, mid-transaction or between
                server.kill()
                tg.cancel_scope.deadline = anyio.current_time() + CALL_TIMEOUT + 5
        finally:
            server.kill()
        totals.append(verify(home / "memory.db", acked))
        health = await store_health(home)
        assert health["integrity"] == "ok" and health["keyword_orphans"] == 0 and health["vector_mismatches"] == 0
    assert len(acked.added) >= ROUNDS, totals  # every round wrote before its kill

    with ServerProcess(backend, home, "http", env=env) as server:  # and the store still serves after all that
        async with connect(server.url) as client:
            result = await client.call_tool("add_memory", {"content": "崩溃之后还能写入"})
            assert not result.is_error and result.structured_content["status"] == "stored"
