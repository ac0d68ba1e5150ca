"""A time a person sees, on every surface (CLI tables and messages, the page, its charts, the Markdown files):
always in the user's time zone (POCKETMEM_TZ, `Settings.zone`), never the stored UTC. Pure.

    absolute(when, zone)              2026-11-27 01:17 +08:00    an instant, always with its offset
    day(when, zone)                   2026-11-27                 the calendar day it falls on in the zone
    relative(when, now, zone, locale) 刚刚 · 5分钟前 · 3小时前 · 3天前 · 2个月前 · 5天后
                                      just now · 5 minutes ago · 3 hours ago · 3 days ago · in 5 days

Days are calendar days in the zone (yesterday 23:00 is 1天前 at 01:00), as the prompt's ages are
(core/formatting.py); within the hour, or the same day, the count is of whole
minutes or hours.
"""

from __future__ import annotations

from datetime import datetime, tzinfo

from pocketmem.base.clock import from_iso
from pocketmem.core.formatting import age_label, calendar_days

MINUTE, HOUR = 60, 3600


def as_instant(value: datetime | str) -> datetime:
    """A datetime, or the ISO text a result model or the store gives, as an aware datetime."""
    return value if isinstance(value, datetime) else from_iso(value)


def absolute(when: datetime | str, zone: tzinfo) -> str:
    local = as_instant(when).astimezone(zone)
    offset = local.strftime("%z")  # +0800
    return f"{local:%Y-%m-%d %H:%M} {offset[:3]}:{offset[3:5]}"


def day(when: datetime | str, zone: tzinfo) -> str:
    return as_instant(when).astimezone(zone).date().isoformat()


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
