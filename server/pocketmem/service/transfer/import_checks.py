"""What `pocketmem import` accepts of each record: the rules add_memory applies, one record at a time.

    user ids        the POCKETMEM_USER pattern (letters, digits, _.@:-, at most 64): `../../etc/passwd` is refused;
                    nor a name pocketmem keeps in POCKETMEM_HOME (`memory.db`, `config.toml`, ...): a user's
                    folder would take its place
    ids             at most 64 characters, no control characters
    numbers         finite (no NaN or infinity); scores, importance and confidence in [0, 1]; counts whole
                    numbers in 0..1,000,000,000; any other number within SQLite's 64-bit integers
    nesting         payloads, candidates and profile fields at most 32 levels deep
    texts           content within POCKETMEM_MAX_CONTENT_CHARS; keywords at most 12 of 40 characters;
                    source / source_ref within 500
    times           ISO 8601 text only (a number is refused), within the years the time codec accepts, in UTC
    secrets         screened like add_memory: redacted in content, revisions, pending candidates, reasons,
                    profile text and event payloads; a keyword that carries one is dropped; a memory that is
                    nothing but a secret (or any secret with POCKETMEM_SECRETS=refuse) is refused
    pending         the candidate a write path makes: text `content`, a known `category`, a profile change's
                    `profile` sections; a memory's candidate is a request add_memory takes
    trash           a trashed memory names its delete_reason; a missing deleted_at is its updated_at, a missing
                    purge_at trash_days after that

`check_record` is pure apart from the settings it reads, so a batching import can call it per record.
A refused record is reported (line, type, id, field, why) and the rest of the file is imported.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from pocketmem.base.config import USER_ID_PATTERN, Settings
from pocketmem.base.errors import InvalidInput, InvalidReason, invalid_from
from pocketmem.base.models import (
    DeleteReason,
    Event,
    Memory,
    PendingItem,
    ProfileRevision,
    Revision,
    Status,
    Tombstone,
)
from pocketmem.core import instants, privacy
from pocketmem.core.text import clean_text, content_hash
from pocketmem.service.writing.add_request import MAX_KEYWORD_CHARS, MAX_KEYWORDS, MAX_SOURCE_CHARS, AddRequest

MAX_ID_CHARS = 64
MAX_COUNT = 1_000_000_000
MAX_DEPTH = 32
INT64 = 2**63 - 1
UNIT_FIELDS = ("info_importance", "time_coef", "importance", "confidence")
COUNT_FIELDS = ("use_count", "used_count", "used_mark", "recalled_mark")
ID_FIELDS = ("id", "memory_id", "tombstone_id", "supersedes")
_USER_ID = re.compile(USER_ID_PATTERN)
TIME_FIELD = re.compile(r"(_at|valid_from|valid_until|cooldown_until)$")


class Refused(BaseModel):
    line: int
    type: str
    id: str | None = None
    field: str
    why: str
    reason: InvalidReason | None = Field(None, description="the rule `why` states, when it is one InvalidInput names")
    facts: dict[str, Any] = Field(default_factory=dict, description="the values that rule names (InvalidReason)")

    @classmethod
    def of(cls, exc: InvalidInput, line: int, kind: str, row_id: str | None) -> Refused:
        """A record refused for `exc`, with the rule and its facts, so a page can say it in its own words."""
        return cls(line=line, type=kind, id=row_id, field=exc.field, why=exc.rule, reason=exc.reason, facts=exc.facts)


def shown_id(value: str | None) -> str | None:
    """A refused record's id as the report shows it: the id a file holds may be 10,000 characters or carry terminal
    escapes, and the report goes to a terminal."""
    if value is None:
        return None
    shown = "".join(c if c.isprintable() else "?" for c in value[:MAX_ID_CHARS])
    return shown + ("…" if len(value) > MAX_ID_CHARS else "")


def numeric_times(row: dict[str, Any]) -> str | None:
    """The first time field given as a number (before pydantic turns -1 into 1969), or None."""
    for key, value in row.items():
        if isinstance(value, bool | int | float) and TIME_FIELD.search(key):
            return key
    return None


def home_names(settings: Settings) -> set[str]:
    """The names pocketmem keeps in POCKETMEM_HOME besides the users' folders (lower case)."""
    db = settings.db_path.name
    return {name.lower() for name in ("config.toml", db, f"{db}-wal", f"{db}-shm", f"{db}-journal", f"{db}.lock")}


