"""What only the PostgreSQL backend has: its migrations, term counters, per-user write locks and HNSW path.

(The behaviour suites — lifecycle, retrieval, tools, maintenance, todos, review, export, batch, privacy,
notifications, thirty days, isolation over HTTP — run on it too, through the `backend` fixture.)
"""

from __future__ import annotations

import json

import anyio
import pytest

from pocketmem.app import PocketMem
from pocketmem.base.models import Status
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.postgres import migrations as postgres_migrations
from pocketmem.store.postgres import tx as postgres_tx
from pocketmem.store.postgres.store import PostgresStore

from .helpers import NeighbourSearchingEmbedder
from .servers import cli

pytestmark = [pytest.mark.anyio, pytest.mark.postgres_only]
USER = "global"


async def recount(store) -> dict[str, int]:
    async with store.read() as r:
        rows = await r.fetch_all(
            "select t, count(*) from memories, unnest(pm_term_set(terms, keyword_terms)) t group by t"
        )
    return {t: n for t, n in rows}


async def test_migrations_are_recorded_and_run_once(settings, clock):
    url = settings.database_url.get_secret_value()
    stores = [PostgresStore(url) for _ in range(3)]
    async with anyio.create_task_group() as tg:  # servers starting together
        for store in stores:
            tg.start_soon(store.open)
    try:
        health = await stores[0].health()
        assert health["schema"] == "pg010_forgotten_hash" and health["schema_current"]
        async with stores[1].read() as r:
            assert await postgres_migrations.applied(r.connection) == [
                "pg001_initial",
                "pg002_user_scan",
                "pg003_user_terms",
                "pg006_profile",
                "pg004_use_index",
                "pg005_category_uses",
                "pg007_schema_gaps",
                "pg008_chain_events",
                "pg009_short_lived_not_core",
                "pg010_forgotten_hash",
            ]
    finally:
        for store in stores:
            await store.close()


async def test_a_column_added_to_a_migration_after_its_release_reaches_every_database(make_settings, tmp_path, clock):
    """pg006_profile was given `profile_files.earlier` after its release: a database made by that release gets
    it from pg007_schema_gaps, and doctor names a column that is missing still and adds it with --repair."""
    settings = make_settings(tmp_path, profile_files="on")
    url = settings.database_url.get_secret_value()
    store = PostgresStore(url)
    await store.open()
    try:
        async with store.write() as tx:  # as the first profile release left it
            await tx.execute("alter table profile_files drop column earlier")
            await tx.execute("delete from schema_migrations where name = 'pg007_schema_gaps'")
    finally:
        await store.close()
    async with PocketMem(settings, clock=clock) as app:
        await app.writing.add(USER, AddRequest(content="用户住在杭州"))
        async with app.store.read() as r:  # the profile files were written after the add
            assert await r.fetch_all("select count(*) from profile_files where earlier = '[]'") == [(4,)]
        async with app.store.write() as tx:
            await tx.execute("alter table profile_files drop column earlier")
        report = await app.doctor()
        assert report["problems"] == [
            "column profile_files.earlier is missing (added with its default value): run `pocketmem doctor --repair`"
        ]
        report = await app.doctor(repair=True)
        assert report["ok"] and report["repaired"] == ["column profile_files.earlier was missing: added"]


async def test_term_counters_follow_every_write_and_fold(app, clock):
    ids = []
    for text in ("用户不喜欢香菜", "香菜和芫荽是一种东西", "用户喜欢火锅", "用户住在杭州"):
        ids.append((await app.writing.add(USER, AddRequest(content=text, keywords=["香菜"]))).memory_id)
    await app.trash.forget(USER, ids[2], None)
    clock.advance(days=8)
    await app.maintenance.run()  # purges ids[2] and folds the counters
    counts, total = await _counts(app, list(await recount(app.store)))
    assert counts == await recount(app.store) and total == 3
    async with app.store.read() as r:
        folded = await r.fetch_all("select term, count(*) from memory_term_counts group by term having count(*) > 1")
    assert folded == []
    health = await app.store.health()
    assert health["count_mismatches"] == 0 and health["keyword_orphans"] == 0


async def _counts(app, terms):
    """Per term, how many stored memories hold it (the counters), and how many are stored ('' counts rows)."""
    async with app.store.read() as r:
        rows = await r.fetch_all(
            "select term, sum(delta) from memory_term_counts where term = any(%s) group by term", (["", *terms],)
        )
    counts = {t: int(n) for t, n in rows}
    total = counts.pop("", 0)
    return {t: n for t, n in counts.items() if n > 0}, total


async def test_one_users_writes_never_interleave_across_processes(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path)
    first, second = PocketMem(settings, clock=clock), PocketMem(settings, clock=clock)
    async with first, second:
        results = []

        async def add(app):
            results.append(await app.writing.add(USER, AddRequest(content="用户对花生过敏", operation_id=None)))

        async with anyio.create_task_group() as tg:
            for app in (first, second, first, second):
                tg.start_soon(add, app)
        assert sorted(r.status for r in results) == ["duplicate", "duplicate", "duplicate", "stored"]
        async with first.store.read() as r:
            assert await r.count_active(USER) == 1


