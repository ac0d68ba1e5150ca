"""`pocketmem doctor`: every row of memories, profiles and profile_files decoded by the mappers the reads use
(records.py), for both backends. A row they cannot decode is left out of its user's reads with a warning; the
doctor lists it here, and `doctor --repair` mends it (service/upkeep/doctor.py)."""

from __future__ import annotations

from typing import Any

from pocketmem.base.errors import UnreadableRow
from pocketmem.store.sql.queries import Queries
from pocketmem.store.sql.records import earlier_from_row, mend_memory, profile_from_row

PAGE = 1000


class RowCheckQueries(Queries):
    async def unreadable_rows(self) -> list[dict[str, Any]]:
        """Each row that cannot be read: table, user_id, id (a profile's section, a profile file's name), why; a
        memory's with `fixes`, the columns `mend_memory` would rewrite (empty when none would do), a profile row's
        with `value`, the stored text."""
        d = self.dialect
        found: list[dict[str, Any]] = []
        after = 0
        while True:
            rows = await self._all(
                d.sql(
                    f"select {d.tie_break}, {self._memory_columns} from memories where {d.tie_break} > {{p}} "
                    f"order by {d.tie_break} limit {{p}}"
                ),
                (after, PAGE),
            )
            for row in rows:
                try:
                    self._to_memory(row[1:])
                except UnreadableRow as exc:
                    found.append({**exc.as_report(), "fixes": mend_memory(row[1:], d)})
            if len(rows) < PAGE:
                break
            after = rows[-1][0]
        for table, columns, read in (
            ("profiles", "user_id, section, fields", profile_from_row),
            ("profile_files", "user_id, name, earlier", earlier_from_row),
        ):
            for row in await self._all(f"select {columns} from {table} order by user_id, {columns.split(', ')[1]}"):
                try:
                    read(row, d)
                except UnreadableRow as exc:
                    value = row[2] if isinstance(row[2], str) else d.to_json(row[2])
                    found.append({**exc.as_report(), "value": value})
        return found
