"""A time a person sees, on every surface (CLI tables and messages, the page, its charts, the Markdown files):
always in the user's time zone (POCKETMEM_TZ, `Settings.zone`), never the stored UTC. Pure.

    absolute(when, zone)              2026-11-27 01:17 +08:00    an instant, always with its offset
    day(when, zone)                   2026-11-27                 the calendar day it falls on in the zone
    due_on(when, zone)                2026-11-27 | absolute      a due time: a date alone (core/instants.whole_day)
                                                                 is that date, any other the absolute time
    relative(when, now, zone, locale) 刚刚 · 5分钟前 · 3小时前 · 3天前 · 2个月前 · 5天后
                                      just now · 5 minutes ago · 3 hours ago · 3 days ago · in 5 days
    in_zone(result, zone)             2026-11-27T01:17:00+08:00  every instant of a result the model reads
                                                                 (tools, resources), in the zone, whole seconds

Days are calendar days in the zone (yesterday 23:00 is 1天前 at 01:00), as the prompt's ages are
(core/formatting.py); within the hour, or the same day, the count is of whole
minutes or hours.
"""

from __future__ import annotations

from datetime import datetime, tzinfo
from enum import Enum
from typing import Any, TypeVar, cast

from pydantic import BaseModel

from pocketmem.base.clock import from_iso
from pocketmem.core.formatting import age_label, calendar_days
from pocketmem.core.instants import whole_day

MINUTE, HOUR = 60, 3600
T = TypeVar("T")
_SCALARS = frozenset({str, int, float, bool, type(None)})


def as_instant(value: datetime | str) -> datetime:
    """A datetime, or the ISO text a result model or the store gives, as an aware datetime."""
    return value if isinstance(value, datetime) else from_iso(value)


def absolute(when: datetime | str, zone: tzinfo) -> str:
    local = as_instant(when).astimezone(zone)
    offset = local.strftime("%z")  # +0800
    return f"{local:%Y-%m-%d %H:%M} {offset[:3]}:{offset[3:5]}"


def in_zone(result: T, zone: tzinfo) -> T:
    """`result` (a result model, or lists and dicts holding them) with every datetime in it in `zone`, to the
    whole second: serialised, `2026-11-27T01:17:00+08:00` (`Z` for a zone at UTC), so an instant and a label
    beside it (截止 2026-11-27 01:17) name the same day. Stored instants stay UTC; this is what is shown."""
    return cast(T, _in_zone(result, zone))


def _in_zone(value: Any, zone: tzinfo) -> Any:
    """`value` itself where no time in it changes, so only what holds a time is copied."""
    if type(value) in _SCALARS or isinstance(value, Enum):
        return value
    if isinstance(value, datetime):
        return value.astimezone(zone).replace(microsecond=0)
    if isinstance(value, BaseModel):
        changed = {name: shown for name, item in value.__dict__.items() if (shown := _in_zone(item, zone)) is not item}
        return value.model_copy(update=changed) if changed else value
    if isinstance(value, dict):
        shown = {key: _in_zone(item, zone) for key, item in value.items()}
        return shown if any(shown[key] is not item for key, item in value.items()) else value
    if isinstance(value, list | tuple):
        items = [_in_zone(item, zone) for item in value]
        return type(value)(items) if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


def day(when: datetime | str, zone: tzinfo) -> str:
    return as_instant(when).astimezone(zone).date().isoformat()


def due_on(when: datetime | str, zone: tzinfo) -> str:
    instant = as_instant(when)
    return day(instant, zone) if whole_day(instant, zone) else absolute(instant, zone)


def relative(when: datetime | str, now: datetime, zone: tzinfo, locale: str) -> str:
    instant = as_instant(when)
    if instant > now:
        return _ahead(instant, now, zone, locale)
    seconds = (now - instant).total_seconds()
    days = calendar_days(instant, now, zone)
    if days and seconds >= HOUR:
        return age_label(days, locale)
    if seconds < MINUTE:
        return "刚刚" if locale == "zh" else "just now"
    count, unit, zh = (int(seconds // HOUR), "hour", "小时") if seconds >= HOUR else (int(seconds // MINUTE), "minute",
                                                                                       "分钟")
    return f"{count}{zh}前" if locale == "zh" else f"{count} {unit}{'' if count == 1 else 's'} ago"


def _ahead(instant: datetime, now: datetime, zone: tzinfo, locale: str) -> str:
    seconds = (instant - now).total_seconds()
    days = calendar_days(now, instant, zone)
    if days:
        return f"{days}天后" if locale == "zh" else f"in {days} day{'' if days == 1 else 's'}"
    if seconds < MINUTE:
        return "马上" if locale == "zh" else "in a moment"
    count, unit, zh = (int(seconds // HOUR), "hour", "小时") if seconds >= HOUR else (int(seconds // MINUTE), "minute",
                                                                                       "分钟")
    return f"{count}{zh}后" if locale == "zh" else f"in {count} {unit}{'' if count == 1 else 's'}"
