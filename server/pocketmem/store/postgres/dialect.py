"""The PostgreSQL dialect: `%s` placeholders, times as timestamptz (UTC, millisecond precision), jsonb, arrays."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload

from pocketmem.store.sql.dialect import Dialect


@overload
def ts(value: datetime) -> datetime: ...
@overload
def ts(value: None) -> None: ...
def ts(value: datetime | None) -> datetime | None:
    """What the store keeps of an instant: UTC, millisecond precision (as the SQLite backend)."""
    if value is None:
        return None
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


@overload
def dt(value: datetime) -> datetime: ...
@overload
def dt(value: None) -> None: ...
def dt(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC) if value is not None else None


POSTGRES = Dialect(
    name="postgres",
    placeholder="%s",
    to_column=ts,
    from_column=dt,
    parsed_json=True,
    json_cast="::jsonb",
    arrays=True,
    row_order="seq",
    planner_hints=False,
)
