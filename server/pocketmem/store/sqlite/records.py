"""The SQLite backend's value helper: an in-list's placeholders (the row mappers are store/sql/records.py)."""

from __future__ import annotations


def placeholders(n: int) -> str:
    return ",".join("?" * n)
