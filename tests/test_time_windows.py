"""Time-window questions bring the todos and memories of that window, relative or absolute (docs/ranking.md,
section 4 "Dated"), through the MCP client on both backends: a week (这周, this week), a weekday (下周六), a
calendar day (5月2号, 4月27日, May 2nd) read in the user's time zone, the year inferred."""

from __future__ import annotations

import random
from datetime import date, datetime

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.core.timeexpr import parse
from pocketmem.mcp.server import build_server

from .helpers import SHANGHAI, START, call

pytestmark = [pytest.mark.anyio, pytest.mark.backends]

TODAY = START.date()  # Thursday 2026-11-26, Asia/Shanghai


async def add(client: Client, content: str, **extra) -> str:
    result = await call(client, "add_memory", {"content": content, **extra})
    assert result["status"] == "stored", result
    return result["memory_id"]


async def recalled(client: Client, query: str, top_k: int = 3) -> list[str]:
    answer = await call(client, "recall_memories", {"query": query, "top_k": top_k})
    return [m["content"] for m in answer["memories"]]


async def todos(client: Client) -> None:
    await add(client, "周五前要把季度报告交给王经理", category="todo", due_at="2026-11-27T18:00:00+08:00")
    await add(client, "下周六带女儿去打疫苗", category="todo", due_at="2026-12-05T10:00:00+08:00")
    await add(client, "Renew the passport", category="todo", due_at="2026-11-28T09:00:00+08:00")
    await add(client, "月底要交房租", category="todo", due_at="2026-12-30T09:00:00+08:00")
    await add(client, "用户喜欢喝美式咖啡。")


async def test_this_weeks_todos(client: Client):
    await todos(client)
    this_week = await recalled(client, "这周有什么要做的事")
    assert set(this_week) == {"周五前要把季度报告交给王经理", "Renew the passport"}
    assert set(await recalled(client, "what's on my list this week")) == set(this_week)


async def test_a_weekday_of_next_week(client: Client):
    await todos(client)
    assert await recalled(client, "下周六有什么安排") == ["下周六带女儿去打疫苗"]
    assert await recalled(client, "今天天气不错") == []


async def test_tomorrow_and_the_day_after(client: Client):
    await todos(client)
    assert await recalled(client, "明天有什么安排") == ["周五前要把季度报告交给王经理"]
    assert await recalled(client, "what do I have tomorrow?") == ["周五前要把季度报告交给王经理"]
    assert await recalled(client, "后天要做什么") == ["Renew the passport"]


async def test_the_todo_due_on_the_day_named_comes_before_one_due_on_another_day(client: Client):
    """Both say 周六; 下周六 names next Saturday, so the todo due then comes first, and each line says its date."""
    await add(client, "这周六下午去看牙医", category="todo", due_at="2026-11-28T15:00:00+08:00")
    await add(client, "下周六上午带朵朵去打疫苗", category="todo", due_at="2026-12-05T10:00:00+08:00")
    answer = await call(client, "recall_memories", {"query": "下周六有什么安排"})
    assert [m["content"] for m in answer["memories"]][0] == "下周六上午带朵朵去打疫苗"
    # Neither is due yet (service/upkeep/todos.is_due): each line says its date, neither is called a reminder.
    assert answer["injection"].splitlines() == [
        "今天的对话摘要（截止 2026-12-05 10:00）“下周六上午带朵朵去打疫苗”",
        "今天的对话摘要（截止 2026-11-28 15:00）“这周六下午去看牙医”",
    ]


async def test_a_weekday_without_its_week_and_the_rest_of_the_month_on_a_sunday(client: Client, clock):
    """Sunday 2027-03-14: 周六 asked about plans is the coming Saturday, not yesterday; this month's open todos
    reach its end; casual questions (要干嘛, 干啥) ask what is due as 有什么安排 does."""
    clock.set(datetime(2027, 3, 10, 10, 0, tzinfo=SHANGHAI))
    await add(client, "去医院复查", category="todo", due_at="2027-03-20T10:00:00")
    await add(client, "给妈妈打电话", category="todo", due_at="2027-03-15T20:00:00")
    await add(client, "交房租", category="todo", due_at="2027-03-25T12:00:00")
    await add(client, "参加小王婚礼", category="todo", due_at="2027-03-13T12:00:00")
    await add(client, "元旦去爬山", category="todo", due_at="2028-01-01T08:00:00")
    clock.set(datetime(2027, 3, 14, 10, 0, tzinfo=SHANGHAI))
    assert await recalled(client, "周六有什么安排") == ["去医院复查"]
    assert await recalled(client, "What do I have on Saturday?") == ["去医院复查"]
    this_month = {"参加小王婚礼", "给妈妈打电话", "去医院复查", "交房租"}  # the first overdue, still open
    assert set(await recalled(client, "这个月还有什么要做的事", top_k=6)) == this_month
    assert set(await recalled(client, "anything left to do this month?", top_k=6)) == this_month
    assert await recalled(client, "下周一要干嘛") == ["给妈妈打电话"]
    assert await recalled(client, "明天干啥") == ["给妈妈打电话"]


