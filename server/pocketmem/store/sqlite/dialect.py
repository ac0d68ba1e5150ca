"""The SQLite dialect: `?` placeholders, times as ISO 8601 text with milliseconds (base/clock.py)."""

from __future__ import annotations

from pocketmem.base.clock import from_iso, to_iso
from pocketmem.store.sql.dialect import Dialect

SQLITE = Dialect(name="sqlite", placeholder="?", to_column=to_iso, from_column=from_iso)
