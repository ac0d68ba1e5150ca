"""What differs between the backends' SQL text and values, and nothing else.

A portable query is written once with `{p}` for each parameter and `dialect.sql(...)` fills in the backend's
placeholder; times go through `dialect.ts` (to the column) and `dialect.dt` (from it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from pocketmem.core.instants import encode as to_iso


@dataclass(frozen=True)
class Dialect:
    name: str
    placeholder: str  # "?" (SQLite) or "%s" (psycopg)
    to_column: Callable[[datetime], Any]  # a time as the column stores it
    from_column: Callable[[Any], datetime]  # and back, as an aware UTC datetime

    def sql(self, text: str) -> str:
        """`text` with every `{p}` replaced by the placeholder."""
        return text.replace("{p}", self.placeholder)

    def placeholders(self, n: int) -> str:
        """`n` comma-separated placeholders, for in-lists and values lists."""
        return ", ".join([self.placeholder] * n)

    def ts(self, value: datetime | None) -> Any:
        return self.to_column(value) if value is not None else None

    def dt(self, value: Any) -> datetime | None:
        return self.from_column(value) if value is not None else None

    # -- added for the queries written once (store/sql/): the rest of what differs in SQL text ------------
    list_param: bool  # an in-list as one array parameter (`= any(%s)`) instead of one placeholder per value
    tie_break: str  # the insertion-order column that breaks ties: "rowid" or "seq"
    text_collation: str  # appended to a text column ordered or compared bytewise ("" or ' collate "C"')
    json_cast: str  # appended to a JSON parameter's placeholder ("" or "::jsonb")
    json_elements: str  # the rows of the JSON array column `{column}`, each in a column `value` (a non-array: none)
    from_json: Callable[[Any], Any]  # a JSON column's value as Python (SQLite keeps text, psycopg decodes)
    find_function: str  # position of a substring, 0 when absent: "instr" or "strpos"
    null_safe_equal: str  # "is" or "is not distinct from"
    utc_quarter: str  # the UTC quarter hour (YYYY-MM-DDTHH:MM, MM in 00 15 30 45) of the time column `{column}`
    int_floor: str  # the integer part of the non-negative `{value}`
    least: str  # the smaller of two values: "min" or "least"
    greatest: str  # "max" or "greatest"
    narrow_page: bool  # page a listing by its tie-break ids first (SQLite: skips index entries, not rows)
    planner_hints: bool  # SQLite's: `+user_id` beside a lookup by id, `indexed by` an index

    def in_list(self, column: str, values: Sequence[Any], *, negate: bool = False) -> tuple[str, list[Any]]:
        """`column in (values)` (or not in) and its parameters; an empty list matches nothing (or everything)."""
        plain = [v.value if isinstance(v, Enum) else v for v in values]
        if len(plain) == 1:  # an equality: an index on the column then also gives the order
            return f"{column} {'<>' if negate else '='} {self.placeholder}", plain
        if self.list_param:
            test = f"{column} = any({self.placeholder})"
            return (f"not ({test})" if negate else test), [plain]
        return f"{column} {'not in' if negate else 'in'} ({self.placeholders(len(plain))})", plain

    def by_text(self, column: str) -> str:
        """The column as ordered and compared byte by byte, the same on both backends."""
        return f"{column}{self.text_collation}"

    def json_p(self) -> str:
        """The placeholder of a JSON parameter (its value: the JSON text)."""
        return f"{self.placeholder}{self.json_cast}"

    def contains(self, column: str) -> str:
        """Whether `column` contains the parameter, case-insensitively."""
        return f"{self.find_function}(lower({column}), lower({self.placeholder})) > 0"

    def element_contains(self, column: str) -> str:
        """Whether an element of the JSON array `column` contains the parameter, case-insensitively: the values
        alone, never the JSON text's quotes, brackets and commas."""
        found = f"{self.find_function}(lower(k.value), lower({self.placeholder})) > 0"
        return f"exists (select 1 from {self.json_elements.format(column=column)} as k where {found})"

    def quarter_of(self, column: str) -> str:
        return self.utc_quarter.format(column=column)

    def floor(self, value: str) -> str:
        return self.int_floor.format(value=value)

    def clamp(self, value: str, low: str, high: str) -> str:
        return f"{self.least}({self.greatest}({value}, {low}), {high})"


    def to_json(self, value: Any) -> str:
        """A JSON parameter's value (text; PostgreSQL casts it with `json_cast`)."""
        return json.dumps(value, ensure_ascii=False, default=str)

    def iso(self, value: Any) -> str | None:
        """A stored instant as ISO 8601 text."""
        return to_iso(self.from_column(value)) if value is not None else None

    def owner(self) -> str:
        """The owner column beside a lookup by id: SQLite's `+user_id` keeps the planner on the primary key."""
        return "+user_id" if self.planner_hints else "user_id"

    def index_hint(self, index: str) -> str:
        """`indexed by <index> ` where the backend takes such a hint (SQLite), else nothing."""
        return f"indexed by {index} " if self.planner_hints else ""


def json_text(value: Any) -> str:
    """A JSON column's text: non-ASCII kept as is, unknown types by their string."""
    return json.dumps(value if value is not None else {}, ensure_ascii=False, default=str)


def json_from_text(value: Any) -> Any:
    """A JSON column as SQLite returns it (text) decoded; a value already decoded is returned as it is."""
    return json.loads(value) if isinstance(value, str | bytes) else value
