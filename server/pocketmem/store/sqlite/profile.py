"""SQLite side of the profile layer's store interface (store/profile_base.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from pocketmem.base.clock import from_iso
from pocketmem.base.models import Category, Memory, ProfileRevision
from pocketmem.store.sqlite.records import placeholders, ts

if TYPE_CHECKING:
    from pocketmem.store.base import MemoryFilter


def memory_filter_clause(user_id: str, flt: MemoryFilter, *, with_category: bool = True) -> tuple[str, list[Any]]:
    """The where clause of a memory listing (shared by list_memories and category_counts)."""
    where = ["user_id = ?", f"status in ({placeholders(len(flt.statuses))})"]
    params: list[Any] = [user_id, *flt.statuses]
    if with_category and flt.category is not None:
        where.append("category = ?")
        params.append(flt.category.value)
    if flt.text:
        where.append("(instr(lower(content), lower(?)) > 0 or instr(lower(keywords), lower(?)) > 0)")
        params.extend([flt.text, flt.text])
    if flt.since is not None:
        where.append("created_at >= ?")
        params.append(ts(flt.since))
    if flt.until is not None:
        where.append("created_at < ?")
        params.append(ts(flt.until))
    return " and ".join(where), params


class ProfileQueries:
    _memory_columns: ClassVar[str]
    _to_memory: Callable[[Sequence[Any]], Memory]

    if TYPE_CHECKING:

        async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any | None: ...
        async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    async def get_profile(self, user_id: str) -> dict[str, dict[str, Any]]:
        rows = await self._all("select section, fields from profiles where user_id = ?", (user_id,))
        return {r[0]: json.loads(r[1]) for r in rows}

    async def list_profile_revisions(self, user_id: str, limit: int) -> list[ProfileRevision]:
        rows = await self._all(
            "select id, user_id, section, previous, new, source, created_at from profile_revisions "
            "where user_id = ? order by created_at desc, rowid desc limit ?",
            (user_id, limit),
        )
        return [
            ProfileRevision(
                id=r[0], user_id=r[1], section=r[2], previous=json.loads(r[3]), new=json.loads(r[4]), source=r[5],
                created_at=from_iso(r[6]),
            )
            for r in rows
        ]

    async def get_profile_file(self, user_id: str, name: str) -> tuple[str, str, list[str]] | None:
        row = await self._one(
            "select written_text, written_hash, earlier from profile_files where user_id = ? and name = ?",
            (user_id, name),
        )
        return (row[0], row[1], json.loads(row[2])) if row else None

    async def category_counts(self, user_id: str, flt: MemoryFilter) -> dict[str, int]:
        clause, params = memory_filter_clause(user_id, flt, with_category=False)
        rows = await self._all(f"select category, count(*) from memories where {clause} group by category", params)
        return {r[0]: int(r[1]) for r in rows}

    async def most_used(self, user_id: str, categories: Sequence[Category], limit: int) -> list[Memory]:
        rows = await self._all(
            f"select {self._memory_columns} from memories where user_id = ? and status = 'active' "
            f"and category in ({placeholders(len(categories))}) "
            "order by use_count desc, created_at desc, rowid desc limit ?",
            (user_id, *[c.value for c in categories], limit),
        )
        return [self._to_memory(r) for r in rows]

    async def put_profile(self, user_id: str, section: str, fields: Mapping[str, Any], now: datetime) -> None:
        await self._exec(
            "insert into profiles (user_id, section, fields, updated_at) values (?, ?, ?, ?) "
            "on conflict (user_id, section) do update set fields = excluded.fields, updated_at = excluded.updated_at",
            (user_id, section, json.dumps(dict(fields), ensure_ascii=False), ts(now)),
        )

    async def insert_profile_revision(self, revision: ProfileRevision) -> None:
        await self._exec(
            "insert into profile_revisions (id, user_id, section, previous, new, source, created_at) "
            "values (?, ?, ?, ?, ?, ?, ?)",
            (
                revision.id, revision.user_id, revision.section,
                json.dumps(revision.previous, ensure_ascii=False), json.dumps(revision.new, ensure_ascii=False),
                revision.source, ts(revision.created_at),
            ),
        )

    async def import_profile_revision(self, revision: ProfileRevision) -> bool:
        if await self._one("select 1 from profile_revisions where id = ?", (revision.id,)):
            return False
        await self.insert_profile_revision(revision)
        return True

    async def put_profile_file(
        self, user_id: str, name: str, text: str, digest: str, earlier: Sequence[str], now: datetime
    ) -> None:
        await self._exec(
            "insert into profile_files (user_id, name, written_text, written_hash, earlier, written_at) "
            "values (?, ?, ?, ?, ?, ?) on conflict (user_id, name) do update set written_text = excluded.written_text, "
            "written_hash = excluded.written_hash, earlier = excluded.earlier, written_at = excluded.written_at",
            (user_id, name, text, digest, json.dumps(list(earlier), ensure_ascii=False), ts(now)),
        )

    async def set_identity_confirmed(self, user_id: str, confirmed: bool, now: datetime) -> None:
        await self._exec(
            "insert into users (user_id, identity_confirmed, created_at, updated_at) values (?, ?, ?, ?) "
            "on conflict (user_id) do update set identity_confirmed = excluded.identity_confirmed, "
            "updated_at = excluded.updated_at",
            (user_id, 1 if confirmed else 0, ts(now), ts(now)),
        )
