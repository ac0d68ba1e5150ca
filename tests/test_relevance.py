"""Recall finds what a careful reader would call relevant: the examples users reported, through the SDK client.

One shared distinctive word is enough whatever the message's length; keywords only add evidence; a word in
every memory of a tiny store still counts; words that say little are not evidence by themselves; term
statistics are per user, so one user's writes never move another's scores.
"""

from __future__ import annotations

import pytest
from mcp import Client

from pocketmem.mcp.server import build_server
from pocketmem.service.writing.add_request import AddRequest

from .helpers import call

pytestmark = [pytest.mark.anyio, pytest.mark.backends]


async def add(client: Client, content: str, *, core: bool = False, keywords: list[str] | None = None) -> str:
    args: dict = {"content": content, "category": "preference" if core else "fact"}
    if core:
        args["scores"] = {"persistence": 1.0}
    if keywords:
        args["keywords"] = keywords
    stored = await call(client, "add_memory", args)
    assert stored["status"] == "stored", stored
    return stored["memory_id"]


async def recalled(client: Client, query: str, keywords: list[str] | None = None, **extra: object) -> list[str]:
    args: dict = {"query": query, **extra}
    if keywords is not None:
        args["keywords"] = keywords
    return [m["id"] for m in (await call(client, "recall_memories", args))["memories"]]


async def test_a_shared_distinctive_word_is_enough_in_a_long_message(client):
    cilantro = await add(client, "用户不喜欢香菜，吃到会很反感。", core=True)
    assert cilantro in await recalled(client, "晚饭想吃火锅，记得别放香菜")
    assert cilantro in await recalled(client, "这道菜里有香菜，你帮我挑出来", ["香菜", "忌口"])
    assert cilantro in await recalled(client, "香菜")


async def test_more_keywords_never_make_recall_worse(client):
    cilantro = await add(client, "你不喜欢香菜，吃到会很反感。")
    assert cilantro in await recalled(client, "我晚饭吃什么好？", ["香菜"])
    assert cilantro in await recalled(client, "我晚饭吃什么好？", ["饮食", "口味", "忌口", "香菜"])


async def test_a_word_in_every_memory_of_a_small_store_still_counts(client):
    coffee = [
        await add(client, text)
        for text in (
            "用户每天早上喝一杯美式咖啡。",
            "用户下午三点以后不喝咖啡，不然晚上睡不着。",
            "用户家里有一台意式咖啡机。",
            "用户喜欢浅烘的埃塞俄比亚咖啡豆。",
            "用户常去公司楼下的咖啡店。",
            "用户的咖啡不加糖，只加一点燕麦奶。",
        )
    ]
    assert set(await recalled(client, "咖啡", top_k=10)) == set(coffee)


async def test_the_cat_is_found_by_its_name(client):
    cat = await add(client, "用户养了一只白色的猫，叫小白。")
    assert cat in await recalled(client, "小白最近胃口不好")


@pytest.mark.parametrize(("query", "keywords"), [("我的猫叫什么名字？", None), ("What is my cat called?", ["猫"])])
async def test_the_cat_is_found_by_the_word_cat(client, query, keywords):
    cat = await add(client, "用户养了一只白色的猫，叫小白。")
    assert cat in await recalled(client, query, keywords)


async def test_english_words_meet_their_other_forms(client):
    car = await add(client, "The user sold the old Subaru last spring.")
    assert car in await recalled(client, "Did I sell my Subaru already?")


async def test_words_that_say_little_are_not_evidence_by_themselves(client):
    await add(client, "用户今天心情不错。")
    await add(client, "The user works at a company in Portland.")
    assert await recalled(client, "What is the capital of France?") == []
    assert await recalled(client, "Thanks, that's all for today!") == []
    assert await recalled(client, "今天好累啊") == []


async def test_many_weak_shared_words_are_not_evidence(client):
    work = await add(client, "用户在一家游戏公司做后端开发。")
    assert await recalled(client, "公司楼下新开了一家奶茶店，今天人好多") == []
    # ... while a distinctive word beside them still is
    assert work in await recalled(client, "今天游戏公司那边又加班了")


