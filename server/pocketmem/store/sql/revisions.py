"""Content revisions (memory_revisions), for both backends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pocketmem.base.models import Revision
from pocketmem.store.sql.queries import Queries
from pocketmem.store.sql.records import REVISION_COLUMNS, revision_from_row, revision_params


class RevisionQueries(Queries):
    async def _revisions(self, where: str, params: Sequence[Any]) -> list[Revision]:
        d = self.dialect
        rows = await self._all(
            f"select {REVISION_COLUMNS} from memory_revisions where {where} order by created_at, {d.tie_break}", params
        )
        return [revision_from_row(r, d) for r in rows]

    async def insert_revision(self, revision: Revision) -> None:
        d = self.dialect
        await self._exec(
            f"insert into memory_revisions ({REVISION_COLUMNS}) values ({d.placeholders(8)})",
            revision_params(revision, d),
        )

    async def import_revision(self, revision: Revision) -> bool:
        d = self.dialect
        count = await self._exec(
            f"insert into memory_revisions ({REVISION_COLUMNS}) values ({d.placeholders(8)}) "
            "on conflict (id) do nothing",
            revision_params(revision, d),
        )
        return count > 0

    async def list_revisions(self, user_id: str, memory_id: str) -> list[Revision]:
        return await self._revisions(self.dialect.sql("user_id = {p} and memory_id = {p}"), (user_id, memory_id))

    async def all_revisions(self, user_id: str) -> list[Revision]:
        return await self._revisions(self.dialect.sql("user_id = {p}"), (user_id,))
