"""Export and import: JSON Lines that round-trip a store, and the Markdown user card.

File format (one JSON object per line, each with a `type`):

    {"type": "header", "format": "pocketmem-export", "version": 1, "exported_at": ..., "embedder": ..., ...}
    {"type": "user", "user_id": ..., "display_name": ..., "identity_confirmed": ..., "persona": ..., ...}
    {"type": "memory", <every memories column: id, user_id, content, category, keywords, scores, status,
                        created_at, valid_from, valid_until, deleted_at, purge_at, due_at, completed_at, ...>,
                       "usage": {used_count, last_used_at, used_mark, recalled_mark} | null}
    {"type": "tombstone", ...}   {"type": "revision", ...}   {"type": "pending", ...}
    {"type": "event", ...}       (only with --events)
    {"type": "profile", "user_id", "section", "fields", "updated_at"}     persona, identity (service/profile/profile.py)
    {"type": "profile_revision", ...}

Memories of every status are exported (active, superseded, trashed); purged ones are gone and only
their tombstones remain (a forget's keeps the memory's content hash, never its text, so what the user forgot
stays forgotten where the file is imported; a file written before the hash has none, and imports as before).
Vectors are not exported: each imported memory is embedded again with the configured embedder, so a file moves
between embedders. Idempotency records of add_memory (operation_id) are
not exported.

Import is idempotent by ids: a row whose id is already in the store is skipped, so importing the same
file twice adds nothing, and a memory with a purged tombstone is never brought back. Events have no
global id: an event is skipped when the store already holds as many identical ones (same user, kind,
memory, operation, payload and time) as the file has up to it. Everything is checked before anything
is written. Users are written first, then memories in transactions of IMPORT_BATCH rows, then the other
rows in one transaction; an import stopped half way is completed by running it again (rows already there
are skipped). Memories are written without their vectors: the embed queue (embed_queue.py) computes them
once the rows are acknowledged, and until then keyword search finds them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TextIO

from pydantic import BaseModel, Field, ValidationError

from pocketmem import __version__
from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import InvalidInput, InvalidReason, UnreadableRow, invalid_from
from pocketmem.base.models import (
    Event,
    EventKind,
    Memory,
    PendingItem,
    ProfileRevision,
    Revision,
    Status,
    Tombstone,
    Usage,
)
from pocketmem.base.progress import Progress, no_progress
from pocketmem.providers.embeddings import Embedder
from pocketmem.service.shared.rows import indexed_text
from pocketmem.service.transfer.import_checks import (
    MAX_DEPTH,
    Refused,
    check_record,
    check_values,
    numeric_times,
    shown_id,
)
from pocketmem.service.writing.trash import Trash
from pocketmem.service.writing.vectors import Vectors
from pocketmem.store.base import VectorStore
from pocketmem.store.types import IndexedText

log = logging.getLogger(__name__)
FORMAT = "pocketmem-export"
VERSION = 1
ROW_TYPES = ("user", "memory", "tombstone", "revision", "pending", "event", "profile", "profile_revision")
SCAN_BATCH = 500
EVENT_BATCH = 1000
IMPORT_BATCH = 1000  # memories per transaction of an import


class TypeCounts(BaseModel):
    user: int = 0
    memory: int = 0
    tombstone: int = 0
    revision: int = 0
    pending: int = 0
    event: int = 0
    profile: int = 0
    profile_revision: int = 0

    def add(self, kind: str, n: int = 1) -> None:
        setattr(self, kind, getattr(self, kind) + n)

    @property
    def total(self) -> int:
        return sum(self.model_dump().values())


class ImportReport(BaseModel):
    imported: TypeCounts = Field(default_factory=TypeCounts)
    skipped: TypeCounts = Field(default_factory=TypeCounts, description="already in the store (same id)")
    evicted: list[str] = Field(default_factory=list, description="moved to the trash to respect the cap")
    refused: list[Refused] = Field(
        default_factory=list, description="records that break add_memory's rules (line, type, id, field, why)"
    )


def _line(kind: str, body: dict[str, Any]) -> str:
    return json.dumps({"type": kind, **body}, ensure_ascii=False, sort_keys=False)


class Exporter:
    def __init__(
        self, settings: Settings, store: VectorStore, embedder: Embedder, clock: Clock, trash: Trash, vectors: Vectors
    ) -> None:
        self.vectors = vectors  # imported rows wait for their vectors in the embed queue
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.clock = clock
        self.trash = trash

    # -- export ---------------------------------------------------------------------------------
    async def export(
        self,
        out: TextIO,
        users: Sequence[str] | None = None,
        events: bool = False,
        skipped: list[dict[str, str]] | None = None,
        progress: Progress = no_progress,
    ) -> TypeCounts:
        """Write the JSONL export of `users` (default: every user) to `out`.

        A user with a row that cannot be read is left out whole (never half-written) and named in `skipped`
        (table, user_id, id, why); every other user is exported.
        """
        counts = TypeCounts()
        async with self.store.read() as reader:
            user_ids = list(users) if users is not None else await reader.user_ids()
            header = {
                "format": FORMAT,
                "version": VERSION,
                "exported_at": self.clock.now().isoformat(),
                "pocketmem": __version__,
                "embedder": self.embedder.tag,
                "users": user_ids,
                "events": events,
            }
            out.write(_line("header", header) + "\n")
            for done, user_id in enumerate(user_ids, 1):
                try:
                    rows = await self._user_rows(reader, user_id, events)
                except UnreadableRow as exc:
                    log.warning("export: user %s left out: %s", user_id, exc)
                    if skipped is not None:
                        skipped.append(exc.as_report())
                    progress(done, len(user_ids))
                    continue
                for kind, body in rows:
                    out.write(_line(kind, body) + "\n")
                    counts.add(kind)
                progress(done, len(user_ids))
        return counts

    async def _user_rows(self, reader: Any, user_id: str, events: bool) -> list[tuple[str, dict[str, Any]]]:
        rows: list[tuple[str, dict[str, Any]]] = []
        user = await reader.get_user(user_id)
        if user is not None:
            rows.append(("user", user))
        for section, fields in (await reader.get_profile(user_id, strict=True)).items():
            rows.append(("profile", {"user_id": user_id, "section": section, "fields": fields}))
        rows += [
            ("profile_revision", r.model_dump(mode="json"))
            for r in await reader.list_profile_revisions(user_id, 10_000)
        ]
        usages = await reader.usage(user_id)
        after: str | None = None
        while True:
            batch = await reader.scan_memories(
                user_id, (Status.active, Status.superseded, Status.trashed), after, SCAN_BATCH
            )
            for memory in batch:
                body = memory.model_dump(mode="json")
                usage = usages.get(memory.id)
                body["usage"] = (
                    usage.model_dump(mode="json", exclude={"user_id", "memory_id"}) if usage else None
                )
                rows.append(("memory", body))
            if len(batch) < SCAN_BATCH:
                break
            after = batch[-1].id
        rows += [("tombstone", t.model_dump(mode="json")) for t in await reader.all_tombstones(user_id)]
        rows += [("revision", r.model_dump(mode="json")) for r in await reader.all_revisions(user_id)]
        rows += [("pending", p.model_dump(mode="json")) for p in await reader.all_pending(user_id)]
        if events:
            last = 0
            while batch_events := await reader.events_after(user_id, last, EVENT_BATCH):
                rows += [("event", e.model_dump(mode="json")) for e in batch_events]
                last = batch_events[-1].id
        return rows

    # -- import ---------------------------------------------------------------------------------
    async def import_lines(
        self, lines: Iterable[str], progress: Progress = no_progress, *, only_user: str | None = None
    ) -> ImportReport:
        """Import an export file. With `only_user`, a file holding another user's rows is refused whole."""
        report = ImportReport()
        records = parse(lines, self.settings, report.refused)
        if only_user is not None:
            others = sorted({owner for r in records if (owner := _user_of(r)) != only_user})
            if others:
                raise InvalidInput(
                    "file", f"holds rows of user {others[0]!r}; only rows of {only_user!r} can be imported here",
                    InvalidReason.other_user, found=others[0], expected=only_user,
                )
        memories = [r for r in records if isinstance(r, _MemoryRow)]
        others = [r for r in records if not isinstance(r, _MemoryRow)]
        async with self.store.read() as reader:
            owners = await _owners(reader, memories)
            purged = {
                t.memory_id
                for user_id in {m.memory.user_id for m in memories}
                for t in await reader.all_tombstones(user_id)
                if t.purged_at is not None
            }
        foreign = [m for m in memories if owners.get(m.memory.id, m.memory.user_id) != m.memory.user_id]
        report.refused += [_foreign(m) for m in foreign]
        fresh = [m for m in memories if m.memory.id not in owners and m.memory.id not in purged]
        report.skipped.add("memory", len(memories) - len(fresh) - len(foreign))
        now = self.clock.now()
        touched: dict[str, TypeCounts] = {}
        order = {kind: i for i, kind in enumerate(ROW_TYPES)}
        others.sort(key=lambda r: order[_kind(r)])  # users first, so their rows are kept as exported
        users = [r for r in others if _kind(r) == "user"]
        async with self.store.write() as tx:
            await tx.lock_users([*map(_user_of, users), *(m.memory.user_id for m in fresh)])
            for record in users:
                self._count(report, touched, *await self._insert(tx, record, now, 0))
            for user_id in dict.fromkeys(m.memory.user_id for m in fresh):
                await tx.ensure_user(user_id, now)
        await self._import_memories(fresh, report, touched, progress)
        copies: dict[str, int] = {}  # identical events (same instant, same everything) may legitimately repeat
        async with self.store.write() as tx:
            await tx.lock_users([*map(_user_of, others[len(users) :]), *touched])
            for record in others[len(users) :]:
                nth = 0
                if isinstance(record, Event):
                    key = record.model_dump_json(exclude={"id"})
                    nth = copies[key] = copies.get(key, -1) + 1
                self._count(report, touched, *await self._insert(tx, record, now, nth))
            for user_id, counts in touched.items():
                await tx.add_event(user_id, EventKind.imported, now, payload=counts.model_dump())
                report.evicted += [e.id for e in await self.trash.enforce_cap(tx, user_id, now, keep=[])]
        return report

    async def _import_memories(
        self,
        rows: Sequence[_MemoryRow],
        report: ImportReport,
        touched: dict[str, TypeCounts],
        progress: Progress = no_progress,
    ) -> None:
        """One transaction per IMPORT_BATCH memories, without vectors: the embed queue computes them after the
        rows are acknowledged (embed_queue.py), and keyword search finds the memories meanwhile. Each batch's
        keyword terms are computed in a worker thread while the one before is written."""
        batches = [rows[start : start + IMPORT_BATCH] for start in range(0, len(rows), IMPORT_BATCH)]
        if not batches:
            return
        prepared = asyncio.ensure_future(asyncio.to_thread(self._prepare, batches[0]))
        try:
            for number, batch in enumerate(batches):
                ready = await prepared
                if number + 1 < len(batches):
                    prepared = asyncio.ensure_future(asyncio.to_thread(self._prepare, batches[number + 1]))
                async with self.store.write() as tx:
                    await tx.lock_users(row.memory.user_id for row in batch)
                    inserted = await tx.import_memories(ready)
                    for row, done in zip(batch, inserted, strict=True):
                        if done and row.usage is not None:
                            await tx.put_usage(row.usage)
                for row, done in zip(batch, inserted, strict=True):
                    self._count(report, touched, "memory", row.memory.user_id, done)
                progress(min((number + 1) * IMPORT_BATCH, len(rows)), len(rows))
        finally:
            if not prepared.done():
                prepared.cancel()
        self.vectors.deferred()

    def _prepare(self, batch: Sequence[_MemoryRow]) -> list[tuple[Memory, None, IndexedText]]:
        return [
            (
                m.memory.model_copy(update={"embed_model": self.embedder.tag}),
                None,
                indexed_text(m.memory.content, m.memory.keywords),
            )
            for m in batch
        ]

    @staticmethod
    def _count(report: ImportReport, touched: dict[str, TypeCounts], kind: str, user_id: str, inserted: bool) -> None:
        (report.imported if inserted else report.skipped).add(kind)
        if inserted:
            touched.setdefault(user_id, TypeCounts()).add(kind)

    async def _insert(self, tx: Any, record: Any, now: datetime, nth: int) -> tuple[str, str, bool]:
        if isinstance(record, Tombstone):
            return "tombstone", record.user_id, await tx.import_tombstone(record)
        if isinstance(record, Revision):
            return "revision", record.user_id, await tx.import_revision(record)
        if isinstance(record, PendingItem):
            return "pending", record.user_id, await tx.import_pending(record)
        if isinstance(record, Event):
            return "event", record.user_id, await tx.import_event(record, nth)
        if isinstance(record, _ProfileRow):
            # A section the store already has is newer or the same: kept.
            if record.section in await tx.get_profile(record.user_id):
                return "profile", record.user_id, False
            await tx.ensure_user(record.user_id, now)
            await tx.put_profile(record.user_id, record.section, record.fields, now)
            return "profile", record.user_id, True
        if isinstance(record, ProfileRevision):
            return "profile_revision", record.user_id, await tx.import_profile_revision(record)
        return "user", record["user_id"], await tx.import_user(record)


