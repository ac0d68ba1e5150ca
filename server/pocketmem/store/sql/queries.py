"""What every mixin of queries written once (store/sql/) needs from the backend's transaction class."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pocketmem.base.models import Memory
from pocketmem.store.sql.dialect import Dialect


class Queries:
    """Mixed into `SQLiteTx` and `PostgresTx`, which give the connection helpers and the memory row mapping."""

    dialect: Dialect
    _memory_columns: ClassVar[str]

    if TYPE_CHECKING:

        async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        async def _one(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
        async def _exec(self, sql: str, params: Sequence[Any] = ()) -> int: ...
        async def _memories(self, where: str, params: Sequence[Any]) -> list[Memory]: ...
        def _to_memory(self, row: Sequence[Any]) -> Memory: ...
