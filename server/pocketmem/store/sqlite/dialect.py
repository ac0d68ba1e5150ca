"""The SQLite dialect: `?` placeholders, times as ISO 8601 text with milliseconds (core/instants.py)."""

from __future__ import annotations

from pocketmem.core.instants import decode as from_iso
from pocketmem.core.instants import encode as to_iso
from pocketmem.store.sql.dialect import Dialect, json_from_text

SQLITE = Dialect(
    name="sqlite",
    placeholder="?",
    to_column=to_iso,
    from_column=from_iso,
    list_param=False,
    tie_break="rowid",
    text_collation="",  # SQLite compares text bytewise already
    json_cast="",
    json_elements=(
        "json_each(case when json_valid({column}) and json_type({column}) = 'array' then {column} else '[]' end)"
    ),
    from_json=json_from_text,
    find_function="instr",
    null_safe_equal="is",
    # times are stored as UTC text
    utc_quarter="substr({column}, 1, 14) || printf('%02d', cast(substr({column}, 15, 2) as integer) / 15 * 15)",
    int_floor="cast({value} as integer)",
    least="min",
    greatest="max",
    narrow_page=True,
    planner_hints=True,
)