def _user_of(record: Any) -> str:
    """The user any imported row belongs to (records, models or plain mappings)."""
    if isinstance(record, _MemoryRow):
        return record.memory.user_id
    return str(record["user_id"] if isinstance(record, Mapping) else record.user_id)


async def _owners(reader: Any, rows: Sequence[_MemoryRow]) -> dict[str, str]:
    """id -> owner of these memories' ids the store already holds, whoever's (one query per chunk of ids)."""
    ids = [row.memory.id for row in rows]
    owners: dict[str, str] = {}
    for start in range(0, len(ids), SCAN_BATCH):
        owners.update(await reader.memory_owners(ids[start : start + SCAN_BATCH]))
    return owners


def _foreign(row: _MemoryRow) -> Refused:
    """A memory whose id another user's memory holds (a file re-targeted to a new user id): never merged into
    that memory, nor "already in the store". The other user is not named (the web page imports too)."""
    return Refused(
        line=row.line, type="memory", id=row.memory.id, field="id",
        why=f"is the id of another user's memory in this store, so it cannot be imported for {row.memory.user_id!r}: "
        "ids are unique across users. To copy memories to another user, give each a new id (32 hex digits) in the "
        "file and import it again",
        reason=InvalidReason.foreign_id, facts={"user": row.memory.user_id},
    )


