"""Words that name things are never weak (docs/ranking.md, "Own words and names"), through the MCP client on
both backends, with the default embedder and with the lexical `hash` one: a name jieba's dictionary tags as a
measure word (朵朵) counts in full in a store that uses it, and a Latin word written as a name (Go, Nuxt) is
never question filler."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from pocketmem.base.config import Settings
from pocketmem.core import termstats
from pocketmem.core.text import named_words, single_nouns, weighted_query_terms

from .helpers import MakeSettings, call

pytestmark = [pytest.mark.anyio, pytest.mark.backends]

STORE = (
    "用户的女儿叫朵朵，今年五岁。",
    "用户养了一只白色的猫，叫小白。",
    "用户家的狗叫豆豆。",
    "用户上个月去了云南旅游。",
    "用户住在杭州。",
    "用户不能吃辣，一吃就胃疼。",
    "用户不喝酒。",
    "用户的后端服务用 Go 写的。",
    "用户的项目用 Nuxt 4 + SQLite。",
    "用户每天早上喝一杯美式咖啡。",
    "用户在一家游戏公司做产品经理。",
)


@pytest.fixture(params=["default", "hash"])
def settings(request: pytest.FixtureRequest, tmp_path: Path, make_settings: MakeSettings) -> Settings:
    return make_settings(tmp_path) if request.param == "default" else make_settings(tmp_path, embedder="hash")


async def store(client: Client) -> dict[str, str]:
    ids = {}
    for content in STORE:
        result = await call(client, "add_memory", {"content": content})
        assert result["status"] == "stored", result
        ids[content] = result["memory_id"]
    return ids


async def recalled(client: Client, query: str, **extra) -> list[str]:
    answer = await call(client, "recall_memories", {"query": query, **extra})
    return [m["content"] for m in answer["memories"]]


async def test_a_name_tagged_as_a_measure_word_finds_its_memory(client: Client):
    await store(client)
    daughter = "用户的女儿叫朵朵，今年五岁。"
    assert (await recalled(client, "朵朵今天有点发烧"))[:1] == [daughter]
    assert (await recalled(client, "朵朵"))[:1] == [daughter]
    assert (await recalled(client, "她今天怎么样", keywords=["朵朵"]))[:1] == [daughter]


async def test_names_of_pets_and_places(client: Client):
    await store(client)
    assert (await recalled(client, "小白最近不爱吃饭"))[:1] == ["用户养了一只白色的猫，叫小白。"]
    assert (await recalled(client, "豆豆该打疫苗了"))[:1] == ["用户家的狗叫豆豆。"]
    assert (await recalled(client, "云南好玩吗"))[:1] == ["用户上个月去了云南旅游。"]
    assert (await recalled(client, "杭州最近天气怎么样"))[:1] == ["用户住在杭州。"]
    assert (await recalled(client, "Nuxt 怎么部署"))[:1] == ["用户的项目用 Nuxt 4 + SQLite。"]


async def test_a_product_name_that_is_also_an_english_word(client: Client):
    await store(client)
    assert (await recalled(client, "Go 的泛型怎么用"))[:1] == ["用户的后端服务用 Go 写的。"]


async def test_a_single_character_the_message_uses_as_a_word(client: Client):
    await store(client)
    spicy = "用户不能吃辣，一吃就胃疼。"
    assert (await recalled(client, "今天想吃点辣的"))[:1] == [spicy]


async def test_a_name_alone_is_no_reason_to_recall_unrelated_memories(client: Client):
    await store(client)
    assert await recalled(client, "今天天气不错") == []
    assert await recalled(client, "推荐一部电影") == []


def test_own_words_are_the_ones_a_store_holds_more_often_than_ordinary_text():
    assert termstats.is_weak_word("朵朵") and termstats.is_weak_word("今天")
    small = termstats.rarities({"朵朵": 1, "今天": 1}, 12, ["朵朵", "今天"])
    assert not termstats.is_weak_word("朵朵", small)  # a name in this store
    assert termstats.is_weak_word("今天", small)  # ordinary text predicts it
    assert termstats.own_word("今天", 200, 1000) and not termstats.own_word("今天", 20, 1000)


def test_a_word_jieba_guessed_gives_its_characters_whole():
    assert weighted_query_terms("车该保养了")["车"] == 1.0  # 车该 is no dictionary word
    assert weighted_query_terms("公司")["公"] == 0.5  # 公司 is


def test_a_character_used_as_a_noun_has_the_background_of_that_noun():
    query = weighted_query_terms("车该保养了")
    assert single_nouns("车该保养了", query) == {"车"}
    verb = "发票要怎么贴？"  # 贴 is a word of its own here, a verb
    assert single_nouns(verb, weighted_query_terms(verb)) == set()
    inside_words = termstats.rarities({"车": 1}, 12, ["车"])["车"]
    as_a_noun = termstats.rarities({"车": 1}, 12, ["车"], nouns={"车"})["车"]
    assert as_a_noun > inside_words


def test_a_name_has_no_english_background():
    common = termstats.rarities({"go": 1}, 12, ["go"])["go"]
    named = termstats.rarities({"go": 1}, 12, ["go"], names={"go"})["go"]
    assert common < 0.3 and named > 0.9


def test_latin_words_written_as_names_are_never_filler():
    assert "go" in weighted_query_terms("Go 的泛型怎么用")
    assert "go" in weighted_query_terms("How do I make Go builds faster?")
    assert "go" not in weighted_query_terms("Go to bed now")
    assert named_words("I write Go and Nuxt") == {"go", "nuxt"}
