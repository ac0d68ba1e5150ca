"""Content revisions (memory_revisions), for both backends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pocketmem.base.models import Revision
from pocketmem.store.sql.dialect import Dialect
from pocketmem.store.sql.queries import Queries

REVISION_COLUMNS = "id, memory_id, user_id, previous_content, new_content, mode, reason, created_at"


def revision_from_row(r: Sequence[Any], d: Dialect) -> Revision:
    return Revision(
        id=r[0],
        memory_id=r[1],
        user_id=r[2],
        previous_content=r[3],
        new_content=r[4],
        mode=r[5],
        reason=r[6],
        created_at=d.from_column(r[7]),
    )


def revision_params(r: Revision, d: Dialect) -> tuple[Any, ...]:
    return (r.id, r.memory_id, r.user_id, r.previous_content, r.new_content, r.mode, r.reason, d.ts(r.created_at))


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
