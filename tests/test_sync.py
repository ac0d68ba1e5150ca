"""Sync: two SQLite notebooks (two devices) and one PostgreSQL library, all real.

Each device has its own clock; edits, deletes, restores, purges, evictions and the trash handover
are played out and both notebooks and the library must agree afterwards, with nothing deleted
coming back and nothing uploaded twice. A TCP proxy cuts the connection in the middle of a sync.
"""

from __future__ import annotations

from datetime import timedelta

import anyio
import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.models import Category, Status
from pocketmem.mcp.server import build_server
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.transfer.sync import backoff
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.postgres.store import PostgresStore

from .helpers import START, USER, add, as_an_older_release, device, error, rows, synced
from .pg import Proxy
from .servers import cli

pytestmark = pytest.mark.anyio
async def library_rows(app: PocketMem, status: Status = Status.active) -> dict[str, str]:
    return await rows(app.library, status)


async def test_two_devices_converge_with_deletes_respected(tmp_path, library_url, make_settings):
    ca, cb = FixedClock(START), FixedClock(START + timedelta(seconds=1))
    async with (
        device(make_settings, tmp_path, "a", library_url, ca) as a,
        device(make_settings, tmp_path, "b", library_url, cb) as b,
    ):
        coriander = await add(a, "用户不喜欢香菜，吃到会很反感。")
        home = await add(a, "用户住在杭州")
        name = await add(a, "用户叫林晓", scores={"persistence": 1})
        cat = await add(b, "用户养了一只叫年糕的猫")
        for app in (a, b, a):
            await synced(app)
        assert await rows(a.store) == await rows(b.store) == await library_rows(a)
        assert set(await rows(a.store)) == {coriander, home, name, cat}

        # Both patch the core memory: the later edit (B's) wins everywhere.
        ca.advance(minutes=5)
        await a.patching.patch_core(USER, name, "朋友叫她小林", "append", None)
        cb.advance(minutes=10)
        await b.patching.patch_core(USER, name, "用户叫林晓，英文名 Lin", "replace", None)
        # B edits nothing else; A deletes `home` after B had last seen it.
        ca.advance(minutes=1)
        await a.trash.forget(USER, home, "搬家了")
        for app in (a, b, a, b):
            await synced(app)
        for store in (a.store, b.store, a.library):
            assert (await rows(store))[name] == "用户叫林晓，英文名 Lin"
            assert home not in await rows(store)
        assert home in await rows(b.store, Status.trashed)
        async with a.library.read() as r:
            revisions = await r.list_revisions(USER, name)
        assert {rev.new_content for rev in revisions} >= {"用户叫林晓，英文名 Lin"}
        # Both patches are history on every device, the losing one too.
        for store in (a.store, b.store):
            async with store.read() as r:
                here = await r.list_revisions(USER, name)
            assert {rev.id for rev in here} == {rev.id for rev in revisions}, store

        # Deleted on A and synced to B; restored on A later: it comes back on B too.
        ca.advance(minutes=1)
        await a.trash.forget(USER, cat, None)
        for app in (a, b):
            await synced(app)
        assert cat not in await rows(b.store) and cat in await rows(b.store, Status.trashed)
        ca.advance(minutes=1)
        await a.trash.restore(USER, cat)
        for app in (a, b):
            await synced(app)
        assert cat in await rows(b.store) and cat in await library_rows(a)

        # A second run changes nothing anywhere.
        for app in (a, b):
            again = await synced(app)
            assert again.uploaded == 0
            assert sum(u.downloaded + u.tombstones_downloaded for u in again.users) == 0
        assert (await a.stats(USER))["sync"]["pending_uploads"] == 0


async def test_a_todo_due_on_a_date_arrives_due_on_that_date(tmp_path, library_url, make_settings):
    """A due date alone is kept as the end of that day, an instant like any other: sync carries it unchanged."""
    async with (
        device(make_settings, tmp_path, "a", library_url, FixedClock(START)) as a,
        device(make_settings, tmp_path, "b", library_url, FixedClock(START)) as b,
    ):
        await add(a, "周五前交房租", category=Category.todo, due_at="2026-11-27")
        for app in (a, b):
            await synced(app)
        assert "- 周五前交房租（截止 2026-11-27）\n" in await b.user_card(USER)


