"""add_memory's dates: a line's age counts from when it was said, and dates that would make a memory listed but
never recalled (a fact not yet true, a memory already expired) are refused by name, changing nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from .helpers import START, call, dump, error

pytestmark = [pytest.mark.anyio, pytest.mark.backends]


async def test_a_fact_said_today_that_began_earlier_is_aged_from_today(client):
    began = (START - timedelta(days=10)).isoformat()
    await call(client, "add_memory", {"content": "用户十天前开始学游泳", "valid_from": began, "confidence": 1})
    recalled = await call(client, "recall_memories", {"query": "我学游泳多久了", "keywords": ["游泳"]})
    assert [h["age"] for h in recalled["memories"]] == ["今天"]
    assert "今天的对话摘要“用户十天前开始学游泳”" in recalled["injection"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"content": "用户住在杭州", "valid_from": (START + timedelta(days=19)).isoformat()}, "valid_from"),
        ({"content": "和用户聊了论文被拒的事", "category": "episode",
          "created_at": (START - timedelta(days=20)).isoformat()}, "created_at"),
    ],
    ids=["future valid_from", "expired episode"],
)
async def test_a_memory_that_would_be_listed_but_never_recalled_is_refused(client, app, args, field):
    before = await dump(app)
    message = await error(client, "add_memory", {**args, "confidence": 1})
    assert f"invalid argument {field}:" in message, message
    assert await dump(app) == before


async def test_an_episode_inside_its_days_is_stored(client):
    added = await call(client, "add_memory", {
        "content": "和用户聊了论文被拒的事", "category": "episode",
        "created_at": (START - timedelta(days=13)).isoformat(), "confidence": 1,
    })
    assert added["status"] == "stored"
