"""`pocketmem doctor` on SQLite: every stored time in every table, checked by the time codec (core/instants).

SQLite keeps times as text, so a value written by an older version (a year before 1000 came out as
`999-12-31T15:54:17.000Z`) or by hand can fail to read back. The scan reads every row; SQL only narrows
to values whose shape or range differs from the stored form, and `instants.problem` decides.
With repair, a readable value is rewritten in the stored form (clamped into the supported years); an
unreadable one becomes NULL where the column allows it, else the repair time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import aiosqlite

from pocketmem.core import instants

SKIPPED_TABLES = frozenset({"schema_migrations", "store_meta"})
TIME_SUFFIXES = ("_at", "valid_from", "valid_until", "cooldown_until")
_SHAPE = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z"
_ID_COLUMNS = ("id", "tombstone_id", "memory_id", "key")


async def _time_tables(conn: aiosqlite.Connection) -> list[tuple[str, list[tuple[str, bool]], list[str]]]:
    """(table, [(time column, nullable)], identity columns) for every ordinary table with times."""
    names = [
        r[0]
        for r in await conn.execute_fetchall(
            "select name from sqlite_master where type = 'table' and name not like 'sqlite_%' "
            "and sql not like 'create virtual%' collate nocase"
        )
    ]
    found = []
    for name in names:
        if name in SKIPPED_TABLES:
            continue
        info = list(await conn.execute_fetchall(f'pragma table_info("{name}")'))
        columns = [r[1] for r in info]
        times = [(r[1], not r[3]) for r in info if str(r[1]).endswith(TIME_SUFFIXES)]
        if times:
            ids = [c for c in ("user_id", *_ID_COLUMNS) if c in columns][:2]
            found.append((name, times, ids))
    return found


async def check(conn: aiosqlite.Connection, *, repair: bool, now: datetime) -> list[dict[str, Any]]:
    """Every stored time that is not in the readable stored form: table, row, column, value, why (and the fix)."""
    problems: list[dict[str, Any]] = []
    for table, times, ids in await _time_tables(conn):
        for column, nullable in times:
            rows = await conn.execute_fetchall(
                f'select rowid, {", ".join(ids) + ", " if ids else ""}"{column}" from "{table}" '
                f'where "{column}" is not null and (typeof("{column}") != \'text\' or "{column}" not glob ? '
                f'or "{column}" < ? or "{column}" >= ?)',
                (_SHAPE, f"{instants.MIN_YEAR:04d}", "9999-12-31T23:59:59.999Z~"),
            )
            for row in rows:
                value = row[-1]
                why = instants.problem(value) if isinstance(value, str) else f"not text: {value!r}"
                if why is None:
                    continue
                item: dict[str, Any] = {"table": table, "column": column, "value": str(value)[:40], "why": why}
                item.update({name: row[1 + i] for i, name in enumerate(ids)})
                if repair:
                    fixed = instants.repaired(value) if isinstance(value, str) else None
                    if fixed is None and not nullable:
                        fixed = instants.encode(now)
                    await conn.execute(f'update "{table}" set "{column}" = ? where rowid = ?', (fixed, row[0]))
                    item["repaired_to"] = fixed
                problems.append(item)
    return problems
