"""Idempotent operations: the stored result of a request by its operation id, for both backends."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pocketmem.store.sql.dialect import Dialect


class OperationQueries:
    dialect: Dialect

    if TYPE_CHECKING:

        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
        async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    async def operation_result(self, user_id: str, operation_id: str) -> tuple[str, dict[str, Any]] | None:
        d = self.dialect
        row = await self._one(
            d.sql("select request_hash, result from memory_operations where user_id = {p} and operation_id = {p}"),
            (user_id, operation_id),
        )
        return (row[0], d.from_json(row[1])) if row else None

    async def record_operation(
        self, user_id: str, operation_id: str, request_hash: str, result: dict[str, Any], now: datetime
    ) -> None:
        d = self.dialect
        await self._exec(
            d.sql(
                "insert into memory_operations (user_id, operation_id, request_hash, result, created_at) "
                f"values ({{p}}, {{p}}, {{p}}, {{p}}{d.json_cast}, {{p}})"
            ),
            (user_id, operation_id, request_hash, d.to_json(result), d.ts(now)),
        )
