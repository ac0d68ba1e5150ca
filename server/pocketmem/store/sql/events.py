"""The event log (memory_events), for both backends: writing, listing, reading after a position, import."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pocketmem.base.models import Event, EventKind
from pocketmem.store.sql.dialect import Dialect, json_text
from pocketmem.store.sql.queries import Queries
from pocketmem.store.sql.records import EVENT_COLUMNS, event_from_row

_WRITTEN = "user_id, kind, memory_id, operation_id, payload, created_at"


def _marks(d: Dialect) -> str:
    """The placeholders of the columns in _WRITTEN (the payload is JSON)."""
    return d.sql(f"{{p}}, {{p}}, {{p}}, {{p}}, {d.json_p()}, {{p}}")


class EventQueries(Queries):
    changes: dict[str, set[EventKind]]  # what this transaction wrote, for commit listeners

    async def _events(self, where: str, params: Sequence[Any]) -> list[Event]:
        rows = await self._all(f"select {EVENT_COLUMNS} from memory_events where {where}", params)
        return [event_from_row(r, self.dialect) for r in rows]

    async def add_event(
        self,
        user_id: str,
        kind: EventKind,
        now: datetime,
        *,
        memory_id: str | None = None,
        operation_id: str | None = None,
        payload: dict[str, Any] | None = None,
    ) -> None:
        d = self.dialect
        await self._exec(
            f"insert into memory_events ({_WRITTEN}) values ({_marks(d)})",
            (user_id, kind.value, memory_id, operation_id, json_text(payload), d.ts(now)),
        )
        self.changes.setdefault(user_id, set()).add(kind)

    async def list_events(
        self, user_id: str, limit: int = 100, kinds: Sequence[EventKind] | None = None
    ) -> list[Event]:
        d = self.dialect
        where, params = d.sql("user_id = {p}"), [user_id]
        if kinds:
            in_kinds, kind_params = d.in_list("kind", kinds)
            where, params = f"{where} and {in_kinds}", [*params, *kind_params]
        return await self._events(d.sql(f"{where} order by id desc limit {{p}}"), (*params, limit))

    async def events_after(self, user_id: str, after_id: int, limit: int) -> list[Event]:
        return await self._events(
            self.dialect.sql("user_id = {p} and id > {p} order by id limit {p}"), (user_id, after_id, limit)
        )

    async def memory_events(self, user_id: str, memory_id: str, limit: int) -> list[Event]:
        return await self._events(
            self.dialect.sql("memory_id = {p} and user_id = {p} order by id desc limit {p}"),
            (memory_id, user_id, limit),
        )

    async def latest_event_id(self, user_id: str) -> int:
        row = await self._one(self.dialect.sql("select max(id) from memory_events where user_id = {p}"), (user_id,))
        return int(row[0] or 0) if row else 0

    async def import_event(self, event: Event, nth: int = 0) -> bool:
        """Insert an exported event unless `nth + 1` alike (time, kind, memory, operation, payload) are here."""
        d = self.dialect
        payload, created = json_text(event.payload), d.ts(event.created_at)
        same = await self._one(
            d.sql(
                "select count(*) from memory_events where user_id = {p} and created_at = {p} and kind = {p} "
                f"and memory_id {d.null_safe_equal} {{p}} and operation_id {d.null_safe_equal} {{p}} "
                f"and payload = {d.json_p()}"
            ),
            (event.user_id, created, event.kind.value, event.memory_id, event.operation_id, payload),
        )
        if same[0] > nth:
            return False
        taken = await self._one(d.sql("select 1 from memory_events where id = {p}"), (event.id,))
        columns, marks = _WRITTEN, _marks(d)
        values: tuple[Any, ...] = (
            event.user_id, event.kind.value, event.memory_id, event.operation_id, payload, created
        )
        if not taken:
            columns, marks, values = f"id, {columns}", f"{d.placeholder}, {marks}", (event.id, *values)
        await self._exec(f"insert into memory_events ({columns}) values ({marks})", values)
        if not taken:
            await self._event_id_given()
        return True

    async def _event_id_given(self) -> None:
        """After an insert with an explicit id: a backend whose id sequence does not follow moves it on."""
