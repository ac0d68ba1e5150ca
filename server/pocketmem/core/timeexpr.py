"""Time in a recall query: is the user asking about *when* / *last time*, and which dates do they mean?

    上次我们聊面试是什么时候      -> intent: the user asks about the past (favour episodes and events)
    上周我们聊了什么              -> intent + window: last Monday..Sunday
    3天前 / 两个月前 / yesterday / last month / 去年 -> a window of dates

A window alone ("今天天气不错") means nothing to recall; it matters together with intent.

Pure functions on the user's local calendar date; no dates are guessed beyond these phrases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

_CUES_ZH = re.compile(
    r"上次|上回|上一次|那次|那回|那天|之前|以前|什么时候|啥时候|哪天|多久|聊过|聊了|说过|讲过|讨论过|当时|第一次|最近一次"
)
_CUES_EN = re.compile(
    r"\b(last time|when did|when was|when were|when we|what did we|we talked|talked about|we discussed|"
    r"discussed|ago|last (?:week|month|year)|yesterday|the other day|first time|that time)\b",
    re.IGNORECASE,
)
_ZH_NUM = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10, "半": 0}
_AGO_ZH = re.compile(r"(\d+|[一两二三四五六七八九十]+)\s*(天|日|周|个?星期|个?礼拜|个月|年)前")
_AGO_EN = re.compile(r"\b(\d+|a|an|one|two|three|four|five|six)\s+(day|week|month|year)s?\s+ago\b", re.IGNORECASE)
_EN_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


@dataclass(frozen=True)
class TimeQuery:
    intent: bool
    window: tuple[date, date] | None  # inclusive local dates


def _zh_number(text: str) -> int:
    if text.isdigit():
        return int(text)
    if text == "十":
        return 10
    if text.startswith("十"):
        return 10 + _ZH_NUM.get(text[1:], 0)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return _ZH_NUM.get(tens, 1) * 10 + (_ZH_NUM.get(ones, 0) if ones else 0)
    return _ZH_NUM.get(text, 1)


def _month_start(day: date) -> date:
    return day.replace(day=1)


def _ago_window(count: int, unit: str, today: date) -> tuple[date, date]:
    if unit in ("天", "日", "day"):
        center, slack = today - timedelta(days=count), 1
    elif unit in ("week",) or "周" in unit or "星期" in unit or "礼拜" in unit:
        center, slack = today - timedelta(weeks=count), 3
    elif unit in ("month",) or "月" in unit:
        center, slack = today - timedelta(days=30 * count), 15
    else:
        center, slack = today - timedelta(days=365 * count), 60
    return center - timedelta(days=slack), min(today, center + timedelta(days=slack))


def parse(text: str, today: date) -> TimeQuery:
    lowered = text.casefold()
    intent = bool(_CUES_ZH.search(text) or _CUES_EN.search(lowered))
    window: tuple[date, date] | None = None
    monday = today - timedelta(days=today.weekday())
    if (m := _AGO_ZH.search(text)) is not None:
        window = _ago_window(_zh_number(m.group(1)), m.group(2), today)
    elif (m := _AGO_EN.search(lowered)) is not None:
        n = m.group(1)
        window = _ago_window(int(n) if n.isdigit() else _EN_NUM[n], m.group(2), today)
    elif "前天" in text or "day before yesterday" in lowered:
        window = (today - timedelta(days=2), today - timedelta(days=2))
    elif "昨天" in text or "昨晚" in text or "yesterday" in lowered:
        window = (today - timedelta(days=1), today - timedelta(days=1))
    elif re.search(r"今天|今晚|today|tonight", lowered):
        window = (today, today)
    elif re.search(r"上周|上个?星期|上个?礼拜|last week", lowered):
        window = (monday - timedelta(days=7), monday - timedelta(days=1))
    elif re.search(r"这周|本周|这个?星期|this week", lowered):
        window = (monday, today)
    elif re.search(r"上个月|last month", lowered):
        last = _month_start(today) - timedelta(days=1)
        window = (_month_start(last), last)
    elif re.search(r"这个月|本月|this month", lowered):
        window = (_month_start(today), today)
    elif re.search(r"去年|last year", lowered):
        window = (date(today.year - 1, 1, 1), date(today.year - 1, 12, 31))
    return TimeQuery(intent=intent, window=window)
