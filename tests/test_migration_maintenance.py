"""m002_maintenance: a store written before it opens, upgrades in place and loses nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import to_iso
from pocketmem.base.models import Category
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.sqlite import migrations as sqlite_migrations

from .helpers import as_an_older_release

pytestmark = pytest.mark.anyio
USER = "global"


async def test_an_m001_store_upgrades_with_its_rows(tmp_path, clock, monkeypatch, make_settings):
    settings = make_settings(tmp_path)
    monkeypatch.setattr(sqlite_migrations, "MIGRATIONS", sqlite_migrations.MIGRATIONS[:1])
    as_an_older_release(monkeypatch)
    async with PocketMem(settings, clock=clock) as old:
        kept = (await old.writing.add(USER, AddRequest(content="用户不喜欢香菜", keywords=["香菜"]))).memory_id
        chore = (await old.writing.add(USER, AddRequest(content="周五交报告", category=Category.todo,
                                                            due_at=clock.now()))).memory_id
        gone = (await old.writing.add(USER, AddRequest(content="用户想学滑雪"))).memory_id
        # Trashed the way the m001 code did it (its tombstones had no purged_at column).
        now, purge = to_iso(clock.now()), to_iso(clock.now() + timedelta(days=7))
        async with old.store.write() as tx:
            await tx.execute(
                "update memories set status = 'trashed', deleted_at = ?, purge_at = ?, delete_reason = 'user_delete' "
                "where id = ?", (now, purge, gone))
            await tx.execute("update memory_vectors set status = 'trashed' where rowid = "
                           "(select rowid from memories where id = ?)", (gone,))
            await tx.execute(
                "insert into memory_tombstones (tombstone_id, memory_id, user_id, deleted_at, purge_at, reason) "
                "values ('t1', ?, ?, ?, ?, 'user_delete')", (gone, USER, now, purge))
        assert (await old.store.health())["schema"] == "m001_initial"
    monkeypatch.undo()

    async with PocketMem(settings, clock=clock) as new:
        health = await new.store.health()
        assert health["schema"] == sqlite_migrations.latest() and health["schema_current"]
        assert (health["memories"], health["keyword_rows"], health["vector_rows"]) == (3, 3, 3)
        async with new.store.read() as r:
            (tombstone,) = await r.all_tombstones(USER)
            assert (tombstone.memory_id, tombstone.purged_at) == (gone, None)
            assert [t.id for t in await r.open_todos(USER, clock.now(), 10, due_by=clock.now())] == [chore]
            assert await r.usage(USER) == {}
            indexes = {row[0] for row in await r.fetch_all("select name from sqlite_master where type = 'index'")}
        assert {"memories_open_todos", "memories_expiring", "events_by_user_time"} <= indexes
        clock.advance(days=7)
        report = await new.maintenance.run()
        assert report.users[0].purged == [gone]
        hits = await new.retrieval.recall(USER, RecallRequest(query="晚饭能放香菜吗", keywords=["香菜"]))
        assert [m.id for m in hits.memories] == [kept]
