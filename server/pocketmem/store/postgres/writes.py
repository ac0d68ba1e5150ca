"""PostgreSQL writes of the core store interface (store/base.py StoreWriter), a mixin of `PostgresTx`.

Every statement runs inside the transaction `PostgresTx` was given; the per-user lock is taken
when the transaction is opened for the user (PostgresStore.write(user_id=...), store/postgres/tx.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pocketmem.base.models import (
    EventKind,
    Memory,
)


class WriteQueries:
    changes: dict[str, set[EventKind]]

    if TYPE_CHECKING:

        async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
        async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int: ...
        async def _memories(self, where: str, params: Sequence[Any]) -> list[Memory]: ...

    # -- writes ---------------------------------------------------------------------------------
    async def update_scores(self, user_id: str, scores: Sequence[tuple[str, float, float, float]]) -> None:
        if scores:
            # One statement for the batch: arrays unnested against the primary key.
            ids, infos, coefs, imps = (list(column) for column in zip(*scores, strict=True))
            await self._exec(
                "update memories m set info_importance = s.info, time_coef = s.coef, importance = s.imp "
                "from unnest(%s::text[], %s::float8[], %s::float8[], %s::float8[]) as s(id, info, coef, imp) "
                "where m.id = s.id and m.user_id = %s",
                (ids, infos, coefs, imps, user_id),
            )