async def test_the_last_time_something_happened(client: Client, clock):
    clock.set(datetime(2026, 11, 18, 15, 0, tzinfo=SHANGHAI))
    await add(client, "用户去医院复查了血常规，结果正常。", category="episode")
    clock.set(START)
    await add(client, "用户喜欢喝美式咖啡。")
    assert (await recalled(client, "上次去医院是什么时候"))[:1] == ["用户去医院复查了血常规，结果正常。"]


async def said_on(client: Client, clock, *said: tuple[datetime, str]) -> None:
    """Each text stored at its time (Asia/Shanghai), then the clock back at START."""
    for when, content in said:
        clock.set(when)
        await add(client, content)
    clock.set(START)


async def test_a_calendar_day_brings_what_was_said_that_day(client: Client, clock):
    await said_on(
        client, clock,
        (datetime(2026, 4, 27, 21, 0, tzinfo=SHANGHAI), "推荐用户去看电影《奥本海默》。"),
        (datetime(2026, 5, 2, 20, 30, tzinfo=SHANGHAI), "用户因为工作上的项目延期很烦恼。"),
        (datetime(2026, 5, 3, 9, 0, tzinfo=SHANGHAI), "用户周末去爬了山。"),
    )
    assert await recalled(client, "在5月2号我们聊了什么") == ["用户因为工作上的项目延期很烦恼。"]
    assert await recalled(client, "what did I say on May 2nd") == ["用户因为工作上的项目延期很烦恼。"]
    assert await recalled(client, "4月27日那天你推荐了什么") == ["推荐用户去看电影《奥本海默》。"]
    assert await recalled(client, "五月二号我们聊了什么") == ["用户因为工作上的项目延期很烦恼。"]


async def test_a_day_of_the_month_named_without_its_month(client: Client, clock):
    await said_on(
        client, clock,
        (datetime(2026, 10, 5, 20, 0, tzinfo=SHANGHAI), "用户和同事为了发布日期吵了一架。"),
        (datetime(2026, 11, 14, 21, 0, tzinfo=SHANGHAI), "推荐用户读《置身事内》。"),
        (datetime(2026, 11, 15, 9, 0, tzinfo=SHANGHAI), "用户早上去跑了五公里。"),
    )
    assert await recalled(client, "14号那天你推荐了什么") == ["推荐用户读《置身事内》。"]
    assert await recalled(client, "上个月5号我们聊了什么") == ["用户和同事为了发布日期吵了一架。"]
    assert await recalled(client, "what did we talk about on the 14th") == ["推荐用户读《置身事内》。"]


GYM = "晚上去健身房练了腿。"  # Friday 2026-11-27, 21:00
DINNER = "和闺蜜小雨吃了日料。"  # Thursday 2026-11-26, 20:00
DAYS_ASKED = [
    ("昨天我干嘛了", [GYM]),
    ("昨天晚上我干嘛了", [GYM]),
    ("还记得昨天我干嘛了吗", [GYM]),
    ("昨天我做了什么", [GYM]),
    ("what did I do yesterday", [GYM]),
    ("前天我干嘛了", [DINNER]),
    ("前天晚上我跟谁吃饭了", [DINNER]),
    ("2天前我干嘛了", [GYM, DINNER]),  # N days ago: a day either side
    ("两天前我干嘛了", [GYM, DINNER]),
    ("what did I do two days ago?", [GYM, DINNER]),
    ("two days ago", [GYM, DINNER]),
    ("11月26号我干嘛了", [DINNER]),
    ("这周四我干嘛了", [DINNER]),
    ("上周六我干嘛了", []),
    ("今天天气不错", []),  # a day named without a question about it
    ("昨天下雨了", []),
]


@pytest.mark.parametrize("embedder", ["use", "hash"])
async def test_every_day_or_period_named_in_a_question_brings_what_happened_then(
    tmp_path, clock, make_settings, embedder
):
    """Saturday 2026-11-28: a question about a day that has ended finds that day's memories by date, whether
    the day is named by its date, its weekday or its distance from today, in either language."""
    settings = make_settings(tmp_path, embedder=embedder)
    clock.set(datetime(2026, 11, 28, 10, 0, tzinfo=SHANGHAI))
    async with Client(build_server(settings, app=PocketMem(settings, clock=clock))) as client:
        await add(client, GYM, category="event", created_at="2026-11-27T21:00")
        await add(client, DINNER, category="event", created_at="2026-11-26T20:00")
        for message, expected in DAYS_ASKED:
            assert sorted(await recalled(client, message)) == sorted(expected), message


