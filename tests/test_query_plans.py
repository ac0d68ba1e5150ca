"""The SQLite query plans that keep large stores fast: the statements the store runs, asked of the planner.

A plan that falls back to sorting or reading every row of a user is invisible at test sizes and costs
seconds at 100,000 memories (docs/benchmarks.md), so the plans themselves are checked.
"""

from __future__ import annotations

import pytest

from pocketmem.app import PocketMem
from pocketmem.service.writing.add_request import AddRequest

pytestmark = pytest.mark.anyio
USER = "global"


class PlanRecorder:
    """Wraps the store's connection so each statement it runs is also explained."""

    def __init__(self, app: PocketMem) -> None:
        self.app = app
        self.plans: list[tuple[str, str]] = []

    async def explain_during(self, action) -> None:
        import aiosqlite

        original = aiosqlite.Connection.execute_fetchall
        recorder = self

        async def recording(conn, sql, parameters=()):
            if sql.lstrip().lower().startswith(("select", "with")):
                rows = await original(conn, "explain query plan " + sql, parameters)
                recorder.plans.append((sql, " | ".join(str(r[3]) for r in rows)))
            return await original(conn, sql, parameters)

        aiosqlite.Connection.execute_fetchall = recording
        try:
            await action()
        finally:
            aiosqlite.Connection.execute_fetchall = original

    def plan_of(self, fragment: str) -> str:
        found = [plan for sql, plan in self.plans if fragment in sql]
        assert found, f"no statement containing {fragment!r} ran"
        return found[0]


async def test_keyword_search_checks_owners_in_the_narrow_index(app):
    # Another user's memories fill the index: every match's owner is checked, in the narrow index.
    others = [AddRequest(content=f"别人的第{i}条笔记：香菜和{i}号菜") for i in range(70)]
    await app.writing.add_many("someone-else", others)
    await app.writing.add(USER, AddRequest(content="用户不喜欢香菜", keywords=["coriander"]))
    recorder = PlanRecorder(app)
    await recorder.explain_during(lambda: app.retrieval.recall(USER, _recall("香菜能吃吗")))
    plan = recorder.plan_of("join memories m indexed by memories_owner")
    assert "COVERING INDEX memories_owner" in plan, plan


async def test_keyword_search_of_a_sole_owner_ranks_in_fts5_alone(app):
    # One person's notebook: FTS5 ranks its matches without a join, and only the best are checked.
    for i in range(3):
        await app.writing.add(USER, AddRequest(content=f"用户第{i}次说不喜欢香菜"))
    recorder = PlanRecorder(app)
    found = []
    await recorder.explain_during(lambda: _keep(found, app.retrieval.recall(USER, _recall("香菜能吃吗"))))
    plan = recorder.plan_of("where memories_fts match ? order by 2 limit ?")
    assert "SCAN memories_fts VIRTUAL TABLE" in plan and "memories_owner" not in plan, plan
    assert not any("memories_owner" in sql for sql, _ in recorder.plans)
    assert len(found[0].memories) == 3


async def test_shortlisted_memories_are_looked_up_by_id(app):
    first = await app.writing.add(USER, AddRequest(content="用户不喜欢香菜"))
    recorder = PlanRecorder(app)
    await recorder.explain_during(lambda: app.retrieval.recall(USER, _recall("香菜能吃吗")))
    # Similarity and index terms in one read: each wide row once, by its id, its terms by rowid.
    plan = recorder.plan_of("vec_distance_cosine(m.embedding, ?) end, f.terms")
    assert "SEARCH m USING INDEX" in plan and "(id=?)" in plan and "SCAN m" not in plan, plan

    async def terms_alone() -> None:
        async with app.store.read() as reader:
            await reader.indexed_terms(USER, [first.memory_id])

    recorder = PlanRecorder(app)
    await recorder.explain_during(terms_alone)
    plan = recorder.plan_of("f.terms, f.keywords from memories m")
    assert "COVERING INDEX memories_by_user_and_id" in plan, plan


async def _keep(found: list, call) -> None:
    found.append(await call)


async def test_maintenance_walks_a_users_memories_by_index_without_sorting_them(app):
    for i in range(3):
        await app.writing.add(USER, AddRequest(content=f"用户的第{i}个计划是学{'琴棋书'[i]}"))
    recorder = PlanRecorder(app)
    await recorder.explain_during(app.maintenance.run)
    plan = recorder.plan_of("coalesce(last_active_at, created_at)")
    assert "memories_by_user_and_id" in plan and "TEMP B-TREE" not in plan, plan


async def test_the_profile_files_read_only_their_own_rows(app):
    # Every add re-renders the profile files: the core memories, the project page and the most recalled lessons
    # come from those rows alone, whatever else the store holds (walking every memory in date or use order until
    # enough are found cost 15 ms each at 10,000 memories).
    from pocketmem.base.models import Category
    from pocketmem.store.types import MemoryFilter

    walks = [AddRequest(content=f"用户第{i}次去{'东南西北'[i % 4]}边的公园") for i in range(40)]
    await app.writing.add_many(USER, walks)
    for i in range(3):
        lesson = f"教训{i}：部署前先跑{'测试检查备份'[i]}"
        await app.writing.add(USER, AddRequest(content=lesson, category=Category.lesson))
    recorder = PlanRecorder(app)
    found: dict[str, list] = {}

    async def read() -> None:
        async with app.store.read() as reader:
            found["lessons"] = await reader.most_used(USER, (Category.lesson,), 10)
            found["core"] = await reader.core_memories(USER, 10)
            found["project"], _ = await reader.list_memories(USER, MemoryFilter(category=Category.project, limit=5))

    await recorder.explain_during(read)
    assert [m.category for m in found["lessons"]] == [Category.lesson] * 3
    lessons = recorder.plan_of("order by use_count desc")
    assert "INDEX memories_by_category_uses" in lessons and "TEMP B-TREE" not in lessons, lessons
    assert "INDEX memories_core" in recorder.plan_of("persistence >= ?")
    assert "INDEX memories_by_category" in recorder.plan_of("and category = ? order by created_at desc")


def _recall(query: str):
    from pocketmem.service.recall.retrieval import RecallRequest

    return RecallRequest(query=query, record=False)


@pytest.mark.parametrize(
    ("query", "index"),
    [
        ("?", "memories_by_created"),
        ("?sort=importance", "memories_by_importance"),
        ("?page=3&per_page=1", "memories_by_created"),
        ("?sort=uses", "memories_by_uses"),
    ],
)
async def test_the_management_lists_pages_come_from_an_index_without_sorting(app, query, index):
    from pocketmem.service.manage.browse import BrowseQuery

    for i in range(3):
        await app.writing.add(USER, AddRequest(content=f"用户的第{i}个爱好是{'琴棋书'[i]}"))
    params = dict(p.split("=") for p in query.lstrip("?").split("&") if p)
    recorder = PlanRecorder(app)
    await recorder.explain_during(lambda: app.browse.page(USER, BrowseQuery.model_validate(params)))
    plan = recorder.plan_of("rowid in (select rowid from memories")
    inner = plan.split("LIST SUBQUERY 1 | ")[1].removesuffix(" | USE TEMP B-TREE FOR ORDER BY")  # outer: 50 rows
    assert f"COVERING INDEX {index}" in inner and "TEMP B-TREE" not in inner, plan
    assert not any("count(*)" in sql for sql, _ in recorder.plans)  # the kept active count, not a scan