async def test_an_edit_older_than_a_delete_does_not_bring_it_back(tmp_path, library_url, make_settings):
    ca, cb = FixedClock(START), FixedClock(START)
    async with (
        device(make_settings, tmp_path, "a", library_url, ca) as a,
        device(make_settings, tmp_path, "b", library_url, cb) as b,
    ):
        core = await add(a, "用户对花生过敏", scores={"persistence": 1})
        await synced(a)
        await synced(b)
        # B edits at 10:05 but syncs late; A deletes at 10:10 and syncs first.
        cb.advance(minutes=5)
        await b.patching.patch_core(USER, core, "严重", "append", None)
        ca.advance(minutes=10)
        await a.trash.forget(USER, core, None)
        await synced(a)
        await synced(b)
        await synced(a)
        for store in (a.store, b.store, a.library):
            assert core not in await rows(store), store
            assert core in await rows(store, Status.trashed)


async def test_the_trash_is_uploaded_once_then_cleared_keeping_tombstones(tmp_path, library_url, make_settings):
    clock = FixedClock(START)
    async with device(make_settings, tmp_path, "a", library_url, clock, sync_scopes="memory,memory.trash") as a:
        keep = await add(a, "用户喜欢爬山")
        gone = await add(a, "用户在学吉他")
        await a.trash.forget(USER, gone, None)
        first = await synced(a)
        assert first.users[0].trash_handed_over == 1
        assert await rows(a.store, Status.trashed) == {}
        async with a.store.read() as r:
            (tombstone,) = await r.all_tombstones(USER)
        assert tombstone.memory_id == gone and tombstone.cloud_synced_at is not None and tombstone.purged_at is None
        assert gone in await library_rows(a, Status.trashed) and keep in await library_rows(a)

        second = await synced(a)
        assert second.uploaded == 0
        async with a.library.read() as r:
            assert len(await r.all_tombstones(USER)) == 1
            assert [m.id for m in await r.get_memories(USER, [gone])] == [gone]
        # The local purge has nothing left to do, and nothing deleted returns on a pull.
        clock.advance(days=8)
        assert (await a.maintenance.run()).users[0].purged == []
        await synced(a)
        assert gone not in await rows(a.store) and await rows(a.store, Status.trashed) == {}


async def test_a_restore_of_trash_handed_to_the_library_says_where_it_is_and_how_to_bring_it_back(
    tmp_path, library_url, backend, make_settings
):
    ca, cb = FixedClock(START), FixedClock(START)
    trash_scope = {"sync_scopes": "memory,memory.trash"}
    async with (
        device(make_settings, tmp_path, "a", library_url, ca, **trash_scope) as a,
        device(make_settings, tmp_path, "b", library_url, cb) as b,  # keeps its trash on the device
    ):
        guitar = await add(a, "用户在学吉他")
        swim = await add(a, "用户每周三游泳")
        await synced(a)
        await synced(b)
        for memory_id in (guitar, swim):
            await a.trash.forget(USER, memory_id, None)
        assert (await synced(a)).users[0].trash_handed_over == 2
        await synced(b)  # the deletes reach b, which holds both in its trash

        # Where the memory is, and how to bring it back: the MCP tool and the CLI say the same.
        async with Client(build_server(a.settings, app=a)) as client:
            said = await error(client, "restore", {"memory_id": guitar})
        env = {"POCKETMEM_DB": str(tmp_path / "a.db"), "POCKETMEM_CLOUD_URL": library_url,
               "POCKETMEM_SYNC_SCOPES": "memory,memory.trash"}
        out = await anyio.to_thread.run_sync(lambda: cli(backend, tmp_path / "home", "restore", guitar, **env))
        assert out.returncode != 0 and guitar in out.stderr
        for text in (said, out.stderr):
            assert "may have been purged" not in text and "cloud library" in text, text
            assert f"pocketmem restore {guitar}" in text and "next sync brings it back here" in text, text

        # Both ways it names bring it back with the next sync: on a device holding it, and in the library itself.
        ca.advance(hours=1)
        cb.advance(hours=1)
        await b.trash.restore(USER, guitar)
        await synced(b)
        library = make_settings(tmp_path, database_url=library_url, max_active=10_000)
        async with PocketMem(library, clock=ca) as in_library:
            await in_library.trash.restore(USER, swim)
        await synced(a)
        assert {guitar, swim} <= set(await rows(a.store))