async def test_one_users_writes_do_not_move_another_users_scores(app, settings):
    """Per-user term statistics: `explain` shows nothing of what another user stores (issue 13, item 4)."""
    server = build_server(settings, app=app)
    async with Client(server) as client:
        await add(client, "用户在学吉他，最近在练《晴天》。")
        await add(client, "用户周末常去西湖边跑步。")
        await add(client, "用户在考虑买一把雅马哈的电吉他。")

        async def scores() -> list[tuple[str, dict]]:
            result = await call(client, "recall_memories", {"query": "吉他弦该换了吗", "explain": True})
            return [(m["id"], m["breakdown"]) for m in result["memories"]]

        before = await scores()
        assert before
        for i in range(40):
            await app.writing.add("someone-else", AddRequest(content=f"第{i}次：吉他 吉他 吉他，换弦练习记录"))
        assert await scores() == before


SENTENCES = [
    "用户不喜欢香菜，吃到会很反感。",
    "用户每天早上喝一杯美式咖啡。",
    "用户养了一只白色的猫，叫小白。",
    "用户在杭州做后端开发，主要写 Go。",
    "用户周末常去西湖边跑步。",
    "用户对花生过敏，吃了会起疹子。",
    "用户下个月要去张家界旅游。",
    "用户用 Grafana 看服务的监控面板。",
    "The user sold the old Subaru last spring.",
    "The user is training for a marathon in October.",
    "The user prefers aisle seats on long flights.",
    "The user's sister lives in Seattle and works as a nurse.",
]
WORDS = ["香菜", "咖啡", "猫", "小白", "杭州", "跑步", "过敏", "旅游", "Grafana", "Subaru", "marathon", "flight",
         "sister", "晚饭", "忌口", "监控", "今天", "公司", "the user", "天气"]


def test_keywords_only_add_what_recall_returns(tmp_path, backend, make_settings):
    """For the same store and message, recall with keywords returns everything it returns without them."""
    if backend.name != "sqlite":
        pytest.skip("one backend is enough for the property; relevance is computed above the store")
    import asyncio

    from hypothesis import HealthCheck, given
    from hypothesis import settings as hsettings
    from hypothesis import strategies as st

    from pocketmem.app import PocketMem
    from pocketmem.base.clock import FixedClock
    from pocketmem.service.recall.retrieval import RecallRequest
    from tests.helpers import START

    loop = asyncio.new_event_loop()
    app = PocketMem(make_settings(tmp_path), clock=FixedClock(START))
    loop.run_until_complete(app.open())
    for text in SENTENCES:
        loop.run_until_complete(app.writing.add("u", AddRequest(content=text)))

    def ids(message: str, keywords: list[str]) -> set[str]:
        request = RecallRequest(query=message, keywords=keywords, top_k=12, record=False)
        return {m.id for m in loop.run_until_complete(app.retrieval.recall("u", request)).memories}

    @hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        st.lists(st.sampled_from(WORDS + ["吗", "我", "what", "did", "晚饭想吃什么"]), min_size=1, max_size=5),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=6, unique=True),
    )
    def check(message_words: list[str], keywords: list[str]) -> None:
        message = " ".join(message_words)
        assert ids(message, []) <= ids(message, keywords)

    try:
        check()
    finally:
        loop.run_until_complete(app.close())
        loop.close()


def test_a_word_and_its_characters_count_once():
    """公司 in a memory is one piece of evidence, not 公司 + 公 + 司; the characters of a two-character word the
    user never wrote stand in for it when the memory holds both (猫叫 -> 猫，叫); weak words count at a fraction."""
    from pocketmem.core import relevance
    from pocketmem.core.text import index_terms, weighted_query_terms

    query = weighted_query_terms("公司")
    memory = index_terms("用户在公司上班。")
    rarities = {"公司": 0.4, "公": 0.2, "司": 0.3}
    assert relevance.QueryWords(query, list(query), rarities).lexical(set(memory))[1] == pytest.approx(0.4)
    cat = weighted_query_terms("我的猫叫什么名字")
    held = index_terms("用户养了一只白色的猫，叫小白。")
    assert relevance.QueryWords(cat, [], {"猫": 0.7, "叫": 0.35}).weights(set(held))["猫"] == 1.0
    wrote = {"猫叫": 0.9, "猫": 0.7}  # the user wrote 猫叫: 猫 keeps its own weight
    assert relevance.QueryWords(cat, [], wrote).weights(set(held))["猫"] == cat["猫"]
    opened = weighted_query_terms("新开")
    developed = set(index_terms("做后端开发"))
    assert relevance.QueryWords(opened, [], {"开": 0.2}).weights(developed)["开"] == opened["开"]
    weak = relevance.QueryWords({"一家": 1.0}, [], {"一家": 0.6}).weights({"一家"})
    assert weak["一家"] == relevance.WEAK_WORD_FACTOR


