"""The PostgreSQL dialect: `%s` placeholders, times as timestamptz (UTC, millisecond precision)."""

from __future__ import annotations

from pocketmem.store.postgres.records import dt, ts
from pocketmem.store.sql.dialect import Dialect

POSTGRES = Dialect(name="postgres", placeholder="%s", to_column=ts, from_column=dt)