def check_user_id(user_id: Any, settings: Settings) -> None:
    if not isinstance(user_id, str) or not _USER_ID.match(user_id):
        raise InvalidInput("user_id", "must be 1-64 letters, digits or _.@:- (like POCKETMEM_USER)")
    if user_id.lower() in home_names(settings):
        raise InvalidInput("user_id", f"{user_id!r} is a name pocketmem keeps in POCKETMEM_HOME; choose another id")


def check_values(row: Any, field: str = "", depth: int = 0) -> None:
    """Numbers finite and within range, ids short, nesting shallow; in a record, its usage or any payload."""
    if depth > MAX_DEPTH:
        raise InvalidInput(field, f"is nested more than {MAX_DEPTH} levels deep")
    name = field.rsplit(".", 1)[-1]
    if isinstance(row, BaseModel):
        row = dict(row)
    if isinstance(row, dict):
        for key, value in row.items():
            check_values(value, f"{field}.{key}" if field else str(key), depth + 1)
    elif isinstance(row, list):
        for i, value in enumerate(row):
            check_values(value, f"{field}[{i}]", depth + 1)
    elif isinstance(row, bool):
        return
    elif isinstance(row, float) and not math.isfinite(row):
        raise InvalidInput(field, f"must be a finite number, not {row}")
    elif isinstance(row, int | float):
        _number(field, name, row)
    elif isinstance(row, str) and name in ID_FIELDS and depth == 1:
        if len(row) > MAX_ID_CHARS or any(not c.isprintable() for c in row):
            raise InvalidInput(field, f"must be at most {MAX_ID_CHARS} printable characters (is {len(row)})")


def _number(field: str, name: str, value: float) -> None:
    if field.startswith("scores.") or (name in UNIT_FIELDS and "." not in field):
        if not 0.0 <= value <= 1.0:
            raise InvalidInput(field, f"must be between 0 and 1, not {value}", InvalidReason.between, low=0, high=1)
    elif name in COUNT_FIELDS:
        if not 0 <= value <= MAX_COUNT:
            raise InvalidInput(field, f"must be a whole number from 0 to {MAX_COUNT:,}, not {value}")
    elif abs(value) > INT64:
        raise InvalidInput(field, f"is out of range ({value})")


def check_record(record: Any, settings: Settings) -> Any:
    """The record as it may be stored (secrets redacted), or InvalidInput naming the field and the rule."""
    check_user_id(record["user_id"] if isinstance(record, dict) else record.user_id, settings)
    check_values(record)
    if isinstance(record, Memory):
        return _memory(record, settings)
    if isinstance(record, Revision):
        _times(record)
        return record.model_copy(update={
            "previous_content": _screened(record.previous_content, "previous_content", settings),
            "new_content": _screened(record.new_content, "new_content", settings),
            "reason": _side(record.reason, "reason"),
        })
    if isinstance(record, PendingItem):
        _times(record)
        return record.model_copy(update={"candidate": _candidate(record, settings)})
    if isinstance(record, Event):
        _times(record)
        return record.model_copy(update={
            "payload": _payload(record.payload), "operation_id": _side(record.operation_id, "operation_id"),
        })
    if isinstance(record, Tombstone):
        _times(record)
        return record
    if isinstance(record, ProfileRevision):
        instants.accept("created_at", record.created_at, UTC)
        return record.model_copy(update={"previous": _payload(record.previous), "new": _payload(record.new)})
    if hasattr(record, "section"):  # a profile section: its fields screened like any profile text
        return record.model_copy(update={"fields": _payload(record.fields)})
    row = dict(record)  # a user row
    for key in ("created_at", "updated_at"):
        instants.accept(key, row[key], UTC)
    for key in ("display_name", "persona"):
        if isinstance(row.get(key), str):
            row[key] = privacy.scrub(row[key]).text
    return row


