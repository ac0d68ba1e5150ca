"""The current fact wins also when the newer memory was stored without `supersedes` (issue 11, item 5),
through the MCP client on both backends: the newer memory that states the same slot of the same person is
brought in and ranked above the older, which is marked outdated; different people or things are not versions."""

from __future__ import annotations

import pytest
from mcp import Client

from pocketmem.core.slots import describe, shared_slots

from .helpers import call

pytestmark = [pytest.mark.anyio, pytest.mark.backends]


async def write(client: Client, clock, *contents: str) -> list[str]:
    """Each memory a month after the one before, none naming another in `supersedes`."""
    ids: list[str] = []
    for content in contents:
        result = await call(client, "add_memory", {"content": content})
        assert result["status"] == "stored", result
        ids.append(result["memory_id"])
        clock.advance(days=30)
    return ids


async def recall(client: Client, query: str, **extra) -> dict:
    return await call(client, "recall_memories", {"query": query, **extra})


def assert_newer_first(answer: dict, new: str, old: str) -> None:
    """The newer version comes first; the older, if listed too, below it and marked outdated."""
    memories = answer["memories"]
    assert memories and memories[0]["id"] == new, memories
    for m in memories[1:]:
        if m["id"] == old:
            assert m["outdated"] is True


async def test_moved_city_in_chinese(client: Client, clock):
    old, new = await write(client, clock, "用户住在北京。", "我上个月搬到杭州了。")
    answer = await recall(client, "我现在住哪？")
    assert_newer_first(answer, new, old)
    assert "杭州" in answer["injection"]
    # Asked by a word the old memory holds: both come, the old one marked as an earlier version.
    answer = await recall(client, "我还住在北京吗？")
    assert [m["id"] for m in answer["memories"]] == [new, old]
    assert answer["memories"][1]["outdated"] is True
    assert answer["injection"].index("杭州") < answer["injection"].index("北京")
    assert "（已过时）" in answer["injection"]


async def test_moved_city_in_english(client: Client, clock):
    old, new = await write(client, clock, "I live in Boston.", "We moved to Denver last month.")
    assert_newer_first(await recall(client, "where do I live now?"), new, old)
    answer = await recall(client, "Do I still live in Boston?")
    assert [m["id"] for m in answer["memories"]] == [new, old]
    assert answer["memories"][1]["outdated"] is True
    assert "(outdated)" in answer["injection"]


async def test_a_pet_renamed(client: Client, clock):
    old, new = await write(client, clock, "用户养了一只猫，叫小白。", "用户的猫改名叫咪咪了。")
    assert_newer_first(await recall(client, "小白最近怎么样？"), new, old)


async def test_a_job_change(client: Client, clock):
    old, new = await write(
        client, clock, "I work as a nurse at St. Mary's hospital.", "I quit nursing and now work at a startup."
    )
    assert_newer_first(await recall(client, "what do I do at St. Mary's?"), new, old)


async def test_a_flipped_preference_with_a_shared_thing(client: Client, clock):
    old, new = await write(client, clock, "用户更喜欢 Vue，觉得比 React 上手简单。", "用户现在更喜欢 React 了。")
    answer = await recall(client, "Vue 和 React 我喜欢哪个？")
    ids = [m["id"] for m in answer["memories"]]
    assert ids.index(new) < ids.index(old)


async def test_another_persons_home_is_not_a_version(client: Client, clock):
    mine, sisters = await write(client, clock, "用户住在北京朝阳区。", "用户的妹妹上个月搬到了上海。")
    answer = await recall(client, "我住在朝阳区哪里来着？")
    memories = answer["memories"]
    assert [m["id"] for m in memories] == [mine]
    assert memories[0]["outdated"] is False


async def test_another_pet_is_not_a_version(client: Client, clock):
    cat, dog = await write(client, clock, "用户的猫叫小白。", "用户新养了一只狗，叫旺财。")
    answer = await recall(client, "小白几岁了？")
    assert [m["id"] for m in answer["memories"]] == [cat]
    assert answer["memories"][0]["outdated"] is False


async def test_a_newer_fact_on_the_same_topic_that_changes_nothing_is_not_a_version(client: Client, clock):
    old, other = await write(client, clock, "用户喜欢吃辣。", "用户喜欢看科幻电影。")
    answer = await recall(client, "我喜欢吃辣吗？")
    memories = answer["memories"]
    assert memories[0]["id"] == old and memories[0]["outdated"] is False
    assert all(m["outdated"] is False for m in memories)


def same_slot(older: str, newer: str) -> bool:
    """Is `newer` a later version of the fact `older` states (the same attribute of the same person)?"""
    return bool(shared_slots(describe(older), describe(newer)))


def test_the_slot_rule_on_its_own():
    assert same_slot("用户住在北京", "我上个月搬到杭州了")
    assert same_slot("I live in Boston", "We moved to Denver last month")
    assert same_slot("用户用的手机是 iPhone 13。", "用户现在用小米 14，说安卓更方便折腾。")
    assert same_slot("用户的妹妹林悦在上海读研。", "林悦研究生毕业了，留在上海工作。")
    assert not same_slot("My sister lives in Boston", "I moved to Denver")
    assert not same_slot("Tom works at Google", "I work at Microsoft now")
    assert not same_slot("用户的猫叫小白", "用户的狗改名叫旺财了")
    assert not same_slot("用户住在北京", "用户这周去上海出差，住在酒店。")
    assert not same_slot("用户喜欢吃辣", "用户现在喜欢看科幻电影")


async def test_a_relation_and_a_name_are_one_person_across_memories(client: Client, clock):
    old, new = await write(client, clock, "用户的哥哥张伟在北京读研。", "张伟研究生毕业了，去了一家券商工作。")
    answer = await recall(client, "我哥现在还在读书吗？")
    assert_newer_first(answer, new, old)


async def test_a_slot_with_one_value_answers_the_question_about_it(client: Client, clock):
    """我住在哪 shares only 住 with a long memory of where the user lives: the slot the question asks about holds
    one value for the user, and that value answers. Someone else's home, or a hotel, does not."""
    home, mother, hotel = await write(
        client, clock, "用户住在北京朝阳区，离公司很近。", "用户的妈妈住在成都。", "出差时用户住在公司附近的酒店。"
    )
    for question in ("我住在哪", "我现在住在哪个城市？", "where do I live?"):
        ids = [m["id"] for m in (await recall(client, question))["memories"]]
        assert ids[:2] and home in ids[:2], (question, ids)
        assert hotel not in ids[:1]
    ids = [m["id"] for m in (await recall(client, "我妈妈住在哪"))["memories"]]
    assert ids[:1] == [mother], ids


async def test_one_value_does_not_answer_a_question_that_names_nobody(client: Client, clock):
    """`pay` is a cue of the salary slot, but a question that names nobody asks about the world: the one memory
    that fills the slot is not its answer. Asked about the user, it is."""
    neighbour, *_ = await write(
        client,
        clock,
        "When the user flies multi-day trips, her neighbour Amin comes in to feed the cat; the user pays her 50 "
        "yuan a visit.",
        "The user runs along the river every Sunday morning.",
        "The user's favourite tea is Tieguanyin.",
    )
    assert (await recall(client, "is it smart to pay off a mortgage early?"))["memories"] == []
    assert neighbour in [m["id"] for m in (await recall(client, "how much do I pay?"))["memories"]]
