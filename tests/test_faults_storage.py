"""Faults: storage and start-up. Disk full, a read-only store, a damaged file, a store that cannot be opened,
and lines on stdin that are not JSON-RPC: each gets one clear answer, and nothing acknowledged is lost."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.mcp.server import build_server
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest

from .helpers import START
from .servers import FACTS, RawStdio, cli, crashed_store, server_env

pytestmark = [pytest.mark.anyio]
USER = "global"


async def contents(client) -> list[str]:
    result = await client.call_tool("list_memories", {"limit": 500})
    return sorted(item["content"] for item in result.structured_content["items"])


def connections(app: PocketMem) -> list:
    store = app.store
    return [c for c in {id(c): c for c in (store._writer, store._reader, store._bookkeeper)}.values()]  # noqa: SLF001


async def test_disk_full_is_a_tool_error_saying_nothing_was_written(app, settings):
    async with Client(build_server(settings, app=app)) as client:
        for fact in FACTS:
            assert not (await client.call_tool("add_memory", {"content": fact})).is_error
        # A full disk, as SQLite sees it: the file may not grow by one more page.
        for conn in connections(app):
            pages = (await conn.execute_fetchall("pragma page_count"))[0][0]
            await conn.execute(f"pragma max_page_count = {pages}")
        acknowledged = list(FACTS)
        refused = None
        for i in range(200):
            text = f"用户第{i}次提到的长长的事情：" + "很长的描述" * 300
            result = await client.call_tool("add_memory", {"content": text})
            if result.is_error:
                refused = result.content[0].text
                break
            acknowledged.append(text)
        assert refused is not None, "the page limit never took effect"
        assert "is full" in refused and "nothing was written" in refused and "internal error" not in refused
        assert await contents(client) == sorted(acknowledged)
        recalled = await client.call_tool("recall_memories", {"query": "小白是谁"})
        assert not recalled.is_error and "小白" in recalled.structured_content["injection"]
        for conn in connections(app):
            await conn.execute("pragma max_page_count = 1073741823")
        assert not (await client.call_tool("add_memory", {"content": "用户喜欢喝乌龙茶"})).is_error


@pytest.mark.slow
@pytest.mark.parametrize("shm", [True, False], ids=["with-shm", "wal-without-shm"])
async def test_a_read_only_store_still_answers_recall_and_lists(shm, backend):
    # Root ignores file modes, so the server runs as `nobody` there; otherwise the folder is made read-only.
    # Without the -shm file SQLite cannot open a WAL store in a folder it may not write: it is read from a copy.
    base = Path(tempfile.mkdtemp(prefix="pocketmem-ro-"))
    os.chmod(base, 0o755)
    home = base / "home"
    try:
        crashed_store(backend, home)
        if not shm:
            (home / "memory.db-shm").unlink()
        env = server_env(backend, home)
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("needs setpriv to drop root")
            command, args = "setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
        else:
            for path in home.iterdir():
                path.chmod(0o444)
            home.chmod(0o555)
            command, args = sys.executable, []
        params = StdioServerParameters(command=command, args=[*args, "-m", "pocketmem", "serve"], env=env)
        async with Client(params, mode="legacy") as client:
            assert await contents(client) == sorted(FACTS)
            recalled = await client.call_tool("recall_memories", {"query": "小白是谁"})
            assert not recalled.is_error, recalled.content[0].text
            assert [m["content"] for m in recalled.structured_content["memories"]] == ["用户的猫叫小白"]
            added = await client.call_tool("add_memory", {"content": "用户喜欢喝乌龙茶"})
            assert added.is_error
            text = added.content[0].text
            assert "read-only" in text and "nothing was written" in text and "internal error" not in text
            assert not (await client.call_tool("list_trash", {})).is_error
        assert (home / "memory.db-shm").exists() == shm  # nothing was created beside the read-only store
    finally:
        home.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


async def test_a_damaged_keyword_index_sets_degraded_and_names_doctor(tmp_path, make_settings):
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        for fact in FACTS:
            await app.writing.add(USER, AddRequest(content=fact))
    with sqlite3.connect(settings.db_path) as db:
        db.execute("update memories_fts_data set block = zeroblob(length(block)) where id > 10")
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        await app.maintenance.run()  # the first run checks the file's structure
        result = await app.retrieval.recall(USER, RecallRequest(query="小白是谁"))
        assert result.degraded is not None and "pocketmem doctor" in result.degraded
        report = await app.doctor()
        assert "malformed" in report["store"]["integrity"]


# -- start-up ---------------------------------------------------------------------------------
def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "Event loop is closed" not in stderr
    return lines[0]


@pytest.mark.slow
def test_start_up_failures_are_one_line_with_a_fix_and_a_non_zero_exit(tmp_path, backend):
    home = tmp_path / "home"
    home.mkdir()
    (home / "memory.db").write_bytes(os.urandom(20_000))
    for args in (("serve",), ("doctor",), ("serve", "--transport", "http", "--port", "0"), ("stats",)):
        done = subprocess.run(
            [sys.executable, "-m", "pocketmem", *args], env=server_env(backend, home), capture_output=True, text=True,
            timeout=60, stdin=subprocess.DEVNULL,
        )
        assert done.returncode != 0, args
        if args == ("doctor",):
            assert json.loads(done.stdout)["ok"] is False and "Event loop is closed" not in done.stderr
            continue
        line = one_line(done.stderr)
        assert line.startswith("pocketmem: cannot open the memory store") and "not a database" in line, line
    debug = cli(backend, home, "--debug", "serve")
    assert debug.returncode == 2 and "Traceback" in debug.stderr

    other = tmp_path / "other"
    assert cli(backend, other, "add", "用户不吃香菜").returncode == 0  # made with the built-in embedder
    mismatch = cli(
        backend, other, "serve", POCKETMEM_EMBEDDER="openai", POCKETMEM_EMBED_API_KEY="x", POCKETMEM_EMBED_MODEL="m"
    )
    assert mismatch.returncode == 2
    assert "pocketmem reindex" in one_line(mismatch.stderr)


@pytest.mark.slow
def test_stdio_answers_an_over_deep_or_broken_line_with_a_parse_error(tmp_path, backend):
    raw = RawStdio(backend, tmp_path / "home")
    send, reply = raw.send, raw.reply
    try:
        raw.handshake()
        deep = "[" * 100_000 + "]" * 100_000
        send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"recall_memories","arguments":'
             '{"query":' + deep + "}}}")
        error = reply()
        assert error["id"] is None and error["error"]["code"] == -32700
        send("{oops")
        assert reply()["error"]["code"] == -32700
        # Bytes that are not UTF-8 are refused as HTTP refuses them (400), never stored as U+FFFD.
        send(b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"add_memory","arguments":'
             b'{"content":"\xff\xfe user likes tea"}}}')
        refused = reply()
        assert refused["id"] is None and refused["error"]["code"] == -32700
        assert "UTF-8" in refused["error"]["message"]
        send(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "list_memories", "arguments": {}}}))
        listed = reply()
        assert listed["id"] == 5 and listed["result"]["structuredContent"]["total"] == 0  # nothing was stored
        send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
        assert reply()["id"] == 3  # still serving
    finally:
        raw.close()


async def test_a_store_another_process_is_setting_up_is_opened_once_it_is_done(tmp_path, monkeypatch):
    """Servers starting together on a new file: a statement that finds its snapshot stale fails as locked at
    once (no busy wait). The opening is tried again, and a lock that never goes gives up with the clear error."""
    from pocketmem.store.sqlite import store as sqlite_store

    real = sqlite_store.SQLiteStore._migrate  # noqa: SLF001 - the seam where the race shows
    failures = {"left": 2}

    async def racing(self, conn):  # what a second process's CREATE TABLE meets while the first is migrating
        if failures["left"]:
            failures["left"] -= 1
            raise sqlite3.OperationalError("database is locked")
        await real(self, conn)

    monkeypatch.setattr(sqlite_store.SQLiteStore, "_migrate", racing)
    monkeypatch.setattr(sqlite_store, "OPEN_RETRY_PAUSE", 0.01)
    store = sqlite_store.SQLiteStore(str(tmp_path / "memory.db"))
    await store.open()
    try:
        async with store.read() as reader:
            assert await reader.user_ids() == []
    finally:
        await store.close()
    assert failures["left"] == 0

    failures["left"] = sqlite_store.LOCK_RETRIES + 1
    stuck = sqlite_store.SQLiteStore(str(tmp_path / "other.db"))
    with pytest.raises(sqlite_store.StoreError, match="database is locked"):
        await stuck.open()
    assert stuck._writer is None  # noqa: SLF001 - nothing left open
