"""The SQLite backend's value helpers, and the shared row mappers (store/sql/records.py) bound to its
dialect for the query modules that take a row alone."""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from pocketmem.store.sql import records as shared
from pocketmem.store.sql.records import EVENT_COLUMNS, REVISION_COLUMNS, TOMBSTONE_COLUMNS, USAGE_COLUMNS
from pocketmem.store.sqlite.dialect import SQLITE

__all__ = ["EVENT_COLUMNS", "REVISION_COLUMNS", "TOMBSTONE_COLUMNS", "USAGE_COLUMNS"]

tombstone_from_row = partial(shared.tombstone_from_row, d=SQLITE)
tombstone_params = partial(shared.tombstone_params, d=SQLITE)
revision_from_row = partial(shared.revision_from_row, d=SQLITE)
revision_params = partial(shared.revision_params, d=SQLITE)
event_from_row = partial(shared.event_from_row, d=SQLITE)
usage_from_row = partial(shared.usage_from_row, d=SQLITE)


def ts(value: datetime | None) -> str | None:
    return SQLITE.ts(value)


def dt(value: str | None) -> datetime | None:
    return SQLITE.dt(value)


def placeholders(n: int) -> str:
    return ",".join("?" * n)


def payload_text(payload: dict[str, Any] | None) -> str:
    return SQLITE.to_json(payload or {})

