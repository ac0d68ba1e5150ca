"""What every mixin of queries written once (store/sql/) needs from the backend's transaction class."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pocketmem.base.errors import UnreadableRow
from pocketmem.base.models import Memory, PendingItem
from pocketmem.store.sql.dialect import Dialect
from pocketmem.store.sql.records import (
    MEMORY_COLUMNS,
    PENDING_COLUMNS,
    memory_from_row,
    memory_params,
    pending_from_row,
)


class Queries:
    """Mixed into `SQLiteTx` and `PostgresTx`, which give the dialect and the connection helpers."""

    dialect: Dialect
    left_out: list[UnreadableRow]  # what this transaction's reads left out (records.readable); set in __init__
    _memory_columns: ClassVar[str] = MEMORY_COLUMNS
    _pending_columns: ClassVar[str] = PENDING_COLUMNS

    if TYPE_CHECKING:

        async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
        async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int: ...
        async def _memories(self, where: str, params: Sequence[Any]) -> list[Memory]: ...

    def _to_memory(self, row: Sequence[Any]) -> Memory:
        return memory_from_row(row, self.dialect)

    def _to_pending(self, row: Sequence[Any]) -> PendingItem:
        return pending_from_row(row, self.dialect)

    def _memory_params(self, memory: Memory) -> tuple[Any, ...]:
        return memory_params(memory, self.dialect)
