"""Text the agent puts in its prompt: injection lines with a relative age, and the user card. Pure.

    今天的对话摘要“用户不喜欢香菜。”
    3天前的对话摘要“你不喜欢香菜，吃到会很反感。”
    2个月前的对话摘要“…”        31..365 days: days // 30 months
    1年前的对话摘要“…”          over 365 days: days // 365 years
    English: `3 days ago: “…”`
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

CARD_LIMIT_BYTES = 2048
ELLIPSIS = "…"


def calendar_days(when: datetime, now: datetime, zone: tzinfo) -> int:
    """Whole calendar days between two instants in the user's time zone (never negative)."""
    return max(0, (now.astimezone(zone).date() - when.astimezone(zone).date()).days)


def is_overdue(due_at: datetime | None, now: datetime) -> bool:
    return due_at is not None and due_at < now


def due_label(due_at: datetime | None, now: datetime, zone: tzinfo, locale: str) -> str:
    """A todo's time as recall's reminders and the user card show it: 截止 2026-11-28 18:00 / 已逾期：截止 … ;
    due 2026-11-28 18:00 / overdue since … ; 待办 / to do (no due time)."""
    if due_at is None:
        return "待办" if locale == "zh" else "to do"
    when = f"{due_at.astimezone(zone):%Y-%m-%d %H:%M}"
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
    done: bool = False  # a completed todo


def injection_line(item: InjectionItem, locale: str, content: str | None = None) -> str:
    text = item.content if content is None else content
    label = age_label(item.days, locale)
    if locale == "zh":
        if item.reminder is not None:
            return f"提醒（{item.reminder}）“{text}”"
        marker = ("（已过时）" if item.outdated else "") + ("（已完成）" if item.done else "")
        return f"{label}的对话摘要{marker}“{text}”"
    if item.reminder is not None:
        return f"Reminder ({item.reminder}): “{text}”"
    marker = (" (outdated)" if item.outdated else "") + (" (done)" if item.done else "")
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
            lines.append(injection_line(item, locale, content=item.content[:room] + ELLIPSIS))
        break
    return "\n".join(lines)


def user_card(
    title: str,
    sections: Sequence[tuple[str, Sequence[str]]],
    limit_bytes: int = CARD_LIMIT_BYTES,
) -> str:
    """Markdown card: a title and bulleted sections, cut to `limit_bytes` of UTF-8 with a note of what was left out."""
    out: list[str] = [f"# {title}"]
    size = len(out[0].encode()) + 1
    for heading, entries in sections:
        if not entries:
            continue
        head = f"\n## {heading}"
        if size + len(head.encode()) + 1 > limit_bytes:
            break
        out.append(head)
        size += len(head.encode()) + 1
        for index, entry in enumerate(entries):
            line = f"- {entry}"
            left = len(entries) - index
            more = f"- {ELLIPSIS} +{left}"
            reserve = len(more.encode()) + 1 if left > 1 else 0
            if size + len(line.encode()) + 1 + reserve > limit_bytes:
                if size + len(more.encode()) + 1 <= limit_bytes:
                    out.append(more)
                    size += len(more.encode()) + 1
                break
            out.append(line)
            size += len(line.encode()) + 1
    return "\n".join(out) + "\n"