async def test_a_purge_without_the_trash_scope_reaches_the_library_and_the_other_device(
    tmp_path, library_url, make_settings
):
    ca, cb = FixedClock(START), FixedClock(START)
    async with (
        device(make_settings, tmp_path, "a", library_url, ca) as a,
        device(make_settings, tmp_path, "b", library_url, cb) as b,
    ):
        gone = await add(a, "用户的临时密码提示是生日")
        await synced(a)
        await synced(b)
        await a.trash.forget(USER, gone, None)
        await synced(a)
        assert gone in await library_rows(a, Status.trashed)  # the library trashed its copy; not the content upload
        ca.advance(days=8)
        cb.advance(days=8)
        assert (await a.maintenance.run()).users[0].purged == [gone]
        await synced(a)
        await synced(b)
        for store in (a.library, b.store):
            async with store.read() as r:
                assert await r.get_memory(USER, gone) is None, store
                assert all(t.purged_at is not None for t in await r.all_tombstones(USER))


async def test_eviction_stays_local_and_large_library_recall_finds_what_was_evicted(
    tmp_path, library_url, make_settings
):
    clock = FixedClock(START)
    async with device(make_settings, tmp_path, "a", library_url, clock, max_active=3) as a, device(make_settings, 
        tmp_path, "b", library_url, FixedClock(START)
    ) as b:
        old = await add(a, "用户小时候在成都住过三年", scores={"info": 0.2, "judge": 0.1})
        for text in ("用户喜欢爬山", "用户在学吉他", "用户每天跑步五公里"):
            clock.advance(minutes=1)
            await add(a, text, scores={"info": 0.9, "judge": 0.9})
        assert old in await rows(a.store, Status.trashed)
        await synced(a)
        assert len(await library_rows(a)) == 4 and old in await library_rows(a)
        await synced(b)
        assert old in await rows(b.store)
        await synced(a)
        assert old not in await rows(a.store) and len(await rows(a.store)) == 3

        result = await a.retrieval.recall(USER, RecallRequest(query="用户在成都住过吗", keywords=["成都"]))
        assert [(h.id, h.source) for h in result.memories] == [(old, "library")]
        assert "成都" in result.injection
        local_hit = await a.retrieval.recall(USER, RecallRequest(query="爬山", keywords=["爬山"]))
        assert local_hit.memories and all(h.source == "local" for h in local_hit.memories)


async def test_a_deleted_memory_is_not_recalled_from_the_library(tmp_path, library_url, make_settings):
    clock = FixedClock(START)
    async with device(make_settings, tmp_path, "a", library_url, clock) as a:
        gone = await add(a, "用户以前在成都工作")
        await synced(a)
        await a.trash.forget(USER, gone, None)  # not synced yet: the library still has it active
        result = await a.retrieval.recall(USER, RecallRequest(query="成都", keywords=["成都"]))
        assert result.memories == []


async def test_a_slow_or_absent_library_leaves_recall_on_time(tmp_path, library_db, postgres, make_settings):
    clock = FixedClock(START)
    async with Proxy(postgres.socket_path) as proxy:
        url = postgres.url(library_db, host="127.0.0.1", port=proxy.port)
        async with device(make_settings, tmp_path, "a", url, clock, max_active=1) as a:
            evicted = await add(a, "用户小时候在成都住过", scores={"info": 0.1, "judge": 0.1})
            clock.advance(minutes=1)
            await add(a, "用户喜欢爬山", scores={"info": 0.9})
            await synced(a)
            query = RecallRequest(query="成都", keywords=["成都"], record=False)
            assert [h.id for h in (await a.retrieval.recall(USER, query)).memories] == [evicted]

            import time

            proxy.delay = 3.0
            started = time.monotonic()
            slow = await a.retrieval.recall(USER, RecallRequest(query="爬山", keywords=["爬山"], record=False))
            assert time.monotonic() - started < 2.0
            assert [h.source for h in slow.memories] == ["local"]

            proxy.delay = 0.0
            proxy.refuse = True
            proxy.cut()
            down = await a.retrieval.recall(USER, RecallRequest(query="爬山", keywords=["爬山"], record=False))
            assert [h.source for h in down.memories] == ["local"]


