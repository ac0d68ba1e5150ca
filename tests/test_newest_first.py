"""service/recall/versions.py on its own, over a stand-in reader: the newer version of a recalled fact comes above it,
an asked slot brings its newest value, and a failing store leaves the ranking as it was."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pocketmem.base.models import Category, Memory, Scores, Status
from pocketmem.core.ranking import Ranked
from pocketmem.service.recall import versions
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.types import Holder

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 11, 26, 2, 0, tzinfo=UTC)


def memory(id_: str, content: str, days_ago: int, category: Category = Category.fact, **extra) -> Memory:
    at = NOW - timedelta(days=days_ago)
    return Memory(
        id=id_, user_id="u", content=content, category=category,
        scores=Scores(emotion=0.3, info=0.8, persistence=0.7, judge=0.8),
        info_importance=0.7, time_coef=1.0, importance=0.7, confidence=1.0,
        created_at=at, updated_at=at, valid_from=at, status=Status.active, content_hash=id_, embed_model="hash",
        **extra,
    )


def ranked(m: Memory, score: float = 0.5) -> Ranked:
    return Ranked(m, score, 0.6, 0.0, 0.3, 0.5, 0.5)


class Reader:
    """The two reads the step makes, over a fixed list of memories."""

    def __init__(self, memories: list[Memory], broken: bool = False, unloadable: bool = False) -> None:
        self.memories = {m.id: m for m in memories}
        self.broken = broken
        self.unloadable = unloadable
        self.loaded: list[str] = []

    async def newest_holders(self, user_id, terms, k):
        if self.broken:
            raise RuntimeError("keyword index is gone")
        held = [Holder(m.id, m.content, m.category, m.valid_from, m.expires_at) for m in self.memories.values()]
        return held[-k:][::-1]

    async def get_memories(self, user_id, ids):
        if self.unloadable:
            raise RuntimeError("the table is locked")
        self.loaded += ids
        return [self.memories[i] for i in ids if i in self.memories]


BEIJING = memory("old", "用户住在北京。", 60)
HANGZHOU = memory("new", "我上个月搬到杭州了。", 10)
TEA = memory("tea", "用户喜欢喝绿茶。", 30, Category.preference)


async def test_the_newer_version_comes_above_the_recalled_older_one():
    out = await versions.newest_first(Reader([BEIJING, HANGZHOU, TEA]), "u", "北京的房子", [ranked(BEIJING)], NOW)
    assert [r.memory.id for r in out] == ["new", "old"]
    assert out[0].outdated is False and out[1].outdated is True


async def test_a_question_about_a_slot_brings_its_newest_value_when_nothing_was_recalled():
    out = await versions.newest_first(Reader([BEIJING, HANGZHOU]), "u", "我现在住哪？", [], NOW)
    assert [r.memory.id for r in out] == ["new"]


async def test_a_statement_naming_the_slot_asks_nothing():
    out = await versions.newest_first(Reader([BEIJING, HANGZHOU]), "u", "我住的地方今天停电了", [], NOW)
    assert out == []


async def test_a_broken_index_leaves_the_ranking_as_it_was():
    before = [ranked(BEIJING)]
    out = await versions.newest_first(Reader([BEIJING, HANGZHOU], broken=True), "u", "我现在住哪？", before, NOW)
    assert out == before
    out = await versions.newest_first(Reader([BEIJING, HANGZHOU], unloadable=True), "u", "我现在住哪？", before, NOW)
    assert out == before  # the newer version was found, but its row could not be loaded


async def test_whole_rows_are_loaded_only_for_the_versions_listed():
    reader = Reader([BEIJING, TEA, HANGZHOU])
    out = await versions.newest_first(reader, "u", "北京的房子", [ranked(BEIJING)], NOW)
    assert [r.memory.id for r in out] == ["new", "old"] and out[0].memory == HANGZHOU
    assert reader.loaded == ["new"]  # the holders weighed: all three; loaded whole: the one brought in


async def test_expired_and_other_category_versions_are_not_brought():
    gone = memory("gone", "我上个月搬到杭州了。", 10, expires_at=NOW - timedelta(days=1))
    out = await versions.newest_first(Reader([BEIJING, gone]), "u", "北京", [ranked(BEIJING)], NOW)
    assert [r.memory.id for r in out] == ["old"]
    out = await versions.newest_first(
        Reader([BEIJING, HANGZHOU]), "u", "北京", [ranked(BEIJING)], NOW, [Category.fact, Category.person]
    )
    assert [r.memory.id for r in out] == ["new", "old"]
    out = await versions.newest_first(Reader([BEIJING, HANGZHOU]), "u", "北京", [ranked(BEIJING)], NOW, [Category.goal])
    assert [r.memory.id for r in out] == ["old"]


async def test_a_version_already_recalled_lower_moves_up_once():
    recalled = [ranked(BEIJING, 0.9), ranked(TEA, 0.5), ranked(HANGZHOU, 0.2)]
    out = await versions.newest_first(Reader([BEIJING, HANGZHOU, TEA]), "u", "北京", recalled, NOW)
    assert [r.memory.id for r in out] == ["new", "old", "tea"]


@pytest.mark.backends
async def test_the_store_gives_the_newest_holders_of_the_cue_words_first(app, clock):
    """The real read behind the step (SQLite's FTS5 in rowid order, PostgreSQL's GIN index by `seq`): only the
    user's active memories, the last written first, at most k, however many memories hold the words."""
    written = []
    for i in range(6):
        clock.advance(minutes=1)
        written.append((await app.writing.add("u", AddRequest(content=f"用户第{i}次搬家，住在城东{i}号。"))).memory_id)
    await app.writing.add("someone-else", AddRequest(content="用户搬家了，住在城西。"))
    await app.trash.forget("u", written[-1], None)
    async with app.store.read() as reader:
        newest = await reader.newest_holders("u", ["住"], 3)
        assert [h.id for h in newest] == written[-2:-5:-1]
        assert [h.id for h in await reader.newest_holders("u", ["住"], 50)] == written[-2::-1]
        assert await reader.newest_holders("u", ["香菜"], 3) == []
        whole = await reader.get_memories("u", [h.id for h in newest])
        assert newest == [Holder(m.id, m.content, m.category, m.valid_from, m.expires_at) for m in whole]
