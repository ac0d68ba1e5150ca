"""The PostgreSQL dialect: `%s` placeholders, times as timestamptz (UTC, millisecond precision)."""

from __future__ import annotations

from typing import Any

from pocketmem.store.postgres.records import dt, ts
from pocketmem.store.sql.dialect import Dialect


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
    json_as_text="::text",
    from_json=_decoded,
    find_function="strpos",
    null_safe_equal="is not distinct from",
    utc_day="to_char({column} at time zone 'UTC', 'YYYY-MM-DD')",
    int_floor="floor({value})::int",
    least="least",
    greatest="greatest",
    narrow_page=False,
)
