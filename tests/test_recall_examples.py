"""The relevance examples of the recall issue, through the SDK client with the default embedder (`use`), on both
backends: each recalls the right memory from the message alone (the two that need world knowledge, and two the
statistical negative-precision floor no longer meets from the message alone, with the keywords an agent would
pass), and a message unrelated to everything still recalls nothing.

Each store holds the memory the example is about among everyday facts of other topics, as a user's store
would. The decision behind these answers is docs/ranking.md, section 3.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.mcp.server import build_server

from .helpers import call

pytestmark = [pytest.mark.anyio, pytest.mark.backends]

EVERYDAY = [
    "用户每周三晚上去体育馆打羽毛球。",
    "The user's daughter starts kindergarten in September.",
    "用户正在备考注册会计师。",
    "用户每天早上喝一杯美式咖啡。",
    "用户下个月要去上海出差，住三天。",
    "The user prefers dark mode in every editor.",
]


@pytest.fixture
async def client(tmp_path, clock, make_settings) -> AsyncIterator[Client]:
    settings = make_settings(tmp_path, embedder="use")
    async with Client(build_server(settings, app=PocketMem(settings, clock=clock))) as c:
        yield c


async def store(client: Client, target: str, *, others: list[str] = EVERYDAY, **extra: object) -> str:
    """The store: `target` among `others`; returns the target's id."""
    for text in others:
        assert (await call(client, "add_memory", {"content": text}))["status"] == "stored"
    added = await call(client, "add_memory", {"content": target, **extra})
    assert added["status"] == "stored", added
    return added["memory_id"]


async def top3(
    client: Client, query: str, keywords: list[str] | None = None, context: list[str] | None = None
) -> list[str]:
    args: dict = {"query": query, "keywords": keywords or [], "context": context or []}
    answer = await call(client, "recall_memories", args)
    assert answer["degraded"] is None, answer["degraded"]
    return [m["id"] for m in answer["memories"]][:3]


@pytest.mark.xfail(strict=True, reason="not met: 周末 is a time word (weak) and the encoder puts the two at cosine "
                   "0.34, under what the fitted meaning part needs (docs/benchmarks.md, Where main stands)")
async def test_where_to_go_at_the_weekend_finds_the_weekend_hike(client):
    hike = await store(client, "用户周末喜欢去爬山，常去西山徒步。", keywords=["周末", "爬山", "徒步"])
    assert hike in await top3(client, "周末去哪玩好？")


async def test_an_english_question_finds_the_chinese_memory_of_the_cat(client):
    cat = await store(client, "我养了一只白色的猫，叫小白。")
    assert cat in await top3(client, "What is my cat called?")


async def test_where_do_i_work_finds_the_job(client):
    """The encoder puts the English question and the Chinese job at cosine 0.12-0.26 and they share no word:
    the question asks for the job slot, which the memory fills (docs/ranking.md, section 6, asked slot)."""
    job = await store(client, "用户在网易做前端开发，负责云音乐的网页版。")
    assert job in await top3(client, "Where do I work now?")
    assert job not in await top3(client, "Where does my sister work?")


@pytest.mark.xfail(strict=True, reason="not met since the statistical negative-precision floor: the stricter "
                   "decision no longer admits the allergy from the message alone (docs/ranking.md, section 3)")
async def test_visiting_a_friends_cat_finds_the_cat_hair_allergy(client):
    allergy = await store(client, "用户对猫毛过敏，一靠近猫就打喷嚏。", scores={"persistence": 1.0})
    assert allergy in await top3(client, "周末想去朋友家撸猫，有什么要注意的吗")


async def test_visiting_a_friends_cat_finds_the_cat_hair_allergy_with_the_agents_keywords(client):
    allergy = await store(client, "用户对猫毛过敏，一靠近猫就打喷嚏。", scores={"persistence": 1.0})
    assert allergy in await top3(client, "周末想去朋友家撸猫，有什么要注意的吗", ["撸猫", "猫", "朋友家"])


@pytest.mark.xfail(strict=True, reason="not met: 项目 is the one shared word and the encoder does not read Nuxt "
                   "4 + SQLite as a stack (cosine 0.18) (docs/benchmarks.md, Where main stands)")
async def test_the_project_stack_in_a_store_holding_only_it(client):
    stack = await store(client, "用户的项目用 Nuxt 4 + SQLite。", others=[])
    assert stack in await top3(client, "我的项目用的什么技术栈")


async def test_painters_once_recommended_are_found_in_the_assistants_reply(client):
    """曾经 refers to the past: the message presumes a memory, and every memory's bar is a core memory's."""
    reply = await store(
        client, "助手：你可以看看画家莫兰迪和常玉，这两位画家的静物都很安静、耐看。", category="episode"
    )
    assert reply in await top3(client, "你曾经给我推荐过哪些画家？")


async def test_painters_once_recommended_are_found_with_the_agents_keywords(client):
    reply = await store(
        client, "助手：你可以看看画家莫兰迪和常玉，这两位画家的静物都很安静、耐看。", category="episode"
    )
    assert reply in await top3(client, "你曾经给我推荐过哪些画家？", ["画家", "推荐"])


