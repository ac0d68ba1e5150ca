"""Row <-> record conversions and column lists, written once for both backends.

Every mapper takes the backend's `Dialect` for what differs in the values (times, JSON); the records they
return are the same in both: aware UTC datetimes, lists, dicts and enums.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import ValidationError

from pocketmem.base.errors import UnreadableRow
from pocketmem.base.models import (
    Category,
    DeleteReason,
    Event,
    EventKind,
    Memory,
    PendingItem,
    PendingStatus,
    ProfileRevision,
    Revision,
    Scores,
    Status,
    Tombstone,
    Usage,
)
from pocketmem.core.scoring import CATEGORY_DEFAULTS
from pocketmem.core.scoring import info_importance as info_of
from pocketmem.store.sql.dialect import Dialect
from pocketmem.store.types import UndecodedText, stored_number

log = logging.getLogger(__name__)
T = TypeVar("T")

MEMORY_COLUMNS = (
    "id, user_id, content, category, keywords, emotion, info, persistence, judge, info_importance, time_coef, "
    "importance, confidence, source, source_ref, created_at, updated_at, valid_from, valid_until, last_active_at, "
    "use_count, status, deleted_at, purge_at, delete_reason, supersedes, expires_at, due_at, remind_at, "
    "completed_at, content_hash, embed_model"
)
PENDING_COLUMNS = "id, user_id, candidate, confidence, status, cooldown_until, memory_id, created_at, updated_at"
TOMBSTONE_COLUMNS = (
    "tombstone_id, memory_id, user_id, deleted_at, purge_at, reason, cloud_synced_at, payload_hash, restored_at, "
    "purged_at, content_hash"
)
REVISION_COLUMNS = "id, memory_id, user_id, previous_content, new_content, mode, reason, created_at"
EVENT_COLUMNS = "id, user_id, kind, memory_id, operation_id, payload, created_at"
USAGE_COLUMNS = "user_id, memory_id, used_count, last_used_at, used_mark, recalled_mark"
PROFILE_REVISION_COLUMNS = "id, user_id, section, previous, new, source, created_at"
USER_COLUMNS = "user_id, display_name, identity_confirmed, persona, created_at, updated_at"
PROFILE_COLUMNS = "user_id, section, fields"
PROFILE_FILE_COLUMNS = "user_id, name, earlier"


def column_names(columns: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in columns.split(","))


MEMORY_COLUMN_LIST = list(column_names(MEMORY_COLUMNS))
TOMBSTONE_WIDTH = len(column_names(TOMBSTONE_COLUMNS))
_NAMES = {columns: column_names(columns) for columns in (
    MEMORY_COLUMNS, PENDING_COLUMNS, TOMBSTONE_COLUMNS, REVISION_COLUMNS, EVENT_COLUMNS, USAGE_COLUMNS,
    PROFILE_REVISION_COLUMNS, USER_COLUMNS, PROFILE_COLUMNS, PROFILE_FILE_COLUMNS,
)}

# Columns holding instants, wherever they appear (converted by the dialect's time codec).
TIME_FIELDS = frozenset(
    "created_at updated_at valid_from valid_until last_active_at deleted_at purge_at expires_at due_at remind_at "
    "completed_at cooldown_until cloud_synced_at restored_at purged_at last_used_at".split()
)
# What update_memory may change; content, status and the index go through their own methods.
MEMORY_UPDATABLE = frozenset(
    "category keywords emotion info persistence judge info_importance time_coef importance confidence source "
    "source_ref updated_at valid_from valid_until last_active_at use_count supersedes expires_at due_at remind_at "
    "completed_at".split()
)
PENDING_UPDATABLE = frozenset({"status", "cooldown_until", "memory_id", "updated_at"})


def column_value(key: str, value: Any, d: Dialect) -> Any:
    """A field given to an update, as its column stores it."""
    if key in TIME_FIELDS:
        return d.ts(value)
    if key == "keywords":
        return d.to_json(value)
    if isinstance(value, Category | PendingStatus | Status):
        return value.value
    return value


def set_clause(fields: dict[str, Any], allowed: frozenset[str], d: Dialect) -> tuple[str, tuple[Any, ...]]:
    """`a = ?, b = ?` for the fields of an update, and their values as the columns store them."""
    unknown = set(fields) - allowed
    if unknown:
        raise ValueError(f"not updatable here: {sorted(unknown)}")
    values = tuple(column_value(key, value, d) for key, value in fields.items())
    return ", ".join(f"{key} = {d.placeholder}" for key in fields), values


def readable(
    rows: Iterable[Sequence[Any]], read: Callable[[Sequence[Any]], T], left: list[UnreadableRow]
) -> list[T]:
    """The rows `read` can decode. One it cannot is left out: appended to `left` (the transaction's `left_out`), with
    a warning once per row and reason in a process. One bad row never stops the user's other work; `pocketmem
    doctor` lists it and `--repair` mends it."""
    found: list[T] = []
    for row in rows:
        try:
            found.append(read(row))
        except UnreadableRow as exc:
            leave_out(exc, left)
    return found


def leave_out(exc: UnreadableRow, left: list[UnreadableRow]) -> None:
    left.append(exc)
    _warn(str(exc))


@lru_cache(maxsize=256)
def _warn(message: str) -> None:
    log.warning("left out: %s", message)


def unreadable(table: str, user_id: Any, row_id: Any, exc: ValueError) -> UnreadableRow:
    """UnreadableRow naming the row, with why in one line: pydantic's first complaint, as `field: message`."""
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        why = f"{'.'.join(str(part) for part in first['loc'])}: {first['msg']} (got {first.get('input')!r:.40})"
    else:
        why = str(exc)
    return UnreadableRow(table, str(user_id), str(row_id), why)


def undecoded(row: Sequence[Any], columns: str) -> dict[str, UndecodedText]:
    """The values of `row` (its `columns`) whose stored text is not UTF-8 (store/types.py), by column."""
    if UndecodedText not in map(type, row):
        return {}
    return {name: value for name, value in zip(_NAMES[columns], row, strict=True) if type(value) is UndecodedText}


def _decoded(row: Sequence[Any], columns: str) -> None:
    """ValueError naming the first column of `row` whose stored text is not UTF-8, and its bytes: a mapper reads no
    further, so the row is left out of its user's reads and listed by the doctor (every mapper checks this first)."""
    if bad := undecoded(row, columns):
        name, value = next(iter(bad.items()))
        raise ValueError(f"{name}: not UTF-8 text (stored as {value.stored()[:50]})")


def memory_from_row(row: Sequence[Any], d: Dialect) -> Memory:
    try:
        _decoded(row, MEMORY_COLUMNS)
        return _decode_memory(row, d)
    except ValueError as exc:  # UnreadableInstant, or a value of the wrong kind: name the row, not just the value
        raise UnreadableRow("memories", str(row[1]), str(row[0]), str(exc)) from None


def _category(value: Any) -> Category:
    try:
        return Category(value)
    except ValueError:
        raise ValueError(f"category: {str(value)[:40]!r} is not a category") from None


def json_column(column: str, value: Any, d: Dialect, kind: type[Any], items: type | None = None) -> Any:
    """A JSON column's value, or ValueError naming the column when it is not JSON of that kind (a list of `items`)."""
    try:
        decoded: Any = d.from_json(value)
    except ValueError as exc:
        raise ValueError(f"{column}: not JSON ({exc})") from None
    if not isinstance(decoded, kind) or (items is not None and not all(isinstance(i, items) for i in decoded)):
        wanted = "an object" if kind is dict else f"a list of {'texts' if items is str else 'values'}"
        shown = value if isinstance(value, str) else d.to_json(value)  # PostgreSQL hands JSON over decoded
        raise ValueError(f"{column}: {shown[:40]!r} is not {wanted}")
    return decoded


# What `doctor --repair` writes in place of a memory column it cannot read; the text is touched only where it is
# not UTF-8 (MENDED_TEXT: the bytes that do not decode become U+FFFD, the bytes as stored are kept in an event).
MENDED_CATEGORY = Category.fact  # the category add_memory gives when none is named
SCORE_COLUMNS = ("emotion", "info", "persistence", "judge")
MENDED_TEXT = ("content", "source", "source_ref")


def mend_memory(row: Sequence[Any], d: Dialect) -> dict[str, Any]:
    """The columns of a memory row to rewrite so that it reads again, for `update_memory` (and `replace_content` when
    the content is among them, with the keywords it writes beside it): content, source or source_ref that are not
    UTF-8 (the bytes that do not decode as U+FFFD), keywords that are not a JSON list of words (the words in it
    kept, else none; those that were not UTF-8 dropped), an unknown category (MENDED_CATEGORY), a score that is not
    a number (the category's default), a derived number that is not one (info_importance computed from the scores,
    time_coef 1 until maintenance rescores it, importance their product), confidence 1, use_count 0. Empty when
    what is wrong is none of these (a status or delete reason no version writes)."""
    values = dict(zip(MEMORY_COLUMN_LIST, row, strict=True))
    bad = undecoded(row, MEMORY_COLUMNS)
    fixes: dict[str, Any] = {name: str(bad[name]) for name in MENDED_TEXT if name in bad}
    keywords = _mended_keywords(values["keywords"], d)
    if keywords is not None or "content" in fixes:
        fixes["keywords"] = keywords if keywords is not None else d.from_json(values["keywords"])
    try:
        category = _category(values["category"])
    except ValueError:
        category = fixes["category"] = MENDED_CATEGORY
    for name in SCORE_COLUMNS:
        if not _is_number(values[name]):
            fixes[name] = values[name] = getattr(CATEGORY_DEFAULTS[category], name)
    info = info_of(Scores.model_construct(**{name: values[name] for name in SCORE_COLUMNS}))
    for name, value in (("info_importance", info), ("time_coef", 1.0), ("confidence", 1.0), ("use_count", 0)):
        if not _is_number(values[name]):
            fixes[name] = values[name] = value
    if not _is_number(values["importance"]):
        fixes["importance"] = values["info_importance"] * values["time_coef"]
    return fixes


def _mended_keywords(value: Any, d: Dialect) -> list[str] | None:
    """Keywords to write in place of a stored value that is not a JSON list of words: the words in it, those that
    were not UTF-8 left out; None when the value reads."""
    try:
        if type(value) is not UndecodedText:
            json_column("keywords", value, d, list, str)
            return None
    except ValueError:
        pass
    try:
        words = d.from_json(value)
    except ValueError:
        return []
    return [w for w in words if isinstance(w, str) and "\ufffd" not in w] if isinstance(words, list) else []


def _is_number(value: Any) -> bool:
    try:
        stored_number("", value)
    except ValueError:
        return False
    return True


def _decode_memory(row: Sequence[Any], d: Dialect) -> Memory:
    (
        id_, user_id, content, category, keywords, emotion, info, persistence, judge, info_importance, time_coef,
        importance, confidence, source, source_ref, created_at, updated_at, valid_from, valid_until, last_active_at,
        use_count, status, deleted_at, purge_at, delete_reason, supersedes, expires_at, due_at, remind_at,
        completed_at, content_hash, embed_model,
    ) = row  # fmt: skip
    # model_construct: rows come from our own schema, and recall builds dozens of these per call.
    at, dt, n = d.from_column, d.dt, stored_number
    return Memory.model_construct(
        id=id_,
        user_id=user_id,
        content=content,
        category=_category(category),
        keywords=json_column("keywords", keywords, d, list, str),
        scores=Scores.model_construct(
            emotion=n("emotion", emotion), info=n("info", info), persistence=n("persistence", persistence),
            judge=n("judge", judge),
        ),
        info_importance=n("info_importance", info_importance),
        time_coef=n("time_coef", time_coef),
        importance=n("importance", importance),
        confidence=n("confidence", confidence),
        source=source,
        source_ref=source_ref,
        created_at=at(created_at),
        updated_at=at(updated_at),
        valid_from=at(valid_from),
        valid_until=dt(valid_until),
        last_active_at=dt(last_active_at),
        use_count=n("use_count", use_count),
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


def memory_params(m: Memory, d: Dialect) -> tuple[Any, ...]:
    """The values of MEMORY_COLUMNS for a memory, in order."""
    return (
        m.id,
        m.user_id,
        m.content,
        m.category.value,
        d.to_json(m.keywords),
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
        d.ts(m.created_at),
        d.ts(m.updated_at),
        d.ts(m.valid_from),
        d.ts(m.valid_until),
        d.ts(m.last_active_at),
        m.use_count,
        m.status.value,
        d.ts(m.deleted_at),
        d.ts(m.purge_at),
        m.delete_reason.value if m.delete_reason else None,
        m.supersedes,
        d.ts(m.expires_at),
        d.ts(m.due_at),
        d.ts(m.remind_at),
        d.ts(m.completed_at),
        m.content_hash,
        m.embed_model,
    )


def pending_from_row(row: Sequence[Any], d: Dialect) -> PendingItem:
    """A pending row, or UnreadableRow naming it when a value, or its candidate, is not what a write path makes."""
    id_, user_id, candidate, confidence, status, cooldown_until, memory_id, created_at, updated_at = row
    try:
        _decoded(row, PENDING_COLUMNS)
        item = PendingItem(
            id=id_,
            user_id=user_id,
            candidate=d.from_json(candidate),
            confidence=confidence,
            status=PendingStatus(status),
            cooldown_until=d.dt(cooldown_until),
            memory_id=memory_id,
            created_at=d.from_column(created_at),
            updated_at=d.from_column(updated_at),
        )
    except ValueError as exc:  # pydantic's ValidationError, a bad status or time, JSON that is not JSON
        raise unreadable("memory_pending", user_id, id_, exc) from None
    if (fault := item.candidate_fault()) is not None:
        raise UnreadableRow("memory_pending", item.user_id, item.id, " ".join(fault))
    return item


def profile_from_row(row: Sequence[Any], d: Dialect) -> tuple[str, dict[str, Any]]:
    """(section, fields) of a profiles row (user_id, section, fields), or UnreadableRow naming it."""
    user_id, section, fields = row
    try:
        _decoded(row, PROFILE_COLUMNS)
        return section, json_column("fields", fields, d, dict)
    except ValueError as exc:
        raise UnreadableRow("profiles", str(user_id), str(section), str(exc)) from None


def earlier_from_row(row: Sequence[Any], d: Dialect) -> list[str]:
    """The earlier texts of a profile_files row (user_id, name, earlier), or UnreadableRow naming it."""
    user_id, name, earlier = row
    try:
        _decoded(row, PROFILE_FILE_COLUMNS)
        return list(json_column("earlier", earlier, d, list, str))
    except ValueError as exc:
        raise UnreadableRow("profile_files", str(user_id), str(name), str(exc)) from None


def pending_params(item: PendingItem, d: Dialect) -> tuple[Any, ...]:
    """The values of PENDING_COLUMNS with content_hash after the candidate (see insert_pending)."""
    return (
        item.id,
        item.user_id,
        d.to_json(item.candidate),
        item.candidate.get("content_hash", ""),
        item.confidence,
        item.status.value,
        d.ts(item.cooldown_until),
        item.memory_id,
        d.ts(item.created_at),
        d.ts(item.updated_at),
    )


def user_from_row(row: Sequence[Any], d: Dialect) -> dict[str, Any]:
    """A users row; its times as ISO 8601 text, as export writes them. UnreadableRow naming it for a time that
    cannot be read (the doctor's times check rewrites it)."""
    try:
        _decoded(row, USER_COLUMNS)
        return {
            "user_id": row[0],
            "display_name": row[1],
            "identity_confirmed": bool(row[2]),
            "persona": row[3],
            "created_at": d.iso(row[4]),
            "updated_at": d.iso(row[5]),
        }
    except ValueError as exc:
        raise unreadable("users", row[0], row[0], exc) from None


def mend_user(row: Sequence[Any]) -> dict[str, Any]:
    """The columns of a users row to rewrite so that it reads again: a name or persona that is not UTF-8 text (the
    bytes that do not decode as U+FFFD). A time it cannot read is the times check's, which runs first."""
    return {name: str(value) for name, value in undecoded(row, USER_COLUMNS).items() if name != "user_id"}


def tombstone_from_row(r: Sequence[Any], d: Dialect) -> Tombstone:
    """A tombstone, or UnreadableRow naming it (a reason or time this release cannot read)."""
    try:
        _decoded(r, TOMBSTONE_COLUMNS)
        return Tombstone(
            tombstone_id=r[0],
            memory_id=r[1],
            user_id=r[2],
            deleted_at=d.from_column(r[3]),
            purge_at=d.dt(r[4]),
            reason=DeleteReason(r[5]),
            cloud_synced_at=d.dt(r[6]),
            payload_hash=r[7],
            restored_at=d.dt(r[8]),
            purged_at=d.dt(r[9]),
            content_hash=r[10],
        )
    except ValueError as exc:
        raise unreadable("memory_tombstones", r[2], r[0], exc) from None


# What `doctor --repair` writes in place of a tombstone's reason it cannot read: the reason of a person's forget.
MENDED_REASON = DeleteReason.user_delete


def mend_tombstone(r: Sequence[Any]) -> dict[str, Any]:
    """The columns of a tombstone row to rewrite so that it reads again (its reason, MENDED_REASON): a tombstone
    keeps a purged memory from coming back, so it is mended, never set aside. Empty when the reason reads."""
    return {} if r[5] in {reason.value for reason in DeleteReason} else {"reason": MENDED_REASON.value}


def tombstone_params(t: Tombstone, d: Dialect) -> tuple[Any, ...]:
    return (
        t.tombstone_id,
        t.memory_id,
        t.user_id,
        d.ts(t.deleted_at),
        d.ts(t.purge_at),
        t.reason.value,
        d.ts(t.cloud_synced_at),
        t.payload_hash,
        d.ts(t.restored_at),
        d.ts(t.purged_at),
        t.content_hash,
    )


def revision_from_row(r: Sequence[Any], d: Dialect) -> Revision:
    """A content revision, or UnreadableRow naming it."""
    try:
        _decoded(r, REVISION_COLUMNS)
        return Revision(
            id=r[0],
            memory_id=r[1],
            user_id=r[2],
            previous_content=r[3],
            new_content=r[4],
            mode=r[5],
            reason=r[6],
            created_at=d.from_column(r[7]),
        )
    except ValueError as exc:  # pydantic's ValidationError (a value of another kind), a bad time
        raise unreadable("memory_revisions", r[2], r[0], exc) from None


def profile_revision_from_row(r: Sequence[Any], d: Dialect) -> ProfileRevision:
    """A change of a profile section (PROFILE_REVISION_COLUMNS), or UnreadableRow naming it."""
    try:
        _decoded(r, PROFILE_REVISION_COLUMNS)
        return ProfileRevision(
            id=r[0], user_id=r[1], section=r[2], previous=json_column("previous", r[3], d, dict),
            new=json_column("new", r[4], d, dict), source=r[5], created_at=d.from_column(r[6]),
        )
    except ValueError as exc:
        raise unreadable("profile_revisions", r[1], r[0], exc) from None


def revision_params(r: Revision, d: Dialect) -> tuple[Any, ...]:
    return (r.id, r.memory_id, r.user_id, r.previous_content, r.new_content, r.mode, r.reason, d.ts(r.created_at))


def event_from_row(r: Sequence[Any], d: Dialect) -> Event:
    try:
        _decoded(r, EVENT_COLUMNS)
        return Event(
            id=r[0],
            user_id=r[1],
            kind=EventKind(r[2]),
            memory_id=r[3],
            operation_id=r[4],
            payload=d.from_json(r[5]),
            created_at=d.from_column(r[6]),
        )
    except ValueError as exc:  # a kind no version wrote, a bad time or payload: name the row
        raise unreadable("memory_events", r[1], r[0], exc) from None


def usage_from_row(r: Sequence[Any], d: Dialect) -> Usage:
    """A memory's use counters (USAGE_COLUMNS), or UnreadableRow naming the row by its memory's id."""
    try:
        _decoded(r, USAGE_COLUMNS)
        return Usage(
            user_id=r[0],
            memory_id=r[1],
            used_count=r[2],
            last_used_at=d.dt(r[3]),
            used_mark=r[4],
            recalled_mark=r[5],
        )
    except ValueError as exc:
        raise unreadable("memory_usage", r[0], r[1], exc) from None
