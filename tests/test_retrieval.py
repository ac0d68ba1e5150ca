"""Recall through the service on a real SQLite file: candidates, ranking, touch, injection, fall-backs."""

from __future__ import annotations

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.models import Category, EventKind, Status
from pocketmem.service.recall.candidates import SEARCH_FLOOR, gather_candidates
from pocketmem.service.recall.fallback import Health
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.sqlite.driver import connect

from .helpers import NeighbourSearchingEmbedder

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"

STORE = [
    ("用户不喜欢香菜，吃到会很反感。", Category.preference, ["香菜", "coriander", "忌口"]),
    ("用户养了一只叫小白的猫，三岁了。", Category.person, ["猫", "宠物", "cat"]),
    ("Docker 构建需要使用 proxy-env 代理，否则网络超时。", Category.lesson, ["docker", "代理", "proxy"]),
    ("用户的项目用 Nuxt 4 和 SQLite。", Category.fact, ["nuxt", "前端", "数据库"]),
    ("Prefers TypeScript strict mode and functional style.", Category.preference, ["typescript", "编程风格"]),
]


async def fill(app: PocketMem) -> dict[str, str]:
    ids = {}
    for content, category, keywords in STORE:
        result = await app.writing.add(USER, AddRequest(content=content, category=category, keywords=keywords))
        ids[content] = result.memory_id
    return ids


async def recall(app: PocketMem, query: str, **kw):
    return await app.retrieval.recall(USER, RecallRequest(query=query, **kw))


async def test_two_character_chinese_keyword_finds_its_memory(app):
    ids = await fill(app)
    result = await recall(app, "香菜")
    assert result.memories[0].id == ids[STORE[0][0]]
    result = await recall(app, "小白")
    assert result.memories[0].id == ids[STORE[1][0]]


async def test_mixed_chinese_english_queries(app):
    ids = await fill(app)
    assert (await recall(app, "我要启动 docker compose")).memories[0].id == ids[STORE[2][0]]
    assert (await recall(app, "Nuxt 4 怎么配置路由")).memories[0].id == ids[STORE[3][0]]


async def test_unrelated_message_recalls_nothing(app):
    await fill(app)
    result = await recall(app, "今天天气不错")
    assert result.memories == [] and result.injection == ""


async def test_top_k_and_touching_hits(app, clock):
    ids = await fill(app)
    clock.advance(days=3)
    result = await recall(app, "香菜 猫 docker nuxt typescript", top_k=2)
    assert len(result.memories) == 2
    async with app.store.read() as r:
        touched = [await r.get_memory(USER, m.id) for m in result.memories]
        untouched = [
            m for m in [await r.get_memory(USER, i) for i in ids.values()] if m.id not in {t.id for t in touched}
        ]
        events = await r.list_events(USER, kinds=[EventKind.recalled])
    assert all(m.use_count == 1 and m.last_active_at == clock.now() for m in touched)
    assert all(m.use_count == 0 and m.last_active_at is None for m in untouched)
    assert events[0].payload["ids"] == [m.id for m in result.memories]


async def test_injection_text_carries_the_age_and_follows_the_query_language(app, clock):
    await app.writing.add(USER, AddRequest(content="你不喜欢香菜，吃到会很反感。", keywords=["香菜", "coriander"]))
    clock.advance(days=3)
    zh = await recall(app, "香菜能吃吗")
    assert zh.injection == "3天前的对话摘要“你不喜欢香菜，吃到会很反感。”"
    assert zh.memories[0].age == "3天前" and zh.memories[0].age_days == 3
    en = await recall(app, "can I eat coriander?")
    assert en.injection == "3 days ago: “你不喜欢香菜，吃到会很反感。”"


async def test_budget_trims_injection_but_not_the_list(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, injection_budget=60)
    async with PocketMem(settings, clock=clock) as app:
        await fill(app)
        result = await recall(app, "香菜 小白 docker", keywords=["忌口", "猫", "代理"], top_k=3)
    assert len(result.memories) == 3
    full = sum(len(m.content) for m in result.memories)
    assert full > 60
    assert len(result.injection) <= 60 and result.injection.endswith("…”")


