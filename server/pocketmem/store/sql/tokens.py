"""API token rows, for both backends."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pocketmem.base.models import ApiToken
from pocketmem.store.sql.dialect import Dialect
from pocketmem.store.sql.queries import Queries

TOKEN_COLUMNS = "id, user_id, name, token_hash, created_at, last_used_at, revoked_at"


def token_from_row(row: Sequence[Any], dialect: Dialect) -> ApiToken:
    id_, user_id, name, token_hash, created_at, last_used_at, revoked_at = row
    return ApiToken(
        id=id_,
        user_id=user_id,
        name=name,
        token_hash=token_hash,
        created_at=dialect.from_column(created_at),
        last_used_at=dialect.dt(last_used_at),
        revoked_at=dialect.dt(revoked_at),
    )


class TokenQueries(Queries):
    """Reads and writes of `api_tokens`; mixed into each backend's transaction class."""

    async def get_token(self, token_id: str) -> ApiToken | None:
        d = self.dialect
        row = await self._one(d.sql(f"select {TOKEN_COLUMNS} from api_tokens where id = {{p}}"), (token_id,))
        return token_from_row(row, d) if row else None

    async def list_tokens(self, user_id: str | None = None, *, include_revoked: bool = False) -> list[ApiToken]:
        d = self.dialect
        where: list[str] = []
        params: list[Any] = []
        if user_id is not None:
            where.append(d.sql("user_id = {p}"))
            params.append(user_id)
        if not include_revoked:
            where.append("revoked_at is null")
        clause = f"where {' and '.join(where)}" if where else ""
        rows = await self._all(f"select {TOKEN_COLUMNS} from api_tokens {clause} order by created_at, id", params)
        return [token_from_row(r, d) for r in rows]

    async def count_active_tokens(self) -> int:
        row = await self._one("select count(*) from api_tokens where revoked_at is null")
        return int(row[0])

    async def insert_token(self, token: ApiToken) -> None:
        d = self.dialect
        await self._exec(
            f"insert into api_tokens ({TOKEN_COLUMNS}) values ({d.placeholders(7)})",
            (
                token.id,
                token.user_id,
                token.name,
                token.token_hash,
                d.ts(token.created_at),
                d.ts(token.last_used_at),
                d.ts(token.revoked_at),
            ),
        )

    async def revoke_token(self, token_id: str, when: datetime) -> bool:
        d = self.dialect
        changed = await self._exec(
            d.sql("update api_tokens set revoked_at = {p} where id = {p} and revoked_at is null"),
            (d.ts(when), token_id),
        )
        return changed > 0

    async def touch_token(self, token_id: str, when: datetime) -> None:
        d = self.dialect
        await self._exec(d.sql("update api_tokens set last_used_at = {p} where id = {p}"), (d.ts(when), token_id))