async def test_an_unreachable_library_fails_the_run_and_the_trash_waits_for_its_handover(
    tmp_path, postgres, library_db, make_settings
):
    clock = FixedClock(START)
    async with Proxy(postgres.socket_path) as proxy:
        proxy.refuse = True
        url = postgres.url(library_db, host="127.0.0.1", port=proxy.port)
        async with device(
            make_settings, tmp_path, "a", url, clock, sync_scopes="memory,memory.trash", cloud_timeout=1
        ) as a:
            gone = await add(a, "用户在学吉他")
            await a.trash.forget(USER, gone, None)
            report = await a.sync.run()
            assert not report.ok and report.error
            status = (await a.stats(USER))["sync"]
            assert status["last_error"] and status["consecutive_failures"] == 1 and status["pending_uploads"] >= 1
            clock.advance(days=8)
            assert (await a.maintenance.run()).users[0].purged == []  # the library is to keep the trash

            proxy.refuse = False
            await synced(a)
            status = (await a.stats(USER))["sync"]
            assert status["last_error"] is None and status["consecutive_failures"] == 0
            assert status["pending_uploads"] == 0
            assert set(await library_rows(a, Status.trashed)) == {gone}
            assert await rows(a.store, Status.trashed) == {}


def test_backoff_doubles_after_failures_up_to_an_hour():
    assert [backoff(60, n) for n in range(4)] == [60, 120, 240, 480]
    assert backoff(60, 30) == 3600
    assert backoff(7200, 3) == 7200  # an interval longer than the cap is never shortened


async def test_a_connection_cut_mid_sync_loses_and_duplicates_nothing(tmp_path, postgres, library_db, make_settings):
    database = library_db
    clock = FixedClock(START)
    async with Proxy(postgres.socket_path) as proxy:
        url = postgres.url(database, host="127.0.0.1", port=proxy.port)
        async with device(
            make_settings, tmp_path, "a", url, clock, sync_scopes="memory,memory.trash", max_active=1000
        ) as a:
            results = await a.writing.add_many(
                USER, [AddRequest(content=f"用户的第{i}条记录：喜欢编号{i}的东西") for i in range(450)]
            )
            ids = [r.memory_id for r in results]
            for memory_id in ids[:250]:
                await a.trash.forget(USER, memory_id, None)

            proxy.cut_after(40_000)
            cut = await a.sync.run()
            assert not cut.ok
            partial = len(await library_rows(a)) + len(await library_rows(a, Status.trashed))
            assert partial < 450

            await synced(a)
            assert set(await library_rows(a)) == set(ids[250:])
            assert set(await library_rows(a, Status.trashed)) == set(ids[:250])
            assert await rows(a.store, Status.trashed) == {}
            async with a.library.read() as r:
                tombstones = await r.all_tombstones(USER)
            assert sorted(t.memory_id for t in tombstones) == sorted(ids[:250])  # one each, no duplicates
            async with a.store.read() as r:
                assert all(t.cloud_synced_at is not None for t in await r.all_tombstones(USER))

        # A second device pulling through a connection that is cut half-way gets everything on the retry.
        async with Proxy(postgres.socket_path) as proxy:
            url = postgres.url(database, host="127.0.0.1", port=proxy.port)
            async with device(make_settings, tmp_path, "b", url, FixedClock(START)) as b:
                proxy.cut_after(150_000)
                assert not (await b.sync.run()).ok
                await synced(b)
                assert set(await rows(b.store)) == set(ids[250:])
                assert await rows(b.store, Status.trashed) == {}
                assert (await synced(b)).users[0].downloaded == 0


@pytest.mark.slow
async def test_the_cli_syncs_and_stats_show_the_state(tmp_path, library_url, backend, make_settings):
    import json
    import subprocess
    import sys

    from .servers import server_env

    home = tmp_path / "home"
    async with PocketMem(make_settings(tmp_path, cloud_url=library_url), clock=FixedClock(START)) as app:
        await add(app, "用户喜欢爬山")
    env = server_env(backend, home, POCKETMEM_CLOUD_URL=library_url)
    async def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
        with anyio.fail_after(120):
            return await anyio.run_process([sys.executable, "-m", "pocketmem", *args], env=env, check=False)

    out = await cli("sync", env=env)
    assert out.returncode == 0, out.stderr.decode()
    assert json.loads(out.stdout)["users"][0]["uploaded"] == 1
    stats = json.loads((await cli("stats", env=env)).stdout)
    assert stats["sync"]["pending_uploads"] == 0 and stats["sync"]["last_success_at"]
    assert "memory" in stats["sync"]["scopes"]
    missing = await cli("sync", env=server_env(backend, home))
    assert missing.returncode == 2 and "POCKETMEM_CLOUD_URL" in missing.stderr.decode()


