"""`pocketmem doctor` on PostgreSQL: stored times outside the years the time codec accepts.

timestamptz always reads back, but a value from before the codec (a year before 1000 in UTC) breaks the
SQLite mirror, exports re-imported elsewhere and date arithmetic. SQL narrows by range; the codec decides.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pocketmem.core import instants

_LOW = datetime(instants.MIN_YEAR, 1, 1, tzinfo=UTC)
_HIGH = datetime(instants.STORED_MAX_YEAR, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)


async def check(tx: Any, *, repair: bool) -> list[dict[str, Any]]:
    columns = await tx.fetch_all(
        "select c.table_name, c.column_name, c.is_nullable = 'YES' from information_schema.columns c "
        "where c.table_schema = current_schema() and c.data_type = 'timestamp with time zone' "
        "and c.table_name not in ('schema_migrations', 'store_meta') order by c.table_name, c.column_name"
    )
    problems: list[dict[str, Any]] = []
    for table, column, _nullable in columns:
        keys = [
            r[0]
            for r in await tx.fetch_all(
                "select column_name from information_schema.columns where table_schema = current_schema() "
                "and table_name = %s and column_name in ('user_id', 'id', 'tombstone_id', 'memory_id')",
                (table,),
            )
        ]
        ids = [c for c in ("user_id", "id", "tombstone_id", "memory_id") if c in keys][:2]
        rows = await tx.fetch_all(
            f'select ctid::text, {", ".join(ids) + ", " if ids else ""}"{column}" from "{table}" '
            f'where "{column}" < %s or "{column}" > %s',
            (_LOW, _HIGH),
        )
        for row in rows:
            when = row[-1]
            item: dict[str, Any] = {
                "table": table, "column": column, "value": str(when),
                "why": f"year {when.year} is outside {instants.MIN_YEAR}..{instants.STORED_MAX_YEAR}",
            }
            item.update({name: row[1 + i] for i, name in enumerate(ids)})
            if repair:
                fixed = _LOW if when < _LOW else _HIGH
                await tx.execute(f'update "{table}" set "{column}" = %s where ctid = %s::tid', (fixed, row[0]))
                item["repaired_to"] = instants.encode(fixed)
            problems.append(item)
    return problems
