"""Text the agent puts in its prompt: injection lines with a relative age, and the user card. Pure.

    今天的对话摘要“用户不喜欢香菜。”
    3天前的对话摘要“你不喜欢香菜，吃到会很反感。”
    2个月前的对话摘要“…”        31..365 days: days // 30 months
    1年前的对话摘要“…”          over 365 days: days // 365 years
    English: `3 days ago: “…”`

A memory is shown on one line wherever it is listed for a model or a person to read line by line (the injection
block, the user card, memory_context, the profile files): `one_line` joins its lines and runs of white space, so
no text of a memory can start a line of its own (a heading, a todo, a reminder). The memory itself is kept as
written. A line cut short is cut between two characters as a reader sees them (`cut`: whole grapheme clusters, so
never inside an emoji sequence, a flag or a letter with its accents).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, tzinfo
from functools import cache
from typing import Any

from pocketmem.core.instants import whole_day

CARD_LIMIT_BYTES = 2048
ELLIPSIS = "…"


def one_line(text: str) -> str:
    """`text` on one line: every run of white space (line breaks, tabs, U+2028 ...) one space, none at the ends."""
    return " ".join(text.split())


def cut(text: str, room: int) -> str:
    """The longest start of `text` of at most `room` characters that ends between two grapheme clusters."""
    if len(text) <= room:
        return text
    end = 0
    for cluster in _graphemes().finditer(text):
        if cluster.end() > room:
            break
        end = cluster.end()
    return text[:end]


def calendar_days(when: datetime, now: datetime, zone: tzinfo) -> int:
    """Whole calendar days between two instants in the user's time zone (never negative)."""
    return max(0, (now.astimezone(zone).date() - when.astimezone(zone).date()).days)


def is_overdue(due_at: datetime | None, now: datetime) -> bool:
    return due_at is not None and due_at < now


def due_label(due_at: datetime | None, now: datetime, zone: tzinfo, locale: str) -> str:
    """A todo's time as recall's reminders and the user card show it: 截止 2026-11-28 18:00 / 已逾期：截止 … ;
    due 2026-11-28 18:00 / overdue since … ; a due date alone (core/instants.whole_day) as 截止 2026-11-28 /
    due 2026-11-28; 待办 / to do (no due time)."""
    if due_at is None:
        return "待办" if locale == "zh" else "to do"
    local = due_at.astimezone(zone)
    when = f"{local:%Y-%m-%d}" if whole_day(due_at, zone) else f"{local:%Y-%m-%d %H:%M}"
    if locale == "zh":
        return f"已逾期：截止 {when}" if is_overdue(due_at, now) else f"截止 {when}"
    return f"overdue since {when}" if is_overdue(due_at, now) else f"due {when}"


def age_label(days: int, locale: str) -> str:
    if locale == "zh":
        if days == 0:
            return "今天"
        if days <= 30:
            return f"{days}天前"
        if days <= 365:
            return f"{days // 30}个月前"
        return f"{days // 365}年前"
    if days == 0:
        return "today"
    if days <= 30:
        count, unit = days, "day"
    elif days <= 365:
        count, unit = days // 30, "month"
    else:
        count, unit = days // 365, "year"
    return f"{count} {unit}{'' if count == 1 else 's'} ago"


@dataclass(frozen=True)
class InjectionItem:
    content: str
    days: int
    outdated: bool = False
    reminder: str | None = None  # e.g. "due 2026-11-28" for a todo that is due
    due: str | None = None  # the due time of an open todo not due yet, shown beside its age
    done: bool = False  # a completed todo


@cache
def _graphemes() -> Any:
    """The grapheme cluster pattern, imported when a line is first cut: the module takes about 12 ms to import,
    which a server start need not pay."""
    import regex

    return regex.compile(r"\X")


