"""Storage backends behind one interface (base.Store)."""

from __future__ import annotations

from pocketmem.store.base import IndexedText, MemoryFilter, Store, StoreReader, StoreStats, StoreWriter
from pocketmem.store.sqlite.store import SQLiteStore

__all__ = ["IndexedText", "MemoryFilter", "SQLiteStore", "Store", "StoreReader", "StoreStats", "StoreWriter"]
