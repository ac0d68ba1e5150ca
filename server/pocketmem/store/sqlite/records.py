"""Row <-> record conversions and column lists shared by the SQLite backend's query modules."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pocketmem.base.models import DeleteReason, Event, EventKind, Revision, Tombstone, Usage
from pocketmem.core.instants import decode as from_iso
from pocketmem.core.instants import encode as to_iso

TOMBSTONE_COLUMNS = (
    "tombstone_id, memory_id, user_id, deleted_at, purge_at, reason, cloud_synced_at, payload_hash, restored_at, "
    "purged_at"
)
REVISION_COLUMNS = "id, memory_id, user_id, previous_content, new_content, mode, reason, created_at"
EVENT_COLUMNS = "id, user_id, kind, memory_id, operation_id, payload, created_at"
USAGE_COLUMNS = "user_id, memory_id, used_count, last_used_at, used_mark, recalled_mark"


def ts(value: datetime | None) -> str | None:
    return to_iso(value) if value is not None else None


def dt(value: str | None) -> datetime | None:
    return from_iso(value) if value is not None else None


def placeholders(n: int) -> str:
    return ",".join("?" * n)


def payload_text(payload: dict[str, Any] | None) -> str:
    return json.dumps(payload or {}, ensure_ascii=False, default=str)


def tombstone_from_row(r: Sequence[Any]) -> Tombstone:
    return Tombstone(
        tombstone_id=r[0],
        memory_id=r[1],
        user_id=r[2],
        deleted_at=from_iso(r[3]),
        purge_at=dt(r[4]),
        reason=DeleteReason(r[5]),
        cloud_synced_at=dt(r[6]),
        payload_hash=r[7],
        restored_at=dt(r[8]),
        purged_at=dt(r[9]),
    )


def tombstone_params(t: Tombstone) -> tuple[Any, ...]:
    return (
        t.tombstone_id,
        t.memory_id,
        t.user_id,
        to_iso(t.deleted_at),
        ts(t.purge_at),
        t.reason.value,
        ts(t.cloud_synced_at),
        t.payload_hash,
        ts(t.restored_at),
        ts(t.purged_at),
    )


def revision_from_row(r: Sequence[Any]) -> Revision:
    return Revision(
        id=r[0],
        memory_id=r[1],
        user_id=r[2],
        previous_content=r[3],
        new_content=r[4],
        mode=r[5],
        reason=r[6],
        created_at=from_iso(r[7]),
    )


def revision_params(r: Revision) -> tuple[Any, ...]:
    return (
        r.id,
        r.memory_id,
        r.user_id,
        r.previous_content,
        r.new_content,
        r.mode,
        r.reason,
        to_iso(r.created_at),
    )


def event_from_row(r: Sequence[Any]) -> Event:
    return Event(
        id=r[0],
        user_id=r[1],
        kind=EventKind(r[2]),
        memory_id=r[3],
        operation_id=r[4],
        payload=json.loads(r[5]),
        created_at=from_iso(r[6]),
    )


def usage_from_row(r: Sequence[Any]) -> Usage:
    return Usage(
        user_id=r[0],
        memory_id=r[1],
        used_count=r[2],
        last_used_at=dt(r[3]),
        used_mark=r[4],
        recalled_mark=r[5],
    )