def _candidate(item: PendingItem, settings: Settings) -> dict[str, Any]:
    """A candidate as a write path makes it (PendingItem.candidate_fault), its content held to add_memory's rules.
    A memory's candidate is also a request add_memory takes, since confirming it makes one; its content_hash is
    computed again, as a memory's is."""
    if (fault := item.candidate_fault()) is not None:
        raise InvalidInput(*fault)
    candidate = dict(item.candidate)
    candidate["content"] = _memory_text(candidate["content"], "candidate.content", settings)
    if "profile" not in candidate:
        try:
            AddRequest.model_validate({k: v for k, v in candidate.items() if k != "content_hash"})
        except ValidationError as exc:
            raise invalid_from(exc, "candidate") from None
        candidate["content_hash"] = content_hash(candidate["content"])
    return dict(_payload(candidate))


def _trashed(memory: Memory, settings: Settings) -> dict[str, Any]:
    """A trashed memory's deleted_at, purge_at and delete_reason, which the trash listing and the purge need.
    A missing time is filled (deleted when last changed, purged trash_days later); a missing reason cannot be
    guessed and refuses the record."""
    if memory.status != Status.trashed:
        return {}
    if memory.delete_reason is None:
        raise InvalidInput(
            "delete_reason", f"a trashed memory needs the reason it was deleted (one of {', '.join(DeleteReason)})"
        )
    deleted_at = memory.deleted_at or memory.updated_at
    return {"deleted_at": deleted_at, "purge_at": memory.purge_at or deleted_at + timedelta(days=settings.trash_days)}


def _memory(memory: Memory, settings: Settings) -> Memory:
    _times(memory)
    trashed = _trashed(memory, settings)
    content = _memory_text(memory.content, "content", settings)
    if len(memory.keywords) > MAX_KEYWORDS:
        raise InvalidInput("keywords", f"at most {MAX_KEYWORDS} short terms, got {len(memory.keywords)}")
    keywords = [
        k for i, k in enumerate(memory.keywords)
        if not privacy.find_secrets(clean_text(k, f"keywords[{i}]", max_chars=MAX_KEYWORD_CHARS))
    ]
    update: dict[str, Any] = {
        "content": content,
        "keywords": keywords,
        "source": _side(memory.source, "source"),
        "source_ref": _side(memory.source_ref, "source_ref"),
        # Always the content's own: a line edited by hand keeps its old hash, which would make the content it
        # no longer holds a "duplicate" of it.
        "content_hash": content_hash(content),
        **trashed,
    }
    return memory.model_copy(update=update)


def _memory_text(text: str, field: str, settings: Settings) -> str:
    """Content as add_memory takes it: cleaned, within the limit, secrets redacted (refused if nothing is left)."""
    cleaned = clean_text(text, field, max_chars=settings.max_content_chars)
    screened = privacy.screen(cleaned)
    if not screened.findings:
        return cleaned
    if settings.secrets == "refuse" or not privacy.meaningful(screened.text):
        raise InvalidInput(
            field, f"contains {privacy.named(screened.kinds)}; secrets are never stored", InvalidReason.secret,
            kinds=screened.kinds,
        )
    return screened.text


def _screened(text: str, field: str, settings: Settings) -> str:
    cleaned = clean_text(text, field, max_chars=settings.max_content_chars, allow_empty=True)
    return privacy.scrub(cleaned).text


def _side(text: str | None, field: str) -> str | None:
    return privacy.kept_text(text, field, max_chars=MAX_SOURCE_CHARS) if text else text


def _payload(value: Any) -> Any:
    """Event payloads and pending candidates: every string in them screened."""
    if isinstance(value, str):
        return privacy.scrub(value).text
    if isinstance(value, dict):
        return {k: _payload(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_payload(v) for v in value]
    return value


def _times(record: BaseModel) -> None:
    for name, value in vars(record).items():  # the fields' values, without pydantic's iteration
        if isinstance(value, datetime):
            # A value exported without an offset is UTC (the export writes UTC).
            instants.accept(name, value, UTC)
