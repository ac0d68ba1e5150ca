"""Storage backends behind one interface (base.Store)."""

from __future__ import annotations

from .base import IndexedText, MemoryFilter, Store, StoreReader, StoreStats, StoreWriter
from .sqlite import SQLiteStore

__all__ = ["IndexedText", "MemoryFilter", "SQLiteStore", "Store", "StoreReader", "StoreStats", "StoreWriter"]