def test_keywords_never_lower_the_lexical_evidence():
    """A keyword word the store holds (猫粮) must not take away what the message's own words gave."""
    from pocketmem.core import relevance
    from pocketmem.core.text import index_terms, weighted_query_terms

    base = weighted_query_terms("我的猫叫什么名字")
    query = {**base, **weighted_query_terms("猫粮")}
    memory = index_terms("用户养了一只白色的猫，叫小白。")
    rarities = {"猫": 0.7, "叫": 0.35, "猫粮": 0.9}
    alone = relevance.Weighing(base, list(base), rarities).evidence(memory, 0.0)
    both = relevance.Weighing(query, list(base), rarities, base=base).evidence(memory, 0.0)
    assert all(a >= b for a, b in zip(both.features(), alone.features(), strict=True))
    for model in (relevance.LEXICAL, relevance.NEURAL):
        assert model.probability(both) >= model.probability(alone)


def test_a_thing_the_agent_inferred_beyond_the_message_makes_a_full_match():
    """晚饭想吃火锅 with ["香菜", "火锅"]: 香菜 is what the agent inferred the message involves, and the memory holds
    it; 火锅 only repeats the message (and the user never wrote it), so it cannot undo that. A keyword that only
    repeats the message's own words, or one too common in the store, is no full match by itself."""
    from pocketmem.core import relevance
    from pocketmem.core.text import index_terms, weighted_query_terms

    message = weighted_query_terms("晚饭想吃火锅，有什么推荐的吗")
    keywords = [weighted_query_terms("香菜"), weighted_query_terms("火锅")]
    query = {**message, **{t: w for k in keywords for t, w in k.items()}}
    memory = index_terms("用户不喜欢香菜，吃到会很反感。")

    def complete(rarities: dict[str, float], sent: list[dict[str, float]]) -> bool:
        weighing = relevance.Weighing(query, list(message), rarities, relevance.keyword_words(sent), base=message)
        return weighing.evidence(memory, 0.0).complete

    assert complete({"香菜": 0.93}, keywords)
    assert not complete({"香菜": relevance.FULL_MATCH_RARITY / 2}, keywords)  # too common in this store
    assert not complete({"香菜": 0.93, "火锅": 0.87}, [weighted_query_terms("火锅")])  # only the message's topic


def test_a_follow_up_weighs_its_earlier_lines_as_the_message():
    """那我能吃吗 names nothing the store holds: the earlier lines' 芒果 counts at full weight. A
    message that names something the store holds (咖啡) keeps the earlier lines at half weight."""
    from pocketmem.core import relevance
    from pocketmem.core.text import index_terms, weighted_query_terms

    memory = index_terms("用户对芒果过敏，吃了嘴唇会肿。")
    recent = weighted_query_terms("同事从海南带了一箱芒果")
    rarities = {"芒果": 0.9, "吃": 0.2, "咖啡": 0.8}

    def evidence(message: str, with_recent: bool) -> relevance.Evidence:
        own = weighted_query_terms(message)
        query = {**{t: 0.5 * w for t, w in recent.items()}, **own}
        return relevance.Weighing(query, list(own), rarities, recent=recent if with_recent else None).evidence(
            memory, 0.0
        )

    def follows_up(message: str) -> bool:
        own = weighted_query_terms(message)
        return relevance.follows_up(relevance.QueryWords(own, list(own), rarities), list(own))

    assert follows_up("那我能吃吗")
    assert not follows_up("我每天喝几杯咖啡")
    before, after = evidence("那我能吃吗", False), evidence("那我能吃吗", True)
    assert after.strongest > before.strongest and after.matched > before.matched
    assert relevance.NEURAL.probability(after) > relevance.NEURAL.probability(before)
    assert evidence("我每天喝几杯咖啡", True) == evidence("我每天喝几杯咖啡", False)
