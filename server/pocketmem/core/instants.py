"""The one time codec: every instant that enters pocketmem (tools, import, settings, CLI) and every one a store
writes or reads goes through here.

    accept(field, value, zone)  a tool / import / CLI value -> an aware UTC datetime, or InvalidInput naming the field
    encode(when)                a datetime -> the stored text `YYYY-MM-DDTHH:MM:SS.mmmZ` (always four-digit years)
    decode(text)                the stored text -> an aware UTC datetime (reads the old unpadded years too)
    problem(text)               why a stored value is not canonical, or None (for `pocketmem doctor`)
    repaired(text)              the canonical text for a stored value that can be mended, or None
    Due, whole_day(when, zone)  a due time given as a date alone is the end of that day (see below)

The range is checked in UTC, after the user's offset or zone is applied: `1000-01-01` in Asia/Shanghai is
999-12-31T16:00Z and is refused, because a year before 1000 does not fit the four-digit stored form. The upper
bound leaves room for the days a store adds (trash purge, episode expiry) without overflowing datetime.
Numbers are refused: an epoch count (`expires_at=-1`) is almost always a mistake, not a date.

A date alone is midnight of that day in the user's zone, except for a due time: `due_at="2026-11-28"` means by the
end of that day, so it is kept as 23:59:59.999 there (`Due`), and a due time at 23:59:59 in the user's zone is
shown as its date alone (`whole_day`) and is overdue only from the next day. That instant is all there is to it:
export, import and sync carry it as any other time. Without a remind_at of its own, such a todo is reminded
from the start of its day (`day_start`, service/writing/add_request.py).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, tzinfo
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

from pocketmem.base.errors import InvalidInput, InvalidReason

MIN_YEAR, MAX_YEAR = 1000, 9000  # what is accepted from outside
STORED_MAX_YEAR = 9999  # what a store can keep: accepted times plus the days the server adds to them
_STORED = re.compile(r"^(-?\d{1,6})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(Z|[+-]\d{2}:\d{2})?$")
_CANONICAL = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
RANGE_RULE = f"must be between the years {MIN_YEAR} and {MAX_YEAR} in UTC"
END_OF_DAY = time(23, 59, 59, 999000)  # a due date given alone; the stored form keeps milliseconds
_DATE_ALONE = re.compile(r"^\s*\d{4}-\d{2}-\d{2}\s*$")


class UnreadableInstant(ValueError):
    """A stored time that cannot be read back as a datetime."""


def accept(field: str, value: Any, zone: tzinfo) -> datetime:
    """A user-given instant (datetime or ISO 8601 text); without an offset it is wall-clock time in `zone`."""
    if isinstance(value, bool | int | float):
        raise InvalidInput(
            field, "must be an ISO 8601 date or time such as 2026-05-01T09:00+08:00, not a number", InvalidReason.date
        )
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise InvalidInput(field, f"is not an ISO 8601 date or time: {value[:40]!r}", InvalidReason.date) from None
    if not isinstance(value, datetime):
        raise InvalidInput(field, "must be an ISO 8601 date or time", InvalidReason.date)
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone)
    try:
        utc = value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise InvalidInput(field, RANGE_RULE, InvalidReason.years, low=MIN_YEAR, high=MAX_YEAR) from None
    if not MIN_YEAR <= utc.year <= MAX_YEAR:
        raise InvalidInput(
            field, f"{RANGE_RULE} (it is {utc.year} there)", InvalidReason.years, low=MIN_YEAR, high=MAX_YEAR
        )
    return utc


def not_a_number(value: Any) -> Any:
    """A pydantic before-validator for instant fields: JSON numbers are not dates."""
    if isinstance(value, bool | int | float):
        raise ValueError("must be an ISO 8601 date or time such as 2026-05-01T09:00+08:00, not a number")  # noqa: TRY004 - pydantic wants ValueError
    return value


def day_end(value: Any) -> Any:
    """A due time given as a date alone (`2026-11-28`, or a date) as the end of that day, wall-clock time that
    `accept` reads in the user's zone; anything else as it is. Numbers are refused (`not_a_number`)."""
    value = not_a_number(value)
    if isinstance(value, str) and _DATE_ALONE.match(value):
        try:
            value = date.fromisoformat(value.strip())
        except ValueError:
            return value  # 2026-02-30: pydantic names it
    if isinstance(value, date) and not isinstance(value, datetime):
        return datetime.combine(value, END_OF_DAY)
    return value


