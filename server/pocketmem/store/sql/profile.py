"""The profile layer's queries (store/profile_base.py) for both backends: sections, their revisions, the
text last written to each Markdown file, and the counts and orders the profile and listing need.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pocketmem.base.errors import UnreadableRow
from pocketmem.base.models import Category, Memory, ProfileRevision, Status
from pocketmem.store.sql.dialect import Dialect
from pocketmem.store.sql.queries import Queries
from pocketmem.store.sql.records import (
    MEMORY_COLUMNS,
    PROFILE_REVISION_COLUMNS,
    earlier_from_row,
    leave_out,
    memory_from_row,
    profile_from_row,
    profile_revision_from_row,
    readable,
)

if TYPE_CHECKING:
    from pocketmem.store.types import MemoryFilter

def listing_where(
    d: Dialect,
    user_id: str,
    statuses: Sequence[Status],
    category: Category | None,
    text: str | None,
    since: datetime | None,
    until: datetime | None,
) -> tuple[str, list[Any]]:
    """The where clause of a listing of the user's memories: statuses, category, text, creation window."""
    in_statuses, params = d.in_list("status", statuses)
    where, params = [d.sql("user_id = {p}"), in_statuses], [user_id, *params]
    if category is not None:
        where.append(d.sql("category = {p}"))
        params.append(category.value)
    if text:
        where.append(f"({d.contains('content')} or {d.element_contains('keywords')})")
        params.extend([text, text])
    if since is not None:
        where.append(d.sql("created_at >= {p}"))
        params.append(d.ts(since))
    if until is not None:
        where.append(d.sql("created_at < {p}"))
        params.append(d.ts(until))
    return " and ".join(where), params


def memory_filter_clause(
    d: Dialect, user_id: str, flt: MemoryFilter, *, with_category: bool = True
) -> tuple[str, list[Any]]:
    """The where clause of a memory listing (shared by list_memories and category_counts)."""
    category = flt.category if with_category else None
    return listing_where(d, user_id, flt.statuses, category, flt.text, flt.since, flt.until)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class ProfileQueries(Queries):
    async def get_profile(self, user_id: str, *, strict: bool = False) -> dict[str, dict[str, Any]]:
        d = self.dialect
        rows = await self._all(d.sql("select user_id, section, fields from profiles where user_id = {p}"), (user_id,))
        if strict:
            return dict(profile_from_row(r, d) for r in rows)
        return dict(readable(rows, lambda row: profile_from_row(row, d), self.left_out))

    async def list_profile_revisions(self, user_id: str, limit: int) -> list[ProfileRevision]:
        d = self.dialect
        rows = await self._all(
            d.sql(
                f"select {PROFILE_REVISION_COLUMNS} from profile_revisions "
                f"where user_id = {{p}} order by created_at desc, {d.tie_break} desc limit {{p}}"
            ),
            (user_id, limit),
        )
        return [profile_revision_from_row(r, d) for r in rows]

    async def get_profile_file(self, user_id: str, name: str) -> tuple[str, str, list[str]] | None:
        d = self.dialect
        row = await self._one(
            d.sql(
                "select written_text, written_hash, user_id, name, earlier from profile_files "
                "where user_id = {p} and name = {p}"
            ),
            (user_id, name),
        )
        if row is None:
            return None
        try:
            earlier = earlier_from_row(row[2:], d)
        except UnreadableRow as exc:  # only older versions to judge a stale editor's save by: go on without them
            leave_out(exc, self.left_out)
            earlier = []
        return row[0], row[1], earlier

    async def category_counts(self, user_id: str, flt: MemoryFilter) -> dict[str, int]:
        clause, params = memory_filter_clause(self.dialect, user_id, flt, with_category=False)
        rows = await self._all(f"select category, count(*) from memories where {clause} group by category", params)
        return {r[0]: int(r[1]) for r in rows}

    async def most_used(self, user_id: str, categories: Sequence[Category], limit: int) -> list[Memory]:
        d = self.dialect
        in_categories, category_params = d.in_list("category", categories)
        # A page of the (user, status, category, uses) index: the use index alone would walk every active memory
        # when the category's are few, and the category index alone sorted all of them.
        rows = await self._all(
            d.sql(
                f"select {MEMORY_COLUMNS} from memories {d.index_hint('memories_by_category_uses')}"
                f"where user_id = {{p}} and status = 'active' and {in_categories} "
                f"order by use_count desc, created_at desc, {d.tie_break} desc limit {{p}}"
            ),
            (user_id, *category_params, limit),
        )
        return readable(rows, lambda row: memory_from_row(row, d), self.left_out)

    async def put_profile(self, user_id: str, section: str, fields: Mapping[str, Any], now: datetime) -> None:
        d = self.dialect
        await self._exec(
            d.sql(
                "insert into profiles (user_id, section, fields, updated_at) "
                f"values ({{p}}, {{p}}, {d.json_p()}, {{p}}) on conflict (user_id, section) "
                "do update set fields = excluded.fields, updated_at = excluded.updated_at"
            ),
            (user_id, section, _json(dict(fields)), d.ts(now)),
        )

    async def insert_profile_revision(self, revision: ProfileRevision) -> None:
        d = self.dialect
        j = d.json_p()
        await self._exec(
            d.sql(
                f"insert into profile_revisions ({PROFILE_REVISION_COLUMNS}) "
                f"values ({{p}}, {{p}}, {{p}}, {j}, {j}, {{p}}, {{p}})"
            ),
            (
                revision.id, revision.user_id, revision.section, _json(revision.previous), _json(revision.new),
                revision.source, d.ts(revision.created_at),
            ),
        )

    async def import_profile_revision(self, revision: ProfileRevision) -> bool:
        if await self._one(self.dialect.sql("select 1 from profile_revisions where id = {p}"), (revision.id,)):
            return False
        await self.insert_profile_revision(revision)
        return True

    async def put_profile_file(
        self, user_id: str, name: str, text: str, digest: str, earlier: Sequence[str], now: datetime
    ) -> None:
        d = self.dialect
        await self._exec(
            d.sql(
                "insert into profile_files (user_id, name, written_text, written_hash, earlier, written_at) "
                f"values ({{p}}, {{p}}, {{p}}, {{p}}, {d.json_p()}, {{p}}) on conflict (user_id, name) do update set "
                "written_text = excluded.written_text, written_hash = excluded.written_hash, "
                "earlier = excluded.earlier, written_at = excluded.written_at"
            ),
            (user_id, name, text, digest, _json(list(earlier)), d.ts(now)),
        )

    async def set_identity_confirmed(self, user_id: str, confirmed: bool, now: datetime) -> None:
        d = self.dialect
        await self._exec(
            d.sql(
                "insert into users (user_id, identity_confirmed, created_at, updated_at) values ({p}, {p}, {p}, {p}) "
                "on conflict (user_id) do update set identity_confirmed = excluded.identity_confirmed, "
                "updated_at = excluded.updated_at"
            ),
            (user_id, bool(confirmed), d.ts(now), d.ts(now)),
        )