async def test_superseded_only_with_history_and_marked_outdated(app, clock):
    old = await app.writing.add(USER, AddRequest(content="用户喜欢用 Vue 3 写前端", keywords=["vue", "前端框架"]))
    clock.advance(days=150)
    new = await app.writing.add(
        USER, AddRequest(
            content="用户现在更喜欢用 React 写前端", keywords=["react", "前端框架"], supersedes=old.memory_id
        )
    )
    plain = await recall(app, "前端框架用哪个")
    assert [m.id for m in plain.memories] == [new.memory_id]
    history = await recall(app, "前端框架用哪个", include_history=True)
    assert [m.id for m in history.memories] == [new.memory_id, old.memory_id]
    assert history.memories[1].outdated
    assert "5个月前的对话摘要（已过时）“用户喜欢用 Vue 3 写前端”" in history.injection


async def test_context_lines_disambiguate_a_vague_message(app):
    ids = await fill(app)
    result = await recall(app, "那就按第一个方案办吧", context=["Docker 又构建失败了", "要不要配代理"])
    assert result.memories and result.memories[0].id == ids[STORE[2][0]]


async def test_categories_filter(app):
    await fill(app)
    result = await recall(app, "小白和香菜", keywords=["猫", "宠物", "香菜"], categories=[Category.person])
    assert [m.category for m in result.memories] == [Category.person]


async def test_expired_memories_are_not_recalled(app, clock):
    await app.writing.add(
        USER, AddRequest(content="聊了下周二的面试准备", category=Category.episode, keywords=["面试"])
    )
    assert (await recall(app, "面试")).memories
    clock.advance(days=15)
    assert (await recall(app, "面试")).memories == []


@pytest.fixture
async def knn_app(settings, clock):
    async with PocketMem(settings, clock=clock, embedder=NeighbourSearchingEmbedder()) as pm:
        yield pm


async def test_neighbour_search_finds_memories(knn_app):
    ids = await fill(knn_app)
    result = await recall(knn_app, "香菜")
    assert result.degraded is None and result.memories[0].id == ids[STORE[0][0]]


async def test_neighbour_search_with_history_scores_superseded_versions_too(knn_app):
    ids = await fill(knn_app)
    old = (await knn_app.writing.add(USER, AddRequest(content="用户住在南京鼓楼", category=Category.fact))).memory_id
    new = await knn_app.writing.add(
        USER, AddRequest(content="用户搬到了苏州园区", category=Category.fact, keywords=["南京"], supersedes=old)
    )
    async with knn_app.store.read() as r:
        scored = dict(
            await r.important_similarities(USER, [[1.0] + [0.0] * 511], 50, (Status.active, Status.superseded))
        )
    assert {old, new.memory_id, *ids.values()} <= set(scored)
    result = await recall(knn_app, "用户住在南京还是苏州", include_history=True, top_k=5)
    by_id = {m.id: m for m in result.memories}
    assert new.memory_id in by_id and old in by_id and by_id[old].outdated


async def test_store_searches_core_and_important_memories_without_choosing(knn_app):
    """The store answers plain searches; which of them become candidates is the service's choice."""
    ids = await fill(knn_app)
    core = (
        await knn_app.writing.add(USER, AddRequest(content="用户叫林舟", scores={"persistence": 1.0}))
    ).memory_id
    vector = [1.0] + [0.0] * 511
    async with knn_app.store.read() as r:
        assert [mid for mid, _ in await r.core_similarities(USER, [vector])] == [core]
        important = await r.important_similarities(USER, [vector, [0.0, 1.0] + [0.0] * 510], 2, (Status.active,))
        alone = dict(await r.important_similarities(USER, [vector], 2, (Status.active,)))
    assert len(important) == 2 and {mid for mid, _ in important} <= {core, *ids.values()}
    assert all(len(cosines) == 2 and all(-1.0 <= c <= 1.0 for c in cosines) for _, cosines in important)
    assert {mid: cosines[:1] for mid, cosines in important} == alone  # one read, the same cosines


async def ready(value):
    """An encoding that has already finished, as gather_candidates awaits it."""
    return value


class OnlyCoreAndImportance:
    """A read transaction whose keyword and neighbour searches find nothing: only the core and importance
    pools can bring candidates."""

    def __init__(self, reader):
        self.reader = reader

    def __getattr__(self, name):
        return getattr(self.reader, name)

    async def keyword_hits(self, *args, **kwargs):
        return []

    async def user_term_counts(self, user_id, terms):
        return {}, 0

    async def vector_neighbours(self, *args, **kwargs):
        return []