def whole_day(when: datetime, zone: tzinfo) -> bool:
    """Whether a due time stands for a whole day: the end of a day in `zone`. To the second, so the time a tool
    shows (whole seconds) and an agent sends back keeps its meaning."""
    local = when.astimezone(zone)
    return (local.hour, local.minute, local.second) == (END_OF_DAY.hour, END_OF_DAY.minute, END_OF_DAY.second)


def day_start(when: datetime, zone: tzinfo) -> datetime:
    """The start (midnight) of the day `when` falls on in `zone`, in UTC."""
    return datetime.combine(when.astimezone(zone).date(), time(), tzinfo=zone).astimezone(UTC)


# What a tool's schema says of a time: text (a date alone is accepted, so no `format: date-time`).
_ISO_TEXT = WithJsonSchema({"type": "string"})
# An ISO 8601 instant as a pydantic field; JSON numbers are refused (expires_at=-1 is not a date). The range is
# checked by `accept`.
Instant = Annotated[datetime, BeforeValidator(not_a_number), _ISO_TEXT]
# A due time: the same, a date alone being the end of that day.
Due = Annotated[datetime, BeforeValidator(day_end), _ISO_TEXT]


def encode(when: datetime) -> str:
    """Store format: UTC, millisecond precision, `Z` suffix; sorts as text and SQLite's julianday() reads it."""
    utc = when.astimezone(UTC)
    if not MIN_YEAR <= utc.year <= STORED_MAX_YEAR:
        raise UnreadableInstant(f"{utc.year} is outside the years a store can keep ({MIN_YEAR}..{STORED_MAX_YEAR})")
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"


def decode(text: str) -> datetime:
    """Read a stored instant; a value without an offset is UTC. Raises UnreadableInstant with the reason."""
    if isinstance(text, str) and _CANONICAL.match(text):  # what `encode` writes: read directly, 4x faster
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            pass  # year 0000, digits of another script: the general reading below decides and names why
    match = _STORED.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise UnreadableInstant(f"not a stored time: {str(text)[:40]!r}")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    try:
        parsed = datetime.fromisoformat(
            f"{int(year):04d}-{month}-{day}T{hour}:{minute}:{second}"
            f"{'.' + fraction.ljust(6, '0') if fraction else ''}{_offset(offset)}"
        )
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise UnreadableInstant(f"not a readable time: {text[:40]!r} ({exc})") from None


def _offset(offset: str | None) -> str:
    return "+00:00" if offset in (None, "Z") else str(offset)


def problem(text: str) -> str | None:
    """Why a stored value is not in the canonical, in-range form; None when it is."""
    try:
        when = decode(text)
    except UnreadableInstant as exc:
        return str(exc)
    if not MIN_YEAR <= when.year <= STORED_MAX_YEAR:
        return f"year {when.year} is outside {MIN_YEAR}..{STORED_MAX_YEAR}"
    if not _CANONICAL.match(text):
        return f"not in the stored form YYYY-MM-DDTHH:MM:SS.mmmZ: {text[:40]!r}"
    return None


def repaired(text: str) -> str | None:
    """The canonical text for a readable stored value (clamped into the range); None if it cannot be read."""
    try:
        when = decode(text)
    except UnreadableInstant:
        return None
    if when.year < MIN_YEAR:
        when = datetime(MIN_YEAR, 1, 1, tzinfo=UTC)
    elif when.year > STORED_MAX_YEAR:
        when = datetime(STORED_MAX_YEAR, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
    return encode(when)
