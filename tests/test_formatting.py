from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from pocketmem.core.formatting import (
    CardSection,
    InjectionItem,
    age_label,
    calendar_days,
    cut,
    due_label,
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


FAMILY = "👨\u200d👩\u200d👧\u200d👦"  # four people joined by three zero-width joiners: one character to a reader


@pytest.mark.parametrize("unit", [
    FAMILY,
    "🇨🇳",  # a flag: two regional indicators
    "e\u0301",  # e and a combining acute accent
    "👍🏽",  # a thumb with a skin tone
    "1\ufe0f\u20e3",  # a keycap: digit, variation selector, enclosing keycap
    "\u1100\u1161\u11a8",  # a Hangul syllable written as three jamo
])
def test_a_cut_ends_between_two_characters_as_a_reader_sees_them(unit):
    units = [*"Team avatars: ", *[unit] * 30]
    text = "".join(units)
    for room in range(len(text) + 1):
        whole = max(k for k in range(len(units) + 1) if len("".join(units[:k])) <= room)
        assert cut(text, room) == "".join(units[:whole]), room


@pytest.mark.parametrize(("due", "zh", "en"), [
    (datetime(2026, 11, 28, 18, 0, tzinfo=TZ), "截止 2026-11-28 18:00", "due 2026-11-28 18:00"),
    (datetime(2026, 11, 28, 23, 59, 59, 999000, tzinfo=TZ), "截止 2026-11-28", "due 2026-11-28"),  # a date alone
])
def test_a_due_date_alone_is_labelled_with_the_date(due, zh, en):
    before, after = datetime(2026, 11, 28, 9, 0, tzinfo=TZ), datetime(2026, 11, 29, 0, 0, tzinfo=TZ)
    assert (due_label(due, before, TZ, "zh"), due_label(due, before, TZ, "en")) == (zh, en)
    assert due_label(due, after, TZ, "zh") == "已逾期：" + zh
    assert due_label(due, after, TZ, "en") == en.replace("due", "overdue since")
