"""What differs between the backends' SQL text and values, and nothing else.

A portable query is written once with `{p}` for each parameter and `dialect.sql(...)` fills in the backend's
placeholder; times go through `dialect.ts` (to the column) and `dialect.dt` (from it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any


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
