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


async def test_a_created_at_a_little_ahead_of_the_clock_is_stored_as_now(client, clock):
    """A day of slack is let through (a client's clock or zone a little off), but nothing is said after now: the
    memory dated tomorrow is stored as said when it was added, so it neither reads as said later nor ranks above
    what the user said since."""
    added_at = START  # shown on the user's clock (Asia/Shanghai)
    ahead = await call(client, "add_memory", {"content": "用户说明天开始早起跑步",
                                              "created_at": (START + timedelta(hours=20)).isoformat()})
    clock.advance(hours=1)
    since = await call(client, "add_memory", {"content": "用户今天中午吃了牛肉面"})
    listed = await call(client, "list_memories", {})
    assert [i["id"] for i in listed["items"]] == [since["memory_id"], ahead["memory_id"]]  # newest first
    assert listed["items"][1]["created_at"] == listed["items"][1]["valid_from"] == added_at.isoformat()
    recalled = await call(client, "recall_memories", {"query": "我跑步的计划", "keywords": ["跑步"]})
    assert recalled["memories"][0]["age"] == "今天" and recalled["memories"][0]["created_at"] == added_at.isoformat()