@pytest.mark.parametrize(
    ("text", "window"),
    [
        ("这周有什么要做的事", (date(2026, 11, 23), date(2026, 11, 29))),
        ("下周六有什么安排", (date(2026, 12, 5), date(2026, 12, 5))),
        ("上周六去哪了", (date(2026, 11, 21), date(2026, 11, 21))),
        ("what's on my list next week", (date(2026, 11, 30), date(2026, 12, 6))),
        ("next Saturday?", (date(2026, 12, 5), date(2026, 12, 5))),
        ("明天有什么安排", (date(2026, 11, 27), date(2026, 11, 27))),
        ("明晚有空吗", (date(2026, 11, 27), date(2026, 11, 27))),
        ("后天要做什么", (date(2026, 11, 28), date(2026, 11, 28))),
        ("what do I have tomorrow?", (date(2026, 11, 27), date(2026, 11, 27))),
        ("and the day after tomorrow", (date(2026, 11, 28), date(2026, 11, 28))),
        ("在5月2号我们聊了什么", (date(2026, 5, 2), date(2026, 5, 2))),
        ("on the 2nd of May", (date(2026, 5, 2), date(2026, 5, 2))),
        ("2025-05-02 说了什么", (date(2025, 5, 2), date(2025, 5, 2))),
        ("12月20日那天你推荐了什么", (date(2025, 12, 20), date(2025, 12, 20))),  # the most recent past one
        ("12月20日有什么安排", (date(2026, 12, 20), date(2026, 12, 20))),  # looks ahead: the coming one
        ("每周六去游泳", None),
        ("I swim every Saturday", None),
        ("2月30日", None),
        ("五月二号我们聊了什么", (date(2026, 5, 2), date(2026, 5, 2))),  # Chinese numerals
        ("十二月三十一日那天", (date(2025, 12, 31), date(2025, 12, 31))),
        ("去年5月2号说了什么", (date(2025, 5, 2), date(2025, 5, 2))),
        ("上个月5号我们聊了什么", (date(2026, 10, 5), date(2026, 10, 5))),  # a day of a month named relatively
        ("下个月3号有什么安排", (date(2026, 12, 3), date(2026, 12, 3))),
        ("14号那天聊了啥", (date(2026, 11, 14), date(2026, 11, 14))),  # no month: the most recent 14th
        ("28号那天我说了什么", (date(2026, 10, 28), date(2026, 10, 28))),
        ("31号那天", (date(2026, 10, 31), date(2026, 10, 31))),  # November has no 31st
        ("28号有什么安排", (date(2026, 11, 28), date(2026, 11, 28))),  # looks ahead: the coming one
        ("what did we talk about on the 14th", (date(2026, 11, 14), date(2026, 11, 14))),
        ("坐3号线去公司", None),  # a bare number with 号 names no day
        ("住在3号楼", None),
        ("每月5号交房租", None),
        ("有一日我梦见", None),
        ("on the 3rd floor", None),
        ("二月三十日", None),
    ],
)
def test_windows_the_parser_reads(text: str, window: tuple[date, date] | None):
    assert parse(text, TODAY).window == window


SUNDAY = date(2027, 3, 14)


@pytest.mark.parametrize(
    ("text", "window"),
    [
        ("周六有什么安排", (date(2027, 3, 20), date(2027, 3, 20))),  # looks ahead: the coming Saturday
        ("What do I have on Saturday?", (date(2027, 3, 20), date(2027, 3, 20))),
        ("周一要干嘛", (date(2027, 3, 15), date(2027, 3, 15))),
        ("星期天有什么要做的", (date(2027, 3, 14), date(2027, 3, 14))),  # on or after today: today
        ("周六那天我们聊了什么", (date(2027, 3, 13), date(2027, 3, 13))),  # the most recent one
        ("上次周三去哪了", (date(2027, 3, 10), date(2027, 3, 10))),
        ("what did we talk about on Monday", (date(2027, 3, 8), date(2027, 3, 8))),
        ("这周六有什么安排", (date(2027, 3, 13), date(2027, 3, 13))),  # a week named: that week's
        ("下周六", (date(2027, 3, 20), date(2027, 3, 20))),
        ("上周六聊了什么", (date(2027, 3, 6), date(2027, 3, 6))),
        ("这个月还有什么要做的事", (date(2027, 3, 1), date(2027, 3, 31))),  # the whole month, as 这周
        ("anything left to do this month?", (date(2027, 3, 1), date(2027, 3, 31))),
        ("这个月我们聊了什么", (date(2027, 3, 1), date(2027, 3, 14))),  # the past: the month so far
    ],
)
def test_a_day_named_without_its_week_on_a_sunday(text: str, window: tuple[date, date]):
    assert parse(text, SUNDAY).window == window


@pytest.mark.parametrize("text", ["明天干啥", "下周一要干嘛", "周六做啥", "明天做什么", "后天干什么"])
def test_a_casual_question_about_a_day_asks_what_is_due(text: str):
    assert parse(text, SUNDAY).agenda


def test_the_parser_never_fails_on_odd_text():
    """Numbers, month and day marks in any order, on the last day of months of every length: a window or none,
    never an error (31号 in a month without one, 2月29日 outside a leap year, 十三月)."""
    rnd = random.Random(7)
    alphabet = [*"0123456789一二三四五六七八九十两号日月年上下这本个那天我", " on the ", "th", "May", "去年", "今年"]
    for _ in range(3000):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 12)))
        for today in (date(2026, 1, 31), date(2026, 3, 31), date(2024, 2, 29), date(2026, 12, 31)):
            found = parse(text, today).window
            assert found is None or found[0] <= found[1], text
