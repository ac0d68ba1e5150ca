"""`pocketmem doctor`: every row of every table the reads decode row by row (memories and every table export reads:
profiles, profile_files, profile_revisions, memory_tombstones, memory_revisions, memory_pending, memory_events,
memory_usage) decoded by the very mapper the reads use (records.py), for both backends: one rule per table of what
a readable row is. A row the mapper cannot decode is left out of its user's reads with a warning, or makes export
leave that user out; the doctor lists it here, and `doctor --repair` mends it or sets it aside
(service/upkeep/doctor.py) through `rewrite_row` and `remove_row`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from pocketmem.base.errors import UnreadableRow
from pocketmem.store.sql.dialect import Dialect
from pocketmem.store.sql.queries import Queries
from pocketmem.store.sql.records import (
    EVENT_COLUMNS,
    MEMORY_COLUMNS,
    PENDING_COLUMNS,
    PROFILE_COLUMNS,
    PROFILE_FILE_COLUMNS,
    PROFILE_REVISION_COLUMNS,
    REVISION_COLUMNS,
    TOMBSTONE_COLUMNS,
    USAGE_COLUMNS,
    USER_COLUMNS,
    earlier_from_row,
    event_from_row,
    mend_memory,
    mend_tombstone,
    mend_user,
    pending_from_row,
    profile_from_row,
    profile_revision_from_row,
    revision_from_row,
    tombstone_from_row,
    undecoded,
    usage_from_row,
    user_from_row,
)
from pocketmem.store.types import UndecodedText

PAGE = 1000


@dataclass(frozen=True)
class Decoded:
    """A table whose rows the reads decode one at a time: its unique key (the order the scan pages in; `numeric`
    when that is a number), the columns its mapper takes, the mapper, and how a row it cannot read is repaired:
    `mend` names the columns to rewrite (empty: none would do), else the row is kept in the report as `value` (a
    profile's stored text, which the doctor keeps in a revision) or as `row` (every stored value, which the doctor
    keeps in an event when it sets the row aside)."""

    table: str
    key: tuple[str, ...]
    columns: str
    read: Callable[[Sequence[Any], Dialect], object]
    mend: Callable[[Sequence[Any]], dict[str, Any]] | None = None
    value: int | None = None  # the column a profile row's stored text is in
    numeric: bool = False


DECODED = (
    # A users row fails on a time, which the doctor's times check rewrites before this scan's repair, or on a text.
    Decoded("users", ("user_id",), USER_COLUMNS, user_from_row, mend=mend_user),
    Decoded("profiles", ("user_id", "section"), PROFILE_COLUMNS, profile_from_row, value=2),
    Decoded("profile_files", ("user_id", "name"), PROFILE_FILE_COLUMNS, earlier_from_row, value=2),
    Decoded("profile_revisions", ("id",), PROFILE_REVISION_COLUMNS, profile_revision_from_row),
    Decoded("memory_tombstones", ("tombstone_id",), TOMBSTONE_COLUMNS, tombstone_from_row, mend=mend_tombstone),
    Decoded("memory_revisions", ("id",), REVISION_COLUMNS, revision_from_row),
    Decoded("memory_pending", ("id",), PENDING_COLUMNS, pending_from_row),
    Decoded("memory_events", ("id",), EVENT_COLUMNS, event_from_row, numeric=True),
    Decoded("memory_usage", ("user_id", "memory_id"), USAGE_COLUMNS, usage_from_row),
)
_BY_TABLE = {t.table: t for t in DECODED}


def _stored(value: Any, d: Dialect) -> Any:
    """A stored value as JSON can hold it, for the report and the event a row set aside is kept in."""
    if isinstance(value, UndecodedText):
        return value.stored()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return f"x'{bytes(value).hex()}'"
    if isinstance(value, datetime | date):
        return value.isoformat()
    return d.to_json(value) if isinstance(value, dict | list) else str(value)


class RowCheckQueries(Queries):
    async def unreadable_rows(self) -> list[dict[str, Any]]:
        """Each row that cannot be read: table, user_id, id (a profile's section, a profile file's name, a use
        counter's memory), why, and `key` (its key columns and values); a memory's, user's or tombstone's with
        `fixes`, the columns to rewrite (empty when none would do), and `undecoded`, the stored bytes of those that
        were not UTF-8 text (to keep in an event); a profile row's with `value`, its stored text, any other's with
        `row`, its stored values."""
        d = self.dialect
        found: list[dict[str, Any]] = []
        async for _, row in self._pages("memories", (d.tie_break,), self._memory_columns, numeric=True):
            try:
                self._to_memory(row)
            except UnreadableRow as exc:
                found.append({**exc.as_report(), "key": {"id": row[0]}, "fixes": mend_memory(row, d),
                              **_undecoded(row, MEMORY_COLUMNS)})
        for table in DECODED:
            async for key, row in self._pages(table.table, table.key, table.columns, numeric=table.numeric):
                try:
                    table.read(row, d)
                except UnreadableRow as exc:
                    found.append({**exc.as_report(), "key": dict(zip(table.key, key, strict=True)),
                                  **self._kept(table, row)})
        return found

    def _kept(self, table: Decoded, row: Sequence[Any]) -> dict[str, Any]:
        d = self.dialect
        if table.mend is not None:
            return {"fixes": table.mend(row), **_undecoded(row, table.columns)}
        if table.value is not None:
            return {"value": _stored(row[table.value], d)}
        names = [c.strip() for c in table.columns.split(",")]
        return {"row": {name: _stored(value, d) for name, value in zip(names, row, strict=True)}}

    async def _pages(
        self, table: str, key: tuple[str, ...], columns: str, *, numeric: bool
    ) -> AsyncIterator[tuple[Sequence[Any], Sequence[Any]]]:
        """Every row of `table` as (its key, its `columns`), a page at a time in the order of its key."""
        d = self.dialect
        order = ", ".join(k if numeric else d.by_text(k) for k in key)
        after: Sequence[Any] | None = None
        while True:
            past = f"where ({order}) > ({', '.join(['{p}'] * len(key))}) " if after is not None else ""
            rows = await self._all(
                d.sql(f"select {', '.join(key)}, {columns} from {table} {past}order by {order} limit {{p}}"),
                (*(after or ()), PAGE),
            )
            for row in rows:
                yield row[: len(key)], row[len(key) :]
            if len(rows) < PAGE:
                return
            after = rows[-1][: len(key)]

    async def rewrite_row(self, table: str, key: dict[str, Any], values: dict[str, Any]) -> None:
        """`doctor --repair`: set `values` (columns as stored) on the row of a DECODED table with this key."""
        assert set(values) <= {c.strip() for c in _BY_TABLE[table].columns.split(",")}, values
        d = self.dialect
        sets = ", ".join(f"{column} = {{p}}" for column in values)
        where = " and ".join(f"{column} = {{p}}" for column in _BY_TABLE[table].key)
        await self._exec(d.sql(f"update {table} set {sets} where {where}"), (*values.values(), *_keyed(table, key)))

    async def remove_row(self, table: str, key: dict[str, Any]) -> None:
        """`doctor --repair`: delete the row of a DECODED table with this key (set aside: the doctor has kept its
        stored values in an event first)."""
        d = self.dialect
        where = " and ".join(f"{column} = {{p}}" for column in _BY_TABLE[table].key)
        await self._exec(d.sql(f"delete from {table} where {where}"), _keyed(table, key))


def _undecoded(row: Sequence[Any], columns: str) -> dict[str, Any]:
    """`undecoded` for a report item: the stored bytes of the row's values that are not UTF-8 text, if any."""
    bad = undecoded(row, columns)
    return {"undecoded": {name: value.stored() for name, value in bad.items()}} if bad else {}


def _keyed(table: str, key: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(key[column] for column in _BY_TABLE[table].key)