def _kind(record: Any) -> str:
    for cls, kind in (
        (_MemoryRow, "memory"),
        (Tombstone, "tombstone"),
        (Revision, "revision"),
        (PendingItem, "pending"),
        (Event, "event"),
        (_ProfileRow, "profile"),
        (ProfileRevision, "profile_revision"),
    ):
        if isinstance(record, cls):
            return kind
    return "user"


class _MemoryRow:
    def __init__(self, memory: Memory, usage: Usage | None, line: int) -> None:
        self.memory = memory
        self.usage = usage
        self.line = line  # in the file, for the report


class _ProfileRow(BaseModel):
    user_id: str
    section: str
    fields: dict[str, Any]


class _UserRow(BaseModel):
    user_id: str
    display_name: str | None = None
    identity_confirmed: bool = False
    persona: str | None = None
    created_at: datetime
    updated_at: datetime


def parse(
    lines: Iterable[str], settings: Settings | None = None, refused: list[Refused] | None = None
) -> list[Any]:
    """Check every line before anything is written; errors name the line.

    A malformed file (not JSON, no header, a record that does not fit the format) is refused whole. With
    `settings`, each well-formed record is also held to add_memory's rules (import_checks.check_record);
    one that breaks them is left out and appended to `refused`, and the others are imported.
    """
    records: list[Any] = []
    header_seen = False
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            row = _json_line(raw, number)
        except _Unreadable as exc:  # one record the file cannot give: refused, the others go on
            if not header_seen:
                raise InvalidInput("", exc.why, line=number) from None
            if refused is not None:
                refused.append(Refused(line=number, type="unknown", field="line", why=exc.why))
            continue
        if not isinstance(row, dict) or "type" not in row:
            raise InvalidInput("", "each line must be a JSON object with a 'type'", line=number)
        kind = row.pop("type")
        if not header_seen:
            _header(kind, row, number)
            header_seen = True
            continue
        row_id = next((str(row[k]) for k in ("id", "tombstone_id", "user_id") if row.get(k) is not None), None)
        try:
            if settings is not None and (field := numeric_times(row)) is not None:
                raise InvalidInput(field, "must be an ISO 8601 date or time, not a number", InvalidReason.date)
            record = _record(kind, row, number)
            records.append(record if settings is None else _nested_checked(record, settings, kind))
        except InvalidInput as exc:  # this record is left out (and reported); the others go on
            if refused is not None:
                refused.append(Refused.of(exc, number, kind, shown_id(row_id)))
        except ValidationError as exc:
            raise invalid_from(exc, kind, line=number) from None
    if not header_seen:
        raise InvalidInput("file", f"empty; expected a {FORMAT} export")
    return records