async def test_a_library_store_opens_without_waiting_for_the_server():
    store = PostgresStore("postgresql://postgres@127.0.0.1:9/none", wait=False, timeout=0.5)
    await store.open()
    try:
        with pytest.raises(Exception, match="PostgreSQL|timeout|connect"):
            async with store.read() as r:
                await r.user_ids()
    finally:
        await store.close()


async def test_a_notebook_from_before_sync_upgrades_and_uploads_everything_once(
    tmp_path, library_url, monkeypatch, make_settings
):
    from pocketmem.store.sqlite import migrations as sqlite_migrations

    clock = FixedClock(START)
    monkeypatch.setattr(sqlite_migrations, "MIGRATIONS", sqlite_migrations.MIGRATIONS[:3])
    as_an_older_release(monkeypatch)
    async with device(make_settings, tmp_path, "a", library_url, clock) as old:
        kept = await add(old, "用户不喜欢香菜")
        gone = await add(old, "用户在学吉他")
        await old.trash.forget(USER, gone, None)
        assert (await old.store.health())["schema"] == "m003_tokens"
    monkeypatch.undo()
    async with device(make_settings, tmp_path, "a", library_url, clock) as new:
        assert (await new.store.health())["schema"] == sqlite_migrations.latest()
        assert (await new.stats(USER))["sync"]["pending_uploads"] == 2  # the memory and the tombstone
        first = await synced(new)
        assert (first.users[0].uploaded, first.users[0].tombstones_uploaded) == (1, 1)
        assert set(await library_rows(new)) == {kept}
        assert (await synced(new)).uploaded == 0


async def test_the_server_syncs_on_a_timer(tmp_path, library_url, make_settings):
    import anyio
    from mcp import Client

    from pocketmem.mcp.server import build_server

    settings = make_settings(tmp_path, cloud_url=library_url, sync_interval=0.05)
    app = PocketMem(settings, clock=FixedClock(START))
    async with Client(build_server(settings, app=app)) as client:
        result = await client.call_tool("add_memory", {"content": "用户喜欢爬山"})
        memory_id = result.structured_content["memory_id"]
        with anyio.fail_after(10):
            while memory_id not in await library_rows(app):  # noqa: ASYNC110 - the library has no change event
                await anyio.sleep(0.05)
        stats = await client.read_resource("memory://stats")
        assert '"sync"' in stats.contents[0].text


async def test_an_evicted_memory_waits_in_the_trash_until_it_has_reached_the_library(
    tmp_path, postgres, library_db, make_settings
):
    clock = FixedClock(START)
    async with Proxy(postgres.socket_path) as proxy:
        url = postgres.url(library_db, host="127.0.0.1", port=proxy.port)
        async with device(make_settings, tmp_path, "a", url, clock, max_active=2, cloud_timeout=1) as a:
            first = await add(a, "用户喜欢爬山", scores={"info": 0.9})
            await synced(a)
            proxy.refuse = True  # a week offline: everything below is acknowledged, nothing reaches the library
            proxy.cut()
            offline = []
            for text in ("用户小时候在成都住过", "用户在学吉他", "用户每天跑步五公里"):
                clock.advance(minutes=1)
                offline.append(await add(a, text, scores={"info": 0.5}))
            gone = await add(a, "用户的临时密码提示是生日", scores={"info": 0.95})
            await a.trash.forget(USER, gone, None)
            evicted = set(await rows(a.store, Status.trashed)) - {gone}
            assert len(evicted) >= 2
            assert not (await a.sync.run()).ok
            clock.advance(days=8)
            assert (await a.maintenance.run()).users[0].purged == [gone]  # a delete is purged on time
            assert set(await rows(a.store, Status.trashed)) == evicted

            proxy.refuse = False
            await synced(a)
            assert set(await library_rows(a)) == {first, *offline}
            assert set((await a.maintenance.run()).users[0].purged) == evicted  # now they may go
            assert set(await library_rows(a)) == {first, *offline}
