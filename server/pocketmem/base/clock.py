"""The only place that reads the time, so tests can walk a store through simulated days."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware (UTC)."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FixedClock:
    """A clock that only moves when told to."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("FixedClock needs a timezone-aware datetime")
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def set(self, when: datetime) -> None:
        self._now = when.astimezone(UTC)

    def advance(self, **delta: float) -> datetime:
        self._now += timedelta(**delta)
        return self._now


def monotonic() -> float:
    """Seconds on a clock that only moves forward, for spacing background work (real time, even in tests)."""
    return time.monotonic()


def to_iso(when: datetime) -> str:
    """Store format: UTC, millisecond precision, `Z` suffix; sorts as text and SQLite's julianday() reads it."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def from_iso(text: str) -> datetime:
    """Parse a stored or user-given ISO 8601 instant; a naive value is taken as UTC."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)