async def test_core_memories_join_the_candidates_outside_the_importance_pool(tmp_path, clock, make_settings):
    async with PocketMem(
        make_settings(tmp_path, candidate_limit=1), clock=clock, embedder=NeighbourSearchingEmbedder()
    ) as pm:
        core = (await pm.writing.add(USER, AddRequest(content="用户叫林舟", scores={"persistence": 1.0}))).memory_id
        strong = {"persistence": 0.9, "emotion": 1.0, "info": 1.0, "judge": 1.0}
        for i in range(5):
            await pm.writing.add(USER, AddRequest(content=f"第{i}次去杭州出差开会", scores=strong))
        parsed = pm.retrieval.parse(RecallRequest(query="用户叫林舟", record=False))
        health = Health()
        vectors = await pm.retrieval.vectors(parsed, await pm.retrieval.scale(parsed, health), health)
        async with pm.store.read() as reader:
            pool = await reader.important_similarities(USER, [vectors.query], 1, (Status.active,))
            found = await gather_candidates(
                OnlyCoreAndImportance(reader), USER, parsed, ready(vectors), (Status.active,), Health(),
                pm.retrieval.rules, pm.clock.now(),
            )
    assert core not in dict(pool)  # the importance pool alone would miss it
    assert core in {c.memory.id for c in found}


async def break_indexes(app, settings, backend, *, keywords: bool = False) -> None:
    """Break the vector (and keyword) index behind the server's back, as a corrupt or missing table would."""
    if backend.name == "postgres":
        async with app.store.write() as tx:
            await tx.execute("alter table memories rename column embedding to embedding_lost")
            if keywords:
                await tx.execute("drop table memory_term_counts")
                await tx.execute("drop table memory_user_term_counts")
        return
    raw = connect(str(settings.db_path), load_vectors=True)
    raw.execute("drop table memory_vectors")
    if keywords:
        raw.execute("drop table memories_fts_vocab")
        raw.execute("drop table memories_fts")
    raw.close()


async def test_vector_index_failure_falls_back_to_keywords(knn_app, settings, backend):
    app = knn_app
    ids = await fill(app)
    await break_indexes(app, settings, backend)
    result = await recall(app, "香菜")
    assert result.degraded and "vector index" in result.degraded
    if backend.name == "sqlite":
        assert result.memories[0].id == ids[STORE[0][0]]
    else:
        # PostgreSQL keeps vectors in the memories table itself: with the column gone, similarities fail too
        # and recall ranks by keywords alone; it still answers instead of failing.
        assert result.injection is not None
    async with app.store.read() as r:
        fails = await r.list_events(USER, kinds=[EventKind.retrieval_fail])
    assert any("vector index" in f.payload["error"] for f in fails)


async def test_both_indexes_failing_answers_with_the_user_card(knn_app, settings, backend):
    app = knn_app
    await app.writing.add(USER, AddRequest(content="用户叫林舟", scores={"persistence": 1.0}))
    await break_indexes(app, settings, backend, keywords=True)
    result = await recall(app, "我叫什么")
    assert result.memories == []
    assert "用户叫林舟" in result.injection and "user card" in result.degraded


async def test_pending_confirmations_ride_along(app, clock):
    pending = await app.writing.add(USER, AddRequest(content="用户可能喜欢爵士乐", confidence=0.7))
    result = await recall(app, "随便聊聊")
    assert [p.pending_id for p in result.pending_confirmations] == [pending.pending_id]
    await app.pending.confirm_pending(USER, pending.pending_id, "snooze", 1)
    assert (await recall(app, "随便聊聊")).pending_confirmations == []
    clock.advance(hours=2)
    assert (await recall(app, "随便聊聊")).pending_confirmations[0].pending_id == pending.pending_id


async def test_explain_adds_the_breakdown(app):
    await fill(app)
    hit = (await recall(app, "香菜", explain=True)).memories[0]
    assert hit.breakdown is not None and hit.breakdown.keyword > 0 and hit.breakdown.relevance >= 0.3
    assert (await recall(app, "香菜")).memories[0].breakdown is None


async def test_other_users_memories_are_never_recalled(app):
    await fill(app)
    owner = await recall(app, "香菜")
    assert owner.memories and "香菜" in owner.injection  # the same query finds them for their owner
    other = await app.retrieval.recall("alice", RecallRequest(query="香菜"))
    assert other.memories == [] and "香菜" not in (other.injection or "")