async def test_a_peanut_dish_finds_the_peanut_allergy_with_the_agents_keyword(client):
    allergy = await store(client, "用户对花生过敏，吃了会起疹子、喉咙发紧。", scores={"persistence": 1.0})
    assert allergy in await top3(client, "宫保鸡丁外卖", ["花生"])


async def test_hotpot_for_dinner_finds_no_coriander_with_the_agents_keyword(client):
    coriander = await store(client, "用户不吃香菜，闻到味道都受不了。")
    assert coriander in await top3(client, "晚饭想吃火锅", ["香菜"])


async def test_hotpot_finds_no_coriander_when_the_agent_also_names_the_messages_own_topic(client):
    """The agent's keywords are alternatives: 火锅 repeats the message and names nothing the user wrote, so it
    must not hide the coriander the agent inferred."""
    coriander = await store(client, "用户不喜欢香菜，吃到会很反感。")
    assert coriander in await top3(client, "晚饭想吃火锅，有什么推荐的吗", ["香菜", "火锅"])


async def test_a_peanut_dish_finds_the_allergy_among_the_agents_keywords(client):
    allergy = await store(client, "用户对花生过敏，吃了会起疹子、喉咙发紧。", scores={"persistence": 1.0})
    assert allergy in await top3(client, "点个宫保鸡丁外卖吧", ["宫保鸡丁", "外卖", "花生"])


async def test_keywords_in_another_language_find_the_allergy_they_name(client):
    """The agent names what matters in English for a Chinese store: mixed into the message's vector it was
    diluted; the keywords' own similarity counts as well."""
    allergy = await store(client, "用户对海鲜过敏，尤其是虾和蟹。", scores={"persistence": 1.0})
    assert allergy in await top3(client, "推荐一家日料店", ["sushi", "seafood", "allergy"])
    assert allergy in await top3(client, "同事约我去吃海底捞", ["hotpot", "seafood allergy", "spicy"])


async def test_messages_unrelated_to_everything_still_recall_nothing(client):
    await store(client, "用户对花生过敏，吃了会起疹子、喉咙发紧。", others=[
        *EVERYDAY, "我养了一只白色的猫，叫小白。", "用户的项目用 Nuxt 4 + SQLite。", "用户不吃香菜，闻到味道都受不了。",
    ], scores={"persistence": 1.0})
    for message in ("给我讲个笑话吧", "ok, sounds good", "一加一等于几", "What's the tallest mountain in Europe?",
                    "还记得上次我问你的那道数学题吗", "Do you remember what the weather was like last time?"):
        assert await top3(client, message) == [], message


async def test_a_follow_up_finds_what_the_earlier_lines_are_about(client):
    """那我能吃吗 names nothing the store holds: what it asks about is in the earlier lines, which then weigh as the
    message does."""
    allergy = await store(client, "用户对芒果过敏，吃了嘴唇会肿。", scores={"persistence": 1.0})
    assert allergy in await top3(client, "那我能吃吗", context=["同事从海南带了一箱芒果", "说明天分给大家"])
    landlord = await store(client, "The user's landlord does not allow dogs in the flat.", others=[])
    context = ["my sister wants to bring her dog to the flat next weekend"]
    assert landlord in await top3(client, "would that be a problem?", context=context)


async def test_a_message_that_names_its_own_topic_is_not_taken_over_by_the_earlier_lines(client):
    await store(client, "用户对芒果过敏，吃了嘴唇会肿。", scores={"persistence": 1.0})
    coffee = "用户每天早上喝一杯美式咖啡。"
    args = {"query": "我每天喝几杯咖啡来着", "context": ["同事从海南带了一箱芒果"]}
    answer = await call(client, "recall_memories", args)
    assert [m["content"] for m in answer["memories"]] == [coffee]


CAT = "我养了一只橘猫，叫团子，三岁了。"
WEDDING = "下周六要去参加表姐的婚礼，要准备红包。"
FOLLOW_UPS = [
    ("好的就按你说的办", ["表姐婚礼红包包多少", "一般包888或者1000"], WEDDING),
    ("它最近老掉毛", ["我家团子", "怎么啦"], CAT),
]


@pytest.mark.parametrize("embedder", ["use", "hash"])
async def test_a_follow_up_is_read_through_its_lines_though_the_store_holds_its_weak_words(
    tmp_path, clock, make_settings, embedder
):
    """办 (a single-character verb) and 最近 (a time word, weak) name nothing: a store that holds them (办签证,
    最近工作压力很大) still reads the follow-up through its earlier lines."""
    settings = make_settings(tmp_path, embedder=embedder)
    async with Client(build_server(settings, app=PocketMem(settings, clock=clock))) as client:
        ids = {}
        for text, extra in [(CAT, {}), ("妈妈叫王芳", {}), (WEDDING, {"category": "todo"}), ("用户不吃香菜", {})]:
            ids[text] = await store(client, text, others=[], **extra)
        for message, context, answer in FOLLOW_UPS:
            assert await top3(client, message, context=context) == [ids[answer]], message
        await store(client, "下个月要去办签证。", others=[])
        await store(client, "最近工作压力很大。", others=[], category="episode")
        for message, context, answer in FOLLOW_UPS:
            assert await top3(client, message, context=context) == [ids[answer]], message