def injection_line(item: InjectionItem, locale: str, content: str | None = None) -> str:
    text = one_line(item.content if content is None else content)
    label = age_label(item.days, locale)
    if locale == "zh":
        if item.reminder is not None:
            return f"提醒（{item.reminder}）“{text}”"
        marker = ("（已过时）" if item.outdated else "") + ("（已完成）" if item.done else "")
        marker += f"（{item.due}）" if item.due else ""
        return f"{label}的对话摘要{marker}“{text}”"
    if item.reminder is not None:
        return f"Reminder ({item.reminder}): “{text}”"
    marker = (" (outdated)" if item.outdated else "") + (" (done)" if item.done else "")
    marker += f" ({item.due})" if item.due else ""
    return f"{label}{marker}: “{text}”"


def injection_block(items: Sequence[InjectionItem], locale: str, budget: int) -> str:
    """One line per item, in order, within `budget` characters; the last line that does not fit is shortened."""
    lines: list[str] = []
    used = 0
    for item in items:
        separator = 1 if lines else 0
        line = injection_line(item, locale)
        if used + separator + len(line) <= budget:
            lines.append(line)
            used += separator + len(line)
            continue
        frame = len(injection_line(item, locale, content=""))
        room = budget - used - separator - frame - len(ELLIPSIS)
        if room >= 8:  # a shorter stub would mislead more than it helps
            shortened = cut(one_line(item.content), room).rstrip() + ELLIPSIS
            lines.append(injection_line(item, locale, content=shortened))
        break
    return "\n".join(lines)


@dataclass(frozen=True)
class CardSection:
    """A section of the user card: its heading, its first entries, and how many there are in all (`total`, when
    only the first few were read: the `+N` counts from it)."""

    heading: str
    entries: Sequence[str]
    total: int | None = None

    @property
    def count(self) -> int:
        return max(len(self.entries), self.total or 0)


def user_card(title: str, sections: Sequence[CardSection], limit_bytes: int = CARD_LIMIT_BYTES) -> str:
    """Markdown card: a title and bulleted sections, each entry on one line (`one_line`), cut to `limit_bytes` of
    UTF-8 with a `- … +N` note of what was left out. Each later section keeps room for its heading and its first
    entry (the most urgent todo) when those take at most a quarter of the card, so a long section before it cannot
    push it off."""
    out: list[str] = [f"# {title}"]
    size = _line_bytes(out[0])
    shown = [replace(s, entries=[one_line(entry) for entry in s.entries]) for s in sections if s.entries]
    for index, section in enumerate(shown):
        limit = limit_bytes - sum(_kept_room(later, limit_bytes) for later in shown[index + 1:])
        head = f"\n## {section.heading}"
        if size + _line_bytes(head) > limit:
            continue
        out.append(head)
        size += _line_bytes(head)
        for position, entry in enumerate(section.entries):
            line = f"- {entry}"
            left = section.count - position
            more = f"- {ELLIPSIS} +{left}"
            reserve = _line_bytes(more) if left > 1 else 0
            if size + _line_bytes(line) + reserve > limit:
                if size + _line_bytes(more) <= limit:
                    out.append(more)
                    size += _line_bytes(more)
                break
            out.append(line)
            size += _line_bytes(line)
        else:
            if section.count > len(section.entries):  # room was kept for it by the last entry's reserve
                out.append(f"- {ELLIPSIS} +{section.count - len(section.entries)}")
                size += _line_bytes(out[-1])
    return "\n".join(out) + "\n"


def _line_bytes(line: str) -> int:
    return len(line.encode()) + 1


def _kept_room(section: CardSection, limit_bytes: int) -> int:
    """What a later section keeps: its heading, its first entry and the `+N` after it; nothing when that is more
    than a quarter of the card (a long first entry would only crowd out the sections before it)."""
    room = _line_bytes(f"\n## {section.heading}") + _line_bytes(f"- {section.entries[0]}")
    if section.count > 1:
        room += _line_bytes(f"- {ELLIPSIS} +{section.count - 1}")
    return room if room <= limit_bytes // 4 else 0