async def test_keyword_hits_are_the_same_whoever_else_is_in_the_index(app, monkeypatch):
    """One person's notebook is ranked by FTS5 alone and only the best are checked (SQLite); with other users'
    or trashed memories in the index every match's owner is checked. Both give the same k best."""
    from pocketmem.store.sqlite.tx import SQLiteTx

    async def ranked_with_owner_check(*_args, **_kwargs):
        return None

    async def both(k: int, statuses: tuple[Status, ...]) -> tuple[list, list]:
        async with app.store.read() as r:
            fast = await r.keyword_hits(USER, ["香菜", "辣椒"], k, statuses)
        with monkeypatch.context() as m:
            m.setattr(SQLiteTx, "_hits_of_sole_owner", ranked_with_owner_check)
            async with app.store.read() as r:
                checked = await r.keyword_hits(USER, ["香菜", "辣椒"], k, statuses)
        return fast, checked

    mine = await app.writing.add_many(
        USER, [AddRequest(content=f"用户第{i}次吃香菜{'和辣椒' * (i % 3)}，在{i}号店") for i in range(12)]
    )
    stages = []
    sqlite = type(app.store).__module__.endswith("sqlite.store")
    for stage in ("alone", "trashed", "others", "unindexed") if sqlite else ("alone", "trashed", "others"):
        if stage == "unindexed":
            # Two of the user's active memories lost their index rows: the user's active count overstates what
            # the index holds, other users' rows crowd the best, and the owner check of every match takes over.
            async with app.store.write() as tx:
                await tx.execute(
                    "delete from memories_fts where rowid in (select rowid from memories where id in (?, ?))",
                    (mine[3].memory_id, mine[4].memory_id),
                )
        if stage == "trashed":
            for result in mine[:3]:
                await app.trash.forget(USER, result.memory_id, None)
        if stage == "others":
            await app.writing.add_many(
                "someone-else", [AddRequest(content=f"香菜辣椒{i}") for i in range(6)]
            )
        for k in (1, 3, 5, 9, 20):
            for statuses in ((Status.active,), (Status.active, Status.superseded)):
                fast, checked = await both(k, statuses)
                assert fast == checked, (stage, k, statuses)
                stages.append(len(fast))
    assert min(stages) == 1 and max(stages) == 12  # the answers were neither empty nor all alike


class CountingSearches:
    """A read transaction that counts its keyword searches."""

    def __init__(self, reader):
        self.reader = reader
        self.searches: list[tuple[str, ...]] = []

    def __getattr__(self, name):
        return getattr(self.reader, name)

    async def keyword_hits(self, user_id, terms, *args, **kwargs):
        self.searches.append(tuple(terms))
        return await self.reader.keyword_hits(user_id, terms, *args, **kwargs)


async def gathered(app: PocketMem, query: str, keywords: list[str] | None = None) -> tuple[list, list]:
    """The candidates of one query, and the keyword searches that gathering them made."""
    parsed = app.retrieval.parse(RecallRequest(query=query, keywords=keywords or []))
    health = Health()
    encoding = app.retrieval.vectors(parsed, await app.retrieval.scale(parsed, health), health)
    async with app.store.read() as reader:
        counting = CountingSearches(reader)
        found = await gather_candidates(counting, USER, parsed, encoding, (Status.active,), health,
                                        app.retrieval.rules, app.clock.now())
    return counting.searches, found


async def test_keywords_that_repeat_the_message_search_once(app):
    ids = await fill(app)

    async def searches(query: str, keywords: list[str]) -> tuple[list, set[str]]:
        searched, found = await gathered(app, query, keywords)
        return searched, {c.memory.id for c in found}

    repeated, found = await searches("香菜", ["香菜"])
    assert len(repeated) == 1 and ids[STORE[0][0]] in found
    added, found_with_more = await searches("香菜", ["香菜", "忌口"])
    assert len(added) == 2 and found <= found_with_more  # a keyword of its own: the message's search runs too


async def test_terms_too_common_to_search_are_weighed_but_not_searched(app):
    """一 and 上 (rarity 0 and 0.03 in any store: the background says they are in most text) fall under
    SEARCH_FLOOR: the keyword search leaves them out, the memory is still found by its other words, and a
    message made only of such words still looks at the index once, so a broken one would be reported."""
    shown = (await app.writing.add(USER, AddRequest(content="用户下周和朋友一起去上海看展览。"))).memory_id
    await fill(app)

    async def searched(query: str) -> tuple[list[tuple[str, ...]], set[str], dict[str, float]]:
        searches, found = await gathered(app, query)
        return searches, {c.memory.id for c in found}, {c.memory.id: c.evidence.matched for c in found}

    searches, found, matched = await searched("一起去上海看展览吗")
    assert len(searches) == 1 and {"展览", "上海", "一起"} <= set(searches[0])
    assert not {"一", "上"} & set(searches[0])
    assert shown in found and matched[shown] > SEARCH_FLOOR
    probe, _, _ = await searched("不上")
    assert probe == [probe[0]] and len(probe[0]) == 1  # one look at the index, one term
