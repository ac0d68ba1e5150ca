"""Vectors of two models never mix (service/writing/vectors.py), on both backends: a command run with another
embedder leaves the store's embedder and vectors as they are and reads by the keyword index; a running server whose
store another process switched to another embedder stops writing and comparing vectors, and says why; a store whose
record of its embedder was lost is not taken for the configured one by `doctor --repair`, but re-embedded by the
next server. Through real processes: the two built-in embedders on one store, a read-only command between
a server's recalls, and a read-only home opened with the other embedder."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from pocketmem.app import PocketMem
from pocketmem.base.models import Status
from pocketmem.mcp.server import build_server
from pocketmem.providers.embeddings import HashEmbedder
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.service.writing.vectors import UNKNOWN

from .helpers import USER, add, call, device
from .servers import FACTS, ServerProcess, cli, connect, crashed_store, run_cli, server_env

pytestmark = [pytest.mark.anyio]

USE = "use:universal-sentence-encoder-multilingual-3"


class LaterHash(HashEmbedder):
    """The built-in embedder under another version's tag: to the store, another built-in embedder."""

    @property
    def model(self) -> str:
        return "v9-test"


async def vector_tags(app: PocketMem) -> dict[str, str]:
    """memory id -> the embedder recorded with its vector, for every memory that keeps one."""
    async with app.store.read() as reader:
        memories = await reader.scan_memories(USER, tuple(Status), None, 1000)
        vectors = await reader.memory_vectors(USER, [m.id for m in memories])
    return {m.id: m.embed_model for m in memories if m.id in vectors}