async def test_a_large_users_neighbours_come_from_the_hnsw_index(settings, clock, monkeypatch):
    async with PocketMem(settings, clock=clock, embedder=NeighbourSearchingEmbedder()) as app:
        texts = [
            f"用户的第{i}个爱好是{h}" for i, h in enumerate("跑步 吉他 摄影 游泳 爬山 读书 下棋 钓鱼 画画 滑雪".split())
        ]
        await app.writing.add_many(USER, [AddRequest(content=t) for t in texts])
        vector = await app.embedder.embed("爬山")
        async with app.store.read() as r:
            exact = await r.vector_neighbours(USER, vector, 3, (Status.active,))
        monkeypatch.setattr(postgres_tx, "EXACT_SCAN_ROWS", 2)  # this user now counts as large
        async with app.store.read() as r:
            through_index = await r.vector_neighbours(USER, vector, 3, (Status.active,))
        assert through_index[0] == exact[0] and "爬山" in (await app.get_memory(USER, exact[0][0]))["content"]


async def test_the_sort_by_uses_and_the_most_recalled_lessons_read_a_use_index(app, monkeypatch):
    from pocketmem.base.models import Category
    from pocketmem.service.manage.browse import BrowseQuery

    await app.writing.add_many(
        USER, [AddRequest(content=f"教训{i}：部署前先{s}", category=Category.lesson) for i, s in enumerate("测查备")]
    )
    plans: list[str] = []
    original = postgres_tx.PostgresTx._all  # noqa: SLF001 - explained on the way through

    async def explaining(self, sql, params=()):
        if "order by use_count" in sql:
            await self.connection.execute("set local enable_seqscan = off")  # a tiny table is read whole otherwise
            rows = await original(self, "explain " + sql, params)
            plans.append(" | ".join(r[0] for r in rows))
        return await original(self, sql, params)

    monkeypatch.setattr(postgres_tx.PostgresTx, "_all", explaining)
    await app.browse.page(USER, BrowseQuery.model_validate({"sort": "uses"}))
    async with app.store.read() as r:
        assert len(await r.most_used(USER, (Category.lesson,), 10)) == 3
    assert len(plans) == 2, plans
    for plan, index in zip(plans, ["memories_by_uses", "memories_by_category_uses"], strict=True):
        assert f"{index} " in plan and "Sort" not in plan.replace("Sort Key", ""), plan
async def _waits(store, holder, second) -> bool:
    """Whether `second` (a coroutine function) is held up while a write transaction locked by `holder` is open.

    `holder(tx)` locks inside the open transaction; `second` runs to the end once the first transaction ends.
    """
    holding, release, done = anyio.Event(), anyio.Event(), anyio.Event()

    async def first() -> None:
        async with store.write() as tx:
            await holder(tx)
            holding.set()
            await release.wait()

    async def then() -> None:
        await holding.wait()
        await second()
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        tg.start_soon(then)
        await holding.wait()
        with anyio.move_on_after(1.0):
            await done.wait()
        waited = not done.is_set()
        release.set()
        with anyio.fail_after(20):
            await done.wait()
    return waited


async def test_a_write_opened_for_a_user_waits_only_for_that_users_writes(app):
    def lock(user):
        async def holder(tx):
            await tx.lock_user(user)
        return holder

    def write_for(user):
        async def second():
            async with app.store.write(user_id=user) as tx:
                await tx.ensure_user(user, app.clock.now())
        return second

    assert await _waits(app.store, lock("alice"), write_for("alice"))  # one user: serialised
    assert not await _waits(app.store, lock("alice"), write_for("bob"))  # two users: side by side


async def test_the_services_open_their_writes_for_the_user(app):
    first = await app.writing.add(USER, AddRequest(content="用户住在杭州"))

    async def hold_user(tx):
        await tx.lock_user(USER)

    async def hold_several(tx):
        await tx.lock_users(["someone-else", USER])

    async def forget():
        await app.trash.forget(USER, first.memory_id, None)

    async def add():
        await app.writing.add(USER, AddRequest(content="用户喜欢爬山"))

    assert await _waits(app.store, hold_user, add)
    assert await _waits(app.store, hold_several, forget)
    async with app.store.read() as r:
        assert await r.count_active(USER) == 1


def test_the_doctor_finds_a_fresh_database_without_vectors_fine(tmp_path, backend, postgres):
    """A database pocketmem has only migrated: no memory, so no vector column size or index yet (sized on first use)."""
    name = f"pm_fresh_{tmp_path.name[-8:].replace('-', '_').lower()}"
    postgres.psql(f"create database {name}")
    try:
        url = postgres.url(name)
        report = cli(backend, tmp_path / "home", "doctor", POCKETMEM_DATABASE_URL=url)
        assert report.returncode == 0, report.stdout + report.stderr
        found = json.loads(report.stdout)
        assert found["ok"] is True and not any("vector index" in p for p in found["problems"]), found
        assert found["store"]["vectors_available"] is False and found["store"]["memories"] == 0
    finally:
        postgres.drop(name)
