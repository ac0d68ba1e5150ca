"""What differs between the backends' SQL text and values, and nothing else.

A portable query is written once with `{p}` for each parameter and `dialect.sql(...)` fills in the backend's
placeholder; times go through `dialect.ts` (to the column) and `dialect.dt` (from it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pocketmem.core.instants import encode as to_iso


@dataclass(frozen=True)
class Dialect:
    name: str
    placeholder: str  # "?" (SQLite) or "%s" (psycopg)
    to_column: Callable[[datetime], Any]  # a time as the column stores it
    from_column: Callable[[Any], datetime]  # and back, as an aware UTC datetime
    # For the row mappers and the memory queries (store/sql/records.py, store/sql/memories.py):
    parsed_json: bool = False  # the driver hands JSON columns back decoded (psycopg's jsonb)
    json_cast: str = ""  # after a JSON parameter's placeholder ("::jsonb")
    arrays: bool = False  # an in-list is one array parameter (`= any(%s)`), not one placeholder per value
    row_order: str = "rowid"  # the insertion-order column, where equal times need a tie-break
    planner_hints: bool = True  # SQLite's: `+user_id` beside a lookup by id, `indexed by` an index

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

    def to_json(self, value: Any) -> str:
        """A JSON parameter's value (text; PostgreSQL casts it with `json_cast`)."""
        return json.dumps(value, ensure_ascii=False, default=str)

    def from_json(self, value: Any) -> Any:
        return value if self.parsed_json else json.loads(value)

    def iso(self, value: Any) -> str | None:
        """A stored instant as ISO 8601 text."""
        return to_iso(self.from_column(value)) if value is not None else None

    def in_list(self, column: str, values: Iterable[Any]) -> tuple[str, tuple[Any, ...]]:
        """`column` is one of `values`: the condition and its parameters (enums as their values)."""
        plain = [getattr(v, "value", v) for v in values]
        if self.arrays:
            return f"{column} = any({self.placeholder})", (plain,)
        return f"{column} in ({self.placeholders(len(plain))})", tuple(plain)

    def owner(self) -> str:
        """The owner column beside a lookup by id: SQLite's `+user_id` keeps the planner on the primary key."""
        return "+user_id" if self.planner_hints else "user_id"

    def index_hint(self, index: str) -> str:
        """`indexed by <index> ` where the backend takes such a hint (SQLite), else nothing."""
        return f"indexed by {index} " if self.planner_hints else ""
