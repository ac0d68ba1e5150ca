"""The SQLite backend (one file, WAL, sqlite-vec, FTS5)."""