@pytest.mark.backends
async def test_a_command_with_another_embedder_changes_nothing_and_reads_by_words(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as made:
        for fact in FACTS:
            await add(made, fact)
        core = await add(made, "用户的名字叫林晓", scores={"persistence": 1.0})
        tag, before = made.embedder.tag, await vector_tags(made)
    assert len(before) == len(FACTS) + 1

    other = PocketMem(settings, clock=clock, embedder=LaterHash())
    await other.open()  # as `pocketmem list`, `search`, `add`... open it
    try:
        found = await other.retrieval.recall(USER, RecallRequest(query="小白是谁"))
        assert [m.content for m in found.memories][:1] == ["用户的猫叫小白"]
        assert found.degraded is not None and found.degraded.startswith("keyword path — vectors:")
        assert f"made by {tag}, not by the configured embedder hash:v9-test" in found.degraded
        added = await other.writing.add(USER, AddRequest(content="用户喜欢喝乌龙茶"))
        assert added.status == "stored" and "stored without a vector and found by keyword" in added.message
        patched = await other.patching.patch_core(USER, core, "大家叫她小林", "append", None)
        assert patched.status == "patched"
        assert await other.embed_queue.run_once() == 0  # nothing of this embedder's joins the store
        assert await other.store.get_meta("embedder") == tag
        after = await vector_tags(other)
    finally:
        await other.close()
    assert after == {mid: t for mid, t in before.items() if mid != core}  # the patched text waits for its vector
    async with PocketMem(settings, clock=clock) as again:  # the store's own embedder: vectors as before
        found = await again.retrieval.recall(USER, RecallRequest(query="小白是谁"))
        assert found.degraded is None and found.memories[0].content == "用户的猫叫小白"
        assert await again.embed_queue.run_once() == 2  # the memory and the patch stored meanwhile
        assert set((await vector_tags(again)).values()) == {tag}


@pytest.mark.backends
async def test_a_server_whose_store_is_switched_under_it_stops_using_vectors(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path)
    app = PocketMem(settings, clock=clock)
    async with Client(build_server(settings, app=app)) as client:
        for fact in FACTS:
            await call(client, "add_memory", {"content": fact})
        first = await call(client, "recall_memories", {"query": "小白是谁"})
        assert first["degraded"] is None and first["memories"][0]["content"] == "用户的猫叫小白"

        # Another server starts with another built-in embedder: it re-embeds the store with it.
        switcher = PocketMem(settings, clock=clock, embedder=LaterHash())
        await switcher.open(serving=True)
        try:
            assert await switcher.store.get_meta("embedder") == "hash:v9-test"
            recalled = await call(client, "recall_memories", {"query": "小白是谁"})
            assert recalled["memories"][0]["content"] == "用户的猫叫小白"
            assert "vectors: this store's vectors are made by hash:v9-test" in recalled["degraded"]
            assert "restart pocketmem, or (re)start `pocketmem serve` to re-embed" in recalled["degraded"]
            added = await call(client, "add_memory", {"content": "用户喜欢喝乌龙茶"})
            assert added["status"] == "stored" and "stored without a vector" in added["message"]
            assert await app.embed_queue.run_once() == 0
            assert await switcher.embed_queue.run_once() == len(FACTS) + 1  # the new memory's too
            tags = await vector_tags(switcher)
            assert len(tags) == len(FACTS) + 1 and set(tags.values()) == {"hash:v9-test"}
        finally:
            await switcher.close()


@pytest.mark.backends
async def test_a_lost_embedder_record_is_not_claimed_by_repair_but_re_embedded_by_the_next_server(
    tmp_path, clock, make_settings, backend
):
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as made:
        for fact in FACTS:
            await add(made, fact)
        async with made.store.write() as tx:  # PostgreSQL's doctor recreates no table: its rows are lost instead
            await tx.execute("drop table store_meta" if backend.name == "sqlite" else "delete from store_meta")

    doctor = PocketMem(settings, clock=clock, embedder=LaterHash())
    await doctor.store.open()
    try:
        report = await doctor.doctor()
        assert any("no record of the embedder that made them" in p for p in report["problems"])
        report = await doctor.doctor(repair=True)
        assert report["embedder"]["store_embedder"] == UNKNOWN
        assert any("no model is assumed; it is marked for re-embedding" in line for line in report["repaired"])
        assert report["embedder"]["note"].startswith("the store does not know which embedder made its vectors")
        assert not [p for p in report["problems"] if "embedder" in p or "vector" in p], report["problems"]
    finally:
        await doctor.close()

    async with PocketMem(settings, clock=clock) as reader:  # not even the embedder that made them trusts them
        found = await reader.retrieval.recall(USER, RecallRequest(query="小白是谁"))
        assert found.memories[0].content == "用户的猫叫小白"
        assert "does not record which embedder made its vectors" in found.degraded
        assert await reader.store.get_meta("embedder") == UNKNOWN

    server = PocketMem(settings, clock=clock, embedder=LaterHash())
    await server.open(serving=True)
    try:
        await server.embed_queue.run_once()
        assert await server.store.get_meta("embedder") == "hash:v9-test"
        tags = await vector_tags(server)
        assert len(tags) == len(FACTS) and set(tags.values()) == {"hash:v9-test"}
        found = await server.retrieval.recall(USER, RecallRequest(query="小白是谁"))
        assert found.degraded is None
    finally:
        await server.close()


@pytest.mark.backends
async def test_two_servers_starting_together_on_an_old_store_share_one_re_embedding_run(tmp_path, clock, make_settings):
    """Both read the old embedder before either switched the store: the second joins the first's run instead of
    emptying the vectors it wrote and beginning again from zero; the run's count is kept in the store, once."""
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as made:
        for fact in FACTS:
            await add(made, fact)
    first, second = (PocketMem(settings, clock=clock, embedder=LaterHash()) for _ in range(2))
    await first.open()
    await second.open()
    try:
        old = await first.store.get_meta("embedder")
        assert old == await second.store.get_meta("embedder") == HashEmbedder().tag
        await first.embed_queue.begin(old, len(FACTS))
        joined = await second.embed_queue.begin(old, len(FACTS))
        assert (joined.total, joined.done, joined.finished) == (len(FACTS), 0, False)
        await second.embed_queue.run_once()  # the joiner does the work; its progress is the run's
        tags = await vector_tags(first)
        assert len(tags) == len(FACTS) and set(tags.values()) == {"hash:v9-test"}
        run = await first.embed_queue.load()
        assert run is not None and (run.done, run.finished) == (len(FACTS), True)
        await first.embed_queue.begin(old, len(FACTS))  # a late start changes nothing either
        assert len(await vector_tags(first)) == len(FACTS)
    finally:
        await second.close()
        await first.close()


async def test_sync_refuses_a_notebook_whose_vectors_are_another_embedders(tmp_path, clock, make_settings, library_url):
    async with device(make_settings, tmp_path, "a", library_url, clock) as made:
        await add(made, "用户的猫叫小白")
    other = PocketMem(
        make_settings(tmp_path, db=tmp_path / "a.db", cloud_url=library_url, sync_interval=0), clock=clock,
        embedder=LaterHash(),
    )
    async with other:
        report = await other.sync.run()
        assert not report.ok
        assert "this notebook cannot sync: this store's vectors are made by hash:v2-512" in report.error
        assert await other.library.get_meta("embedder") is None  # nothing travelled, not even the library's record


def test_every_command_that_reads_leaves_another_embedders_store_as_it_is(tmp_path, capsys):
    home = tmp_path / "home"
    for fact in FACTS[:3]:
        assert run_cli(capsys, home, "add", fact).returncode == 0  # the built-in embedder's store
    db = home / "memory.db"

    def record() -> tuple[str, list[tuple[str, str]]]:
        with sqlite3.connect(db) as conn:
            (embedder,) = conn.execute("select value from store_meta where key = 'embedder'").fetchone()
            rows = conn.execute("select id, embed_model from memories where embedding is not null order by id")
            return embedder, rows.fetchall()

    before = record()
    assert before[0] == "hash:v2-512" and len(before[1]) == 3
    memory_id = before[1][0][0]
    for args in (("list",), ("search", "小白"), ("show", memory_id), ("export",), ("trash",), ("pending",),
                 ("stats",), ("doctor",)):
        done = run_cli(capsys, home, *args, POCKETMEM_EMBEDDER="use")
        assert done.returncode in (0, 1) if args == ("doctor",) else done.returncode == 0, (args, done.stderr)
        assert record() == before, args
    searched = run_cli(capsys, home, "search", "小白是谁", POCKETMEM_EMBEDDER="use")
    assert "用户的猫叫小白" in searched.stdout and "vectors: this store's vectors are made by hash" in searched.stderr
    added = run_cli(capsys, home, "add", "用户喜欢喝乌龙茶", POCKETMEM_EMBEDDER="use")
    assert added.returncode == 0 and "stored without a vector" in added.stderr
    assert record() == before


@pytest.mark.slow
async def test_a_read_only_command_between_a_servers_recalls_and_a_second_server(tmp_path, backend):
    """Two built-in embedders on one store, each its own process: a `hash` command while a `use` server runs
    changes nothing; a `hash` server that re-embeds the store leaves the `use` server on the keyword index,
    and no `use` vector joins the `hash` store."""
    home = tmp_path / "home"
    for fact in ("用户养了一只叫小白的猫", "用户对花生过敏", "用户每周三打羽毛球"):
        done = await anyio.to_thread.run_sync(lambda f=fact: cli(backend, home, "add", f, POCKETMEM_EMBEDDER="use"))
        assert done.returncode == 0, done.stderr
    with ServerProcess(backend, home, "http", env={"POCKETMEM_EMBEDDER": "use"}) as use_server:
        async with connect(use_server.url) as client:
            cat = {"query": "What is my cat called?"}
            first = await call(client, "recall_memories", cat)
            assert first["degraded"] is None and first["memories"][0]["content"] == "用户养了一只叫小白的猫"
            listed = await anyio.to_thread.run_sync(lambda: cli(backend, home, "list"))
            assert listed.returncode == 0, listed.stderr
            again = await call(client, "recall_memories", cat)
            assert again["degraded"] is None and again["memories"][0]["content"] == "用户养了一只叫小白的猫"
            assert store_record(home)[0] == USE

            with ServerProcess(backend, home, "http") as hash_server:  # it re-embeds the store
                assert store_record(home)[0] == "hash:v2-512"
                by_words = await call(client, "recall_memories", cat)
                assert "vectors: this store's vectors are made by hash:v2-512" in by_words["degraded"]
                added = await call(client, "add_memory", {"content": "用户的狗叫旺财"})
                assert "stored without a vector" in added["message"]
                async with connect(hash_server.url) as other:  # its queue runs once a client is there
                    with anyio.move_on_after(60):
                        while store_record(home)[2]:  # noqa: ASYNC110 - another process's writes: no event
                            await anyio.sleep(0.2)
                    embedder, tags, missing = store_record(home)
                    assert (embedder, set(tags), missing) == ("hash:v2-512", {"hash:v2-512"}, 0)
                    dog = await call(other, "recall_memories", {"query": "用户的狗叫旺财", "explain": True})
                    assert dog["memories"][0]["content"] == "用户的狗叫旺财"
                    assert dog["memories"][0]["breakdown"]["semantic"] > 0


@pytest.mark.slow
def test_a_read_only_home_is_read_and_served_with_the_other_embedder(backend):
    """Root ignores file modes: the commands run as `nobody` there; otherwise the folder is made read-only."""
    base = Path(tempfile.mkdtemp(prefix="pocketmem-ro-"))
    os.chmod(base, 0o755)
    home = base / "home"
    try:
        crashed_store(backend, home)  # made by the built-in embedder
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("needs setpriv to drop root")
            command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
        else:
            for path in home.iterdir():
                path.chmod(0o444)
            home.chmod(0o555)
            command = [sys.executable]
        env = server_env(backend, home, POCKETMEM_EMBEDDER="use")
        for args in (("list",), ("search", "小白是谁"), ("export",)):
            done = subprocess.run([*command, "-m", "pocketmem", *args], env=env, capture_output=True, text=True,
                                  timeout=120, stdin=subprocess.DEVNULL)
            assert done.returncode == 0, (args, done.stderr)
            assert "用户的猫叫小白" in done.stdout, args

        async def serve() -> dict:
            params = StdioServerParameters(command=command[0], args=[*command[1:], "-m", "pocketmem", "serve"],
                                           env=env)
            async with Client(params, mode="legacy") as client:
                return await call(client, "recall_memories", {"query": "小白是谁"})

        recalled = anyio.run(serve)
        assert [m["content"] for m in recalled["memories"]] == ["用户的猫叫小白"]
        assert "vectors: this store's vectors are made by hash:v2-512" in recalled["degraded"]
    finally:
        home.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def store_record(home: Path) -> tuple[str, list[str], int]:
    """The store's embedder, the embedders recorded with its vectors, and how many memories have none."""
    with sqlite3.connect(home / "memory.db") as conn:
        row = conn.execute("select value from store_meta where key = 'embedder'").fetchone()
        tags = [r[0] for r in conn.execute("select embed_model from memories where embedding is not null")]
        (missing,) = conn.execute("select count(*) from memories where embedding is null").fetchone()
    return (row[0] if row else ""), tags, missing

