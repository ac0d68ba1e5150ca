"""The SQLite dialect: `?` placeholders, times as ISO 8601 text with milliseconds (core/instants.py), JSON as text."""

from __future__ import annotations

from pocketmem.core.instants import decode as from_iso
from pocketmem.core.instants import encode as to_iso
from pocketmem.store.sql.dialect import Dialect

SQLITE = Dialect(name="sqlite", placeholder="?", to_column=to_iso, from_column=from_iso)
