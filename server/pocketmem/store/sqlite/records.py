"""The SQLite backend's value helpers: an in-list's placeholders, and which stored vectors sqlite-vec can read (the
row mappers are store/sql/records.py)."""

from __future__ import annotations


def placeholders(n: int) -> str:
    return ",".join("?" * n)


def readable_vector(column: str) -> str:
    """Whether `column` holds a vector sqlite-vec can read: a blob of float32 values, as many as the store's
    dimensions (store_meta `dimensions`, read once per statement; any number where no embedder has recorded them).
    Another value (a blob cut short, text a hand edit put there) is left out of the vector side of every search and
    comparison, where it would fail the whole statement; the doctor lists such vectors and `--repair` clears them for
    the embed queue."""
    size = f"length({column})"
    return (f"(typeof({column}) = 'blob' and {size} > 0 and {size} % 4 = 0 and {size} = "
            f"coalesce((select 4 * cast(value as integer) from store_meta where key = 'dimensions'), {size}))")
