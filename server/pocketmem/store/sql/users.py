"""The users table, for both backends."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pocketmem.store.sql.dialect import Dialect
from pocketmem.store.sql.records import USER_COLUMNS, user_from_row


class UserQueries:
    dialect: Dialect

    if TYPE_CHECKING:

        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
        async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    async def get_user(self, user_id: str) -> dict[str, Any] | None:
        d = self.dialect
        row = await self._one(d.sql(f"select {USER_COLUMNS} from users where user_id = {{p}}"), (user_id,))
        return user_from_row(row, d) if row is not None else None

    async def ensure_user(self, user_id: str, now: datetime) -> None:
        d = self.dialect
        await self._exec(
            d.sql(
                "insert into users (user_id, created_at, updated_at) values ({p}, {p}, {p}) "
                "on conflict (user_id) do nothing"
            ),
            (user_id, d.ts(now), d.ts(now)),
        )