def _header(kind: str, row: dict[str, Any], line: int) -> None:
    """The first line: the format's header, of a version this pocketmem reads."""
    if kind != "header" or row.get("format") != FORMAT:
        raise InvalidInput("", f"the first line must be the {FORMAT} header; is this a pocketmem export?", line=line)
    version = row.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InvalidInput("version", f"must be a whole number (the format version), not {version!r}", line=line)
    if version > VERSION:
        raise InvalidInput("", f"export format version {version} is newer than {VERSION}; upgrade pocketmem", line=line)


class _Unreadable(Exception):
    def __init__(self, why: str) -> None:
        self.why = why


def _json_line(raw: str, line: int) -> Any:
    """One line as JSON. Bytes that are not UTF-8 (kept as surrogates by import_file.file_lines) and nesting deeper
    than the parser goes make the line unreadable; anything else that is not JSON makes the file malformed."""
    if _UNDECODED.search(raw):
        raise _Unreadable("is not valid UTF-8 text; save the file as UTF-8")
    try:
        return json.loads(raw)
    except RecursionError:
        raise _Unreadable(f"is nested too deeply to read (more than {MAX_DEPTH} levels are refused)") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput("", f"not JSON ({exc.msg})", line=line) from None


_UNDECODED = re.compile("[\udc80-\udcff]")


