"""The PostgreSQL dialect: `%s` placeholders, times as timestamptz (UTC, millisecond precision), jsonb, arrays."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, overload

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


def _decoded(value: Any) -> Any:
    return value  # psycopg decodes jsonb itself


POSTGRES = Dialect(
    name="postgres",
    placeholder="%s",
    to_column=ts,
    from_column=dt,
    list_param=True,
    tie_break="seq",
    text_collation=' collate "C"',
    json_cast="::jsonb",
    json_elements=(
        "jsonb_array_elements_text(case when jsonb_typeof({column}) = 'array' then {column} else '[]' end)"
    ),
    from_json=_decoded,
    find_function="strpos",
    null_safe_equal="is not distinct from",
    utc_quarter=(
        "to_char(date_trunc('hour', {column} at time zone 'UTC') + floor(extract(minute from {column} at time zone "
        "'UTC') / 15) * interval '15 minutes', 'YYYY-MM-DD\"T\"HH24:MI')"
    ),
    int_floor="floor({value})::int",
    least="least",
    greatest="greatest",
    narrow_page=False,
    planner_hints=False,
)
