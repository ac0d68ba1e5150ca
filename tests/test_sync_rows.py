"""Sync row by row: a library row this release cannot read, or a memory the library will not take, is left out
and reported (user, id, where, why); the rest of that user's rows and every other user still travel, `pocketmem
sync` says so in its exit code, and large-library recall says the library could not answer.

Two SQLite notebooks and one PostgreSQL library, all real (tests/pg.py).
"""

from __future__ import annotations

import io
import json
import sys

import anyio
import pytest

from pocketmem.base.clock import FixedClock
from pocketmem.base.models import Status
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest

from .helpers import START, USER, add, device, rows, synced
from .pg import PgTestServer
from .servers import cli

pytestmark = pytest.mark.anyio


async def test_an_unreadable_library_row_is_left_out_and_everything_else_arrives(
    tmp_path, postgres: PgTestServer, library_db, library_url, make_settings
):
    async with (
        device(make_settings, tmp_path, "a", library_url, FixedClock(START)) as a,
        device(make_settings, tmp_path, "b", library_url, FixedClock(START)) as b,
    ):
        await a.writing.add("bob", AddRequest(content="bob 喜欢爬山"))
        await synced(a)
        cat = await add(b, "用户养了一只猫叫豆豆")
        hike = await add(b, "用户周末去黄山")
        trip = (await b.writing.add("bob", AddRequest(content="bob 下个月去西藏"))).memory_id
        await synced(b)
        # A row written by a newer release: a category this one does not know.
        postgres.psql(f"update memories set category = 'hobby' where id = '{cat}'", library_db)

        report = await synced(a)
        (skipped,) = [row for user in report.users for row in user.skipped]
        assert [u.user_id for u in report.users if u.skipped] == [USER]
        assert skipped["id"] == cat and skipped["where"] == "library" and "hobby" in skipped["why"]
        assert "cloud library" in skipped["advice"] and "doctor" not in skipped["advice"]
        assert set(await rows(a.store)) == {hike}
        async with a.store.read() as r:
            assert [m.id for m in await r.get_memories("bob", [trip])] == [trip]

        # Recall asks the library for what the notebook lacks, and says it could not read it.
        result = await a.retrieval.recall(USER, RecallRequest(query="豆豆", keywords=["豆豆"], record=False))
        assert result.memories == []
        assert result.degraded and "cloud library" in result.degraded and cat in result.degraded

        # Once this device can read the row (here: put back without a new change), the next sync brings it.
        postgres.psql(
            "begin; set local pocketmem.quiet = 'on'; "
            f"update memories set category = 'fact' where id = '{cat}'; commit;",
            library_db,
        )
        again = await synced(a)
        assert again.skipped == 0 and set(await rows(a.store)) == {hike, cat}
        assert (await synced(a)).users[0].downloaded == 0


async def test_a_memory_whose_id_is_another_users_in_the_library_is_left_out(
    tmp_path, library_url, make_settings
):
    async with (
        device(make_settings, tmp_path, "a", library_url, FixedClock(START)) as a,
        device(make_settings, tmp_path, "b", library_url, FixedClock(START)) as b,
    ):
        await b.writing.add("carol", AddRequest(content="carol 在学法语"))
        await synced(b)
        exported = io.StringIO()
        await b.exporter.export(exported, users=["carol"])
        # The same memory imported as another user's: its id is carol's in the library.
        await a.exporter.import_lines(exported.getvalue().replace('"carol"', f'"{USER}"').splitlines())
        (clash,) = await rows(a.store)
        mine = await add(a, "用户喜欢爬山")
        fishing = (await a.writing.add("dave", AddRequest(content="dave 喜欢钓鱼"))).memory_id

        report = await synced(a)
        (skipped,) = [row for user in report.users for row in user.skipped]
        assert skipped["id"] == clash and skipped["where"] == "notebook"
        assert "belongs to another user" in skipped["why"]
        assert f"pocketmem forget {clash}" in skipped["advice"] and "leave the cloud library's row" in skipped["advice"]
        async with a.library.read() as r:
            assert [m.id for m in await r.get_memories(USER, [mine, clash])] == [mine]
            assert [m.id for m in await r.scan_memories("dave", (Status.active,), None, 10)] == [fishing]
            assert [m.id for m in await r.get_memories("carol", [clash])] == [clash]


async def test_a_memory_another_user_uploaded_first_is_reported_once_and_blocks_nothing(
    tmp_path, library_url, backend, make_settings
):
    """Alice's own memory, not yet uploaded, whose id mallory's device uploaded first (an import of her export): the
    first owner in the library keeps the id; alice's device reports its copy once, and her later syncs go on."""
    async with (
        device(make_settings, tmp_path, "a", library_url, FixedClock(START)) as a,
        device(make_settings, tmp_path, "m", library_url, FixedClock(START)) as m,
    ):
        peanuts = await add(a, "用户对花生过敏")
        exported = io.StringIO()
        await a.exporter.export(exported, users=[USER])
        await m.exporter.import_lines(exported.getvalue().replace(f'"{USER}"', '"mallory"').splitlines())
        await synced(m)
        hike = await add(a, "用户喜欢爬山")

    env = {"POCKETMEM_DB": str(tmp_path / "a.db"), "POCKETMEM_CLOUD_URL": library_url}
    first = await anyio.to_thread.run_sync(lambda: cli(backend, tmp_path / "home", "sync", **env))
    assert first.returncode == 1, first.stderr
    assert f"left out memories row {peanuts} of user {USER!r} in this notebook" in first.stderr
    assert f"pocketmem forget {peanuts}" in first.stderr
    second = await anyio.to_thread.run_sync(lambda: cli(backend, tmp_path / "home", "sync", **env))
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["users"][0]["skipped"] == []

    async with device(make_settings, tmp_path, "a", library_url, FixedClock(START)) as a:
        assert (await a.stats(USER))["sync"]["pending_uploads"] == 0
        async with a.library.read() as r:
            assert [x.id for x in await r.get_memories("mallory", [peanuts])] == [peanuts]
            assert [x.id for x in await r.get_memories(USER, [peanuts, hike])] == [hike]
        # As the advice says: forgotten here and added again, it travels under a new id.
        await a.trash.forget(USER, peanuts, None)
        again = await add(a, "用户对花生过敏")
        assert (await synced(a)).skipped == 0
        assert (await rows(a.library))[again] == "用户对花生过敏"


@pytest.mark.slow
async def test_the_cli_reports_a_left_out_row_and_exits_1(
    tmp_path, postgres: PgTestServer, library_db, library_url, backend, make_settings
):
    from .servers import server_env

    home = tmp_path / "home"
    env = server_env(backend, home, POCKETMEM_CLOUD_URL=library_url)
    async with device(make_settings, tmp_path, "b", library_url, FixedClock(START)) as b:
        bad = await add(b, "用户养了一只猫叫豆豆")
        await synced(b)
    postgres.psql(f"update memories set category = 'hobby' where id = '{bad}'", library_db)
    with anyio.fail_after(120):
        out = await anyio.run_process([sys.executable, "-m", "pocketmem", "sync"], env=env, check=False)
    stderr = out.stderr.decode()
    assert out.returncode == 1, stderr
    assert json.loads(out.stdout)["ok"] is True
    assert f"left out memories row {bad} of user 'global' in the cloud library" in stderr
    assert "doctor" not in stderr
