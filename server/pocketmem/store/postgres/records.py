"""Row <-> record conversions, column lists and value adapters of the PostgreSQL backend."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, overload

from pocketmem.base.models import (
    Category,
    DeleteReason,
    Event,
    EventKind,
    Memory,
    PendingItem,
    PendingStatus,
    Revision,
    Scores,
    Status,
    Tombstone,
    Usage,
)

MEMORY_COLUMNS = (
    "id, user_id, content, category, keywords, emotion, info, persistence, judge, info_importance, time_coef, "
    "importance, confidence, source, source_ref, created_at, updated_at, valid_from, valid_until, last_active_at, "
    "use_count, status, deleted_at, purge_at, delete_reason, supersedes, expires_at, due_at, remind_at, "
    "completed_at, content_hash, embed_model"
)
MEMORY_COLUMN_LIST = [c.strip() for c in MEMORY_COLUMNS.split(",")]
PENDING_COLUMNS = "id, user_id, candidate, confidence, status, cooldown_until, memory_id, created_at, updated_at"
TOMBSTONE_COLUMNS = (
    "tombstone_id, memory_id, user_id, deleted_at, purge_at, reason, cloud_synced_at, payload_hash, restored_at, "
    "purged_at"
)
REVISION_COLUMNS = "id, memory_id, user_id, previous_content, new_content, mode, reason, created_at"
EVENT_COLUMNS = "id, user_id, kind, memory_id, operation_id, payload, created_at"
USAGE_COLUMNS = "user_id, memory_id, used_count, last_used_at, used_mark, recalled_mark"


@overload
def ts(value: datetime) -> datetime: ...
@overload
def ts(value: None) -> None: ...
def ts(value: datetime | None) -> datetime | None:
    """What the store keeps of an instant: UTC, millisecond precision (as the SQLite backend)."""
    if value is None:
        return None
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


@overload
def dt(value: datetime) -> datetime: ...
@overload
def dt(value: None) -> None: ...
def dt(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC) if value is not None else None


def vector_text(vector: Sequence[float]) -> str:
    return "[" + ",".join(format(float(x), ".9g") for x in vector) + "]"


def parse_vector(text: str) -> list[float]:
    return [float(x) for x in text.strip("[]").split(",")] if text and text != "[]" else []


def json_text(value: Any) -> str:
    return json.dumps(value if value is not None else {}, ensure_ascii=False, default=str)


def lexemes(user_id: str, text_terms: str, keyword_terms: str) -> list[str]:
    """The keyword index entries of a memory: its distinct terms, each prefixed with the user id."""
    return [f"{user_id}|{t}" for t in dict.fromkeys(f"{text_terms} {keyword_terms}".split())]


def tsquery_text(user_id: str, terms: Sequence[str], *, all_terms: bool = False) -> str:
    """A tsquery that ORs (or ANDs) the user's terms, each quoted so user text stays inert."""
    quoted = ["'" + f"{user_id}|{t}".replace("\\", "\\\\").replace("'", "''") + "'" for t in terms if t]
    return (" & " if all_terms else " | ").join(quoted)


def memory_params(m: Memory) -> tuple[Any, ...]:
    return (
        m.id,
        m.user_id,
        m.content,
        m.category.value,
        json.dumps(m.keywords, ensure_ascii=False),
        m.scores.emotion,
        m.scores.info,
        m.scores.persistence,
        m.scores.judge,
        m.info_importance,
        m.time_coef,
        m.importance,
        m.confidence,
        m.source,
        m.source_ref,
        ts(m.created_at),
        ts(m.updated_at),
        ts(m.valid_from),
        ts(m.valid_until),
        ts(m.last_active_at),
        m.use_count,
        m.status.value,
        ts(m.deleted_at),
        ts(m.purge_at),
        m.delete_reason.value if m.delete_reason else None,
        m.supersedes,
        ts(m.expires_at),
        ts(m.due_at),
        ts(m.remind_at),
        ts(m.completed_at),
        m.content_hash,
        m.embed_model,
    )


def memory_from_row(row: Sequence[Any]) -> Memory:
    (
        id_, user_id, content, category, keywords, emotion, info, persistence, judge, info_importance, time_coef,
        importance, confidence, source, source_ref, created_at, updated_at, valid_from, valid_until, last_active_at,
        use_count, status, deleted_at, purge_at, delete_reason, supersedes, expires_at, due_at, remind_at,
        completed_at, content_hash, embed_model,
    ) = row
    return Memory.model_construct(
        id=id_,
        user_id=user_id,
        content=content,
        category=Category(category),
        keywords=list(keywords),
        scores=Scores.model_construct(emotion=emotion, info=info, persistence=persistence, judge=judge),
        info_importance=info_importance,
        time_coef=time_coef,
        importance=importance,
        confidence=confidence,
        source=source,
        source_ref=source_ref,
        created_at=dt(created_at),
        updated_at=dt(updated_at),
        valid_from=dt(valid_from),
        valid_until=dt(valid_until),
        last_active_at=dt(last_active_at),
        use_count=use_count,
        status=Status(status),
        deleted_at=dt(deleted_at),
        purge_at=dt(purge_at),
        delete_reason=DeleteReason(delete_reason) if delete_reason else None,
        supersedes=supersedes,
        expires_at=dt(expires_at),
        due_at=dt(due_at),
        remind_at=dt(remind_at),
        completed_at=dt(completed_at),
        content_hash=content_hash,
        embed_model=embed_model,
    )


def pending_from_row(row: Sequence[Any]) -> PendingItem:
    id_, user_id, candidate, confidence, status, cooldown_until, memory_id, created_at, updated_at = row
    return PendingItem(
        id=id_,
        user_id=user_id,
        candidate=candidate,
        confidence=confidence,
        status=PendingStatus(status),
        cooldown_until=dt(cooldown_until),
        memory_id=memory_id,
        created_at=dt(created_at),
        updated_at=dt(updated_at),
    )


def tombstone_from_row(r: Sequence[Any]) -> Tombstone:
    return Tombstone(
        tombstone_id=r[0],
        memory_id=r[1],
        user_id=r[2],
        deleted_at=dt(r[3]),
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
        ts(t.deleted_at),
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
        created_at=dt(r[7]),
    )


def revision_params(r: Revision) -> tuple[Any, ...]:
    return (r.id, r.memory_id, r.user_id, r.previous_content, r.new_content, r.mode, r.reason, ts(r.created_at))


def event_from_row(r: Sequence[Any]) -> Event:
    return Event(
        id=r[0],
        user_id=r[1],
        kind=EventKind(r[2]),
        memory_id=r[3],
        operation_id=r[4],
        payload=r[5],
        created_at=dt(r[6]),
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
