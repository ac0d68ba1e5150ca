"""Time in a recall query: is the user asking about *when* / *last time*, and which dates do they mean?

    上次我们聊面试是什么时候      -> intent: the user asks about the past (favour episodes and events)
    上周我们聊了什么              -> intent + window: last Monday..Sunday
    3天前 / 两个月前 / yesterday / last month / 去年 -> a window of dates
    明天 / 后天 / tomorrow / the day after tomorrow -> that day (a question about it asks what is due then)

    5月2号 / 4月27日 / 五月二号 / May 2nd / 2026-05-02 / 去年5月2号 -> that day; the most recent past one when no
                                           year is written, the coming one when the message looks ahead (下周, 安排,
                                           next, plan …)
    上个月5号 / 14号那天 / 14号我们聊了什么 / on the 14th -> a day of a month: the month named, or else the most
                                           recent past (coming) one; a bare 3号 names no day (3号线, 3号楼)
    这周 / 本周 / this week / 下周 / next week -> Monday..Sunday of that week
    这个月 / 本月 / this month               -> the whole month; asked about the past (这个月我们聊了什么), the
                                           month so far
    下周六 / 这周六 / next Saturday / last Saturday -> that day of the week named (每周六, every Saturday: no window)
    周六 / on Saturday                     -> a weekday without its week: the most recent one on or before today,
                                           the coming one on or after today when the message looks ahead (周六有
                                           什么安排, 周一要干嘛, what do I have on Saturday)

One rule for a day named without its year, month or week: the most recent such day, or the coming one when the
message looks ahead (the `ahead` cues of data/time_words.tsv: 下周, 安排, 要做, next, plan, do I have …).

A question about what was true before (我以前写前端用过什么, what did I use to drive) asks for the earlier
versions of a fact too (`earlier`: recall then searches them as with include_history).

One rule for every day or period a message names, however it is named (`parse`): a window alone (今天天气不错,
昨天下雨了) means nothing to recall. A question about one that ended before today (昨天我干嘛了, 前天晚上我跟谁
吃饭了, 2天前我干嘛了, 在5月2号我们聊了什么, what did I do yesterday) asks what happened then (`intent`: its
memories by date, all of them for one day). A question about any of them (这周有什么要做的事, 下周六有什么安排,
明天干啥, what's on my list this week) asks what lies in it (`agenda`: the open todos due then); what happened in
one that has not ended is asked by a `past` cue (这周我们聊了什么).

Pure functions on the user's local calendar date; no dates are guessed beyond these phrases.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache
from typing import NamedTuple

from pocketmem.core import wordlists

_ZH_NUM = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10, "半": 0}
_EN_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_WEEKDAY_ZH = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_MONTHS = {name.casefold(): i for i, name in enumerate(calendar.month_name) if name} | {
    name.casefold(): i for i, name in enumerate(calendar.month_abbr) if name
}
_WEEKDAYS = {name.casefold(): i for i, name in enumerate(calendar.day_name)}
_N = r"\d{1,2}|[一二两三四五六七八九十]{1,3}"  # a month's or a day's number, in digits or Chinese numerals
_YEARS = {"前年": -2, "去年": -1, "今年": 0, "明年": 1}
_DAY_AFTER = "那天|这天|当天|那晚|晚上|早上|上午|中午|下午|的时候|有什么|要做|的安排|我|你|咱"
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))


def _cues(group: str) -> re.Pattern[str]:
    """One pattern for a group of data/time_words.tsv: Chinese phrases as written, English ones as words."""
    found = wordlists.phrases("time_words.tsv", group)["-"]
    zh = "|".join(re.escape(p) for p in found if not p.isascii())
    en = "|".join(r"\s+".join(map(re.escape, p.split())) for p in found if p.isascii() and p[0].isalpha())
    zh += "".join("|" + re.escape(p) for p in found if p.isascii() and not p[0].isalpha())  # ?
    return re.compile(rf"{zh}|\b(?:{en})\b", re.IGNORECASE)


class Patterns(NamedTuple):
    past: re.Pattern[str]
    ago_zh: re.Pattern[str]
    ago_en: re.Pattern[str]
    day_zh: re.Pattern[str]
    week_zh: re.Pattern[str]
    iso_day: re.Pattern[str]
    zh_day: re.Pattern[str]
    zh_month_day: re.Pattern[str]
    zh_bare_day: re.Pattern[str]
    en_ordinal_day: re.Pattern[str]
    en_day: re.Pattern[str]
    en_weekday: re.Pattern[str]
    en_week: re.Pattern[str]
    ahead: re.Pattern[str]  # a message that looks ahead takes the coming date of a day named without a year
    earlier: re.Pattern[str]  # asking what was true before, not when something happened
    question: re.Pattern[str]


@cache
def patterns() -> Patterns:
    """Every pattern of this module, compiled once: on the first query read, or by the server's warm-up after its
    handshake (compiling them takes a few milliseconds, which a server would otherwise pay before it)."""
    return Patterns(
        past=_cues("past"),
        ago_zh=re.compile(r"(\d+|[一两二三四五六七八九十]+)\s*(天|日|周|个?星期|个?礼拜|个月|年)前"),
        ago_en=re.compile(r"\b(\d+|a|an|one|two|three|four|five|six)\s+(day|week|month|year)s?\s+ago\b", re.IGNORECASE),
        day_zh=re.compile(r"(?<!每)(上|这|本|下)?(?:个)?(?:周|星期|礼拜)([一二三四五六日天])"),
        week_zh=re.compile(r"(上|这|本|下)(?:一)?(?:个)?(?:周|星期|礼拜)(?![一二三四五六日天末])"),
        iso_day=re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b"),
        zh_day=re.compile(
            rf"(?:(\d{{4}})\s*年|(前年|去年|今年|明年))?\s*(?<![\d一二三四五六七八九十])({_N})\s*月\s*({_N})\s*[日号號]"
        ),
        # A day of a month, without the month: after a month named relatively (上个月5号), or before words that
        # make it a day (14号那天, 14号我们聊了什么); 3号线, 3号楼 and 每月5号 name no day.
        zh_month_day=re.compile(rf"(上|这|本|下)个?月\s*({_N})\s*[日号號]"),
        zh_bare_day=re.compile(rf"(?<![\d一二三四五六七八九十月每周期拜第有])({_N})\s*[日号號](?={_DAY_AFTER})"),
        en_ordinal_day=re.compile(
            r"\bon\s+the\s+(\d{1,2})(?:st|nd|rd|th)\b(?!\s+(?:of\s+)?(?:floor|time|try|attempt|round|page|line|row|step))",
            re.IGNORECASE,
        ),
        en_day=re.compile(
            rf"\b(?:({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?"
            rf"|(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})(?:,?\s+(\d{{4}}))?)\b",
            re.IGNORECASE,
        ),
        en_weekday=re.compile(r"\b(last|this|next|on)?\s*(" + "|".join(_WEEKDAYS) + r")\b(?!s)", re.IGNORECASE),
        en_week=re.compile(r"\b(last|this|next)\s+week\b", re.IGNORECASE),
        ahead=_cues("ahead"),
        earlier=_cues("earlier"),
        question=_cues("question"),
    )


@dataclass(frozen=True)
class TimeQuery:
    intent: bool
    window: tuple[date, date] | None  # inclusive local dates
    agenda: bool = False  # a question about what lies in the window: the todos due in it
    named_day: bool = False  # one day named by its date or weekday (5月2号, 上周六): all it holds is asked about
    earlier: bool = False  # asks what was true before (我以前…用过什么, used to): earlier versions of a fact count


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


def _dated(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:  # 2月30日: no such day
        return None


def _month_day(text: str) -> tuple[int | None, int] | None:
    """(the month's shift from this month, or None when no month is named; the day) of a day named without its
    month: 上个月5号 -> (-1, 5); 14号那天 -> (None, 14)."""
    p = patterns()
    if (m := p.zh_month_day.search(text)) is not None:
        return _SHIFT.get(m.group(1), 0), _zh_number(m.group(2))  # 这个月, 本月: 0
    if (m := p.zh_bare_day.search(text) or p.en_ordinal_day.search(text)) is not None:
        return None, _zh_number(m.group(1))
    return None


def _nearest(named: list[date | None], today: date, ahead: bool) -> date | None:
    """Of the candidate days, the most recent one on or before today, or the first one after when looking ahead."""
    days = [d for d in named if d is not None]
    if ahead:
        return min((d for d in days if d >= today), default=None)
    return max((d for d in days if d <= today), default=None)


def _written_day(text: str, today: date) -> tuple[int | None, int, int] | None:
    """(year or None, month, day) of a day written with its month: 5月2号, 去年五月二号, May 2nd, 2 May 2025."""
    p = patterns()
    if (m := p.zh_day.search(text)) is not None:
        year = int(m.group(1)) if m.group(1) else today.year + _YEARS[m.group(2)] if m.group(2) else None
        return year, _zh_number(m.group(3)), _zh_number(m.group(4))
    if (m := p.en_day.search(text)) is not None:
        if m.group(1):
            return _year(m.group(3)), _MONTHS[m.group(1).casefold()], int(m.group(2))
        return _year(m.group(6)), _MONTHS[m.group(5).casefold()], int(m.group(4))
    return None


def _calendar_day(text: str, today: date) -> date | None:
    """The calendar day the text names (5月2号, May 2nd, 2026-05-02, 上个月5号), if any: without a year, the most
    recent one on or before today, or the coming one when the text looks ahead."""
    p = patterns()
    ahead = bool(p.ahead.search(text))
    if (m := p.iso_day.search(text)) is not None:
        return _dated(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if (written := _written_day(text, today)) is not None:
        year, month, day = written
        if year is not None:
            return _dated(year, month, day)
        return _nearest([_dated(today.year + k, month, day) for k in (-1, 0, 1)], today, ahead)
    if (month_day := _month_day(text)) is None:
        return None
    shift, day = month_day
    first = _month_start(today)
    months = [_shift_month(first, k) for k in ((shift,) if shift is not None else (-1, 0, 1))]
    named = [_dated(m.year, m.month, day) for m in months]
    return named[0] if shift is not None else _nearest(named, today, ahead)


def _year(text: str | None) -> int | None:
    return int(text) if text else None


def _shift_month(first: date, months: int) -> date:
    """The first day of the month `months` after the month starting at `first`."""
    index = first.year * 12 + first.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


_SHIFT = {"上": -1, "last": -1, "下": 1, "next": 1}


def _weekday(week: str, weekday: int, today: date, ahead: bool) -> date:
    """The weekday (Monday 0) of the week named (上/last, 这/本/this, 下/next), or of a weekday named without its
    week (周六, on Saturday) the most recent one on or before today, or the coming one when the text looks ahead."""
    if week:
        return today + timedelta(weeks=_SHIFT.get(week, 0), days=weekday - today.weekday())
    if ahead:
        return today + timedelta(days=(weekday - today.weekday()) % 7)
    return today - timedelta(days=(today.weekday() - weekday) % 7)


def _week_window(text: str, today: date) -> tuple[date, date] | None:
    """A weekday (下周六, 周六, next Saturday) or a whole week (这周, next week) the text names."""
    p = patterns()
    ahead = bool(p.ahead.search(text))
    if (m := p.day_zh.search(text)) is not None:
        day = _weekday(m.group(1) or "", _WEEKDAY_ZH[m.group(2)], today, ahead)
        return day, day
    if (m := p.en_weekday.search(text)) is not None and not re.search(r"\bevery\s+\w+day\b", text, re.IGNORECASE):
        which = (m.group(1) or "").casefold()
        week = which if which in ("last", "this", "next") else ""
        day = _weekday(week, _WEEKDAYS[m.group(2).casefold()], today, ahead)
        return day, day
    if (m := p.week_zh.search(text) or p.en_week.search(text)) is not None:
        start = _weekday(m.group(1).casefold(), 0, today, ahead)
        return start, start + timedelta(days=6)
    return None


def parse(text: str, today: date) -> TimeQuery:
    """The time the message refers to. One rule for every day or period it names, however named (昨天, 前天,
    3天前, 上周, 上周六, 11月26号, 上个月, 去年, 明天, 这周, yesterday, two days ago, May 2nd): a question
    (a `question` or `past` cue) about it asks what lies in it (`agenda`: the open todos due then), and about one
    that ended before today also what happened then (`intent`: its memories by date, all of them for one day);
    what happened in one that has not ended is asked by a `past` cue (这周我们聊了什么)."""
    p = patterns()
    past = bool(p.past.search(text))
    question = past or bool(p.question.search(text))
    if question and p.earlier.search(text):
        return TimeQuery(intent=past, window=None, earlier=True)
    window = _window(text, today, past)
    if window is None:
        return TimeQuery(intent=past, window=None)
    ended = window[1] < today
    return TimeQuery(
        intent=past or (question and ended),
        window=window,
        agenda=question,
        named_day=window[0] == window[1],
    )


def _window(text: str, today: date, past: bool) -> tuple[date, date] | None:
    """The dates (inclusive) of the day or period the text names, if any; `past`: the text asks about the past
    (这个月 is then the month so far)."""
    lowered = text.casefold()
    p = patterns()
    if (day := _calendar_day(text, today)) is not None:
        return day, day
    if (week := _week_window(text, today)) is not None:
        return week
    if (m := p.ago_zh.search(text)) is not None:
        return _ago_window(_zh_number(m.group(1)), m.group(2), today)
    if (m := p.ago_en.search(lowered)) is not None:
        n = m.group(1)
        return _ago_window(int(n) if n.isdigit() else _EN_NUM[n], m.group(2), today)
    for offset, pattern in _RELATIVE_DAYS:
        if re.search(pattern, lowered):
            return today + timedelta(days=offset), today + timedelta(days=offset)
    if re.search(r"上个月|last month", lowered):
        last = _month_start(today) - timedelta(days=1)
        return _month_start(last), last
    if re.search(r"这个月|本月|this month", lowered):
        # The whole month, as 这周 is the whole week; asked about the past, the month so far.
        return _month_start(today), today if past else _shift_month(_month_start(today), 1) - timedelta(days=1)
    if re.search(r"去年|last year", lowered):
        return date(today.year - 1, 1, 1), date(today.year - 1, 12, 31)
    return None


# A day named by its distance from today, the longer phrase first (后天 before 明天, 前天 before 昨天).
_RELATIVE_DAYS = (
    (2, r"后天|day after tomorrow"),
    (1, r"明天|明早|明晚|tomorrow"),
    (-2, r"前天|day before yesterday"),
    (-1, r"昨天|昨晚|yesterday"),
    (0, r"今天|今晚|today|tonight"),
)