def _nested_checked(record: Any, settings: Settings, kind: str) -> Any:
    try:
        return _checked(record, settings)
    except RecursionError:  # deeper than Python's recursion allows, inside an otherwise readable record
        raise InvalidInput(kind, f"is nested more than {MAX_DEPTH} levels deep") from None


def _checked(record: Any, settings: Settings) -> Any:
    if isinstance(record, _MemoryRow):
        if record.usage is not None:
            check_values(record.usage, "usage")
        return _MemoryRow(check_record(record.memory, settings), record.usage, record.line)
    return check_record(record, settings)


def _record(kind: str, row: dict[str, Any], line: int) -> Any:
    if kind == "memory":
        usage = row.pop("usage", None)
        if usage is not None and not isinstance(usage, dict):
            raise InvalidInput("usage", "must be null or an object (used_count, last_used_at, used_mark, ...)")
        memory = Memory.model_validate(row)
        usage_row = (
            Usage.model_validate({**usage, "user_id": memory.user_id, "memory_id": memory.id})
            if usage
            else None
        )
        return _MemoryRow(memory, usage_row, line)
    if kind == "tombstone":
        return Tombstone.model_validate(row)
    if kind == "revision":
        return Revision.model_validate(row)
    if kind == "pending":
        return PendingItem.model_validate(row)
    if kind == "event":
        return Event.model_validate(row)
    if kind == "user":
        return _UserRow.model_validate(row).model_dump()
    if kind == "profile":
        return _ProfileRow.model_validate(row)
    if kind == "profile_revision":
        return ProfileRevision.model_validate(row)
    raise InvalidInput("", f"unknown type {kind!r}; expected one of {', '.join(ROW_TYPES)}", line=line)
