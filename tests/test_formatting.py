from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from pocketmem.core.formatting import (
    CardSection,
    InjectionItem,
    age_label,
    calendar_days,
    injection_block,
    user_card,
)

TZ = ZoneInfo("Asia/Shanghai")


@pytest.mark.parametrize(
    ("days", "zh", "en"),
    [
        (0, "今天", "today"),
        (1, "1天前", "1 day ago"),
        (3, "3天前", "3 days ago"),
        (30, "30天前", "30 days ago"),
        (31, "1个月前", "1 month ago"),
        (65, "2个月前", "2 months ago"),
        (365, "12个月前", "12 months ago"),
        (400, "1年前", "1 year ago"),
        (800, "2年前", "2 years ago"),
    ],
)
def test_age_labels(days, zh, en):
    assert age_label(days, "zh") == zh
    assert age_label(days, "en") == en


def test_calendar_days_follow_the_users_time_zone():
    now = datetime(2026, 11, 26, 0, 30, tzinfo=TZ)  # just after midnight in Shanghai
    yesterday_evening = now - timedelta(hours=1)
    assert calendar_days(yesterday_evening, now, TZ) == 1
    assert calendar_days(yesterday_evening, now, ZoneInfo("UTC")) == 0
    assert calendar_days(now + timedelta(days=2), now, TZ) == 0


def test_injection_lines_in_both_locales():
    items = [InjectionItem("你不喜欢香菜，吃到会很反感。", 3), InjectionItem("Likes jazz.", 0, outdated=True)]
    assert injection_block(items, "zh", 500) == (
        "3天前的对话摘要“你不喜欢香菜，吃到会很反感。”\n今天的对话摘要（已过时）“Likes jazz.”"
    )
    assert injection_block(items, "en", 500) == (
        "3 days ago: “你不喜欢香菜，吃到会很反感。”\ntoday (outdated): “Likes jazz.”"
    )


def test_budget_trims_the_block_and_marks_the_cut():
    items = [InjectionItem("甲" * 100, 1), InjectionItem("乙" * 100, 2), InjectionItem("丙" * 100, 3)]
    block = injection_block(items, "zh", 200)
    assert len(block) <= 200
    first, second = block.split("\n")
    assert first == "1天前的对话摘要“" + "甲" * 100 + "”"
    assert second.startswith("2天前的对话摘要“乙") and second.endswith("…”")
    assert injection_block(items, "zh", 50).endswith("…”")
    assert len(injection_block(items, "zh", 50)) <= 50
    assert injection_block([], "zh", 500) == ""


def test_user_card_stays_under_two_kilobytes():
    entries = [f"核心记忆第{i}条：用户很在意这件事，而且说了很多次。" for i in range(200)]
    card = user_card("User card", [CardSection("Core memories", entries), CardSection("Open todos", ["买牛奶"])])
    assert len(card.encode()) <= 2048
    assert card.startswith("# User card\n\n## Core memories\n- 核心记忆第0条")
    shown = card.count("- 核心记忆第")
    assert f"- … +{200 - shown}\n" in card
    # The core memories cannot push the todos off: room is kept for the first one.
    assert card.endswith("\n## Open todos\n- 买牛奶\n")


def test_user_card_counts_plus_n_from_the_total():
    todos = [f"待办{i}" for i in range(20)]
    card = user_card("User card", [CardSection("Open todos", todos, total=30)])
    assert card.endswith("- 待办19\n- … +10\n")  # all 20 read fit; 10 more were not read
    long = [f"待办{i}：" + "很长的说明" * 10 for i in range(20)]
    cut = user_card("User card", [CardSection("Open todos", long, total=30)])
    assert len(cut.encode()) <= 2048
    assert cut.endswith(f"- … +{30 - cut.count('- 待办')}\n")


def test_a_long_first_todo_keeps_no_room():
    core = [f"核心记忆第{i}条：用户很在意这件事。" for i in range(100)]
    card = user_card("User card", [CardSection("Core memories", core), CardSection("Open todos", ["长" * 700])])
    assert "## Open todos" not in card and card.count("- 核心记忆第") > 30
