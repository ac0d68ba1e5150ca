"""Sync between the local SQLite notebook and the PostgreSQL cloud library (docs/postgres-and-sync.md, "Sync").

One run, for every user of the notebook (rules in sync_rules.py):

    1. push     tombstones changed here since the last complete push, then memories (scope `memory`);
                each page is one library transaction, so a cut connection loses nothing: the page is
                sent again next time and lands as a no-op where it already arrived
    2. trash    with scope `memory.trash`: the trash goes up with its tombstones and, once the library
                has committed it, is cleared here; the tombstones stay, with cloud_synced_at set
    3. pull     tombstones and memories changed in the library since the last complete pull, applied
                here quietly (they are not sent back); the cap then evicts as after any write

A core memory patched on two devices meets its other version where one lands on the other (core_merge.py):
appends on both sides are joined into a new version that travels on; a replace lets the later version win.
Either is listed in the user's `conflicts`.

Positions are opaque change markers of each store (store/base.py), taken when a pass starts and
saved only when it completes without leaving a row out, in the notebook, per library and user. A row
that cannot be read or applied (a newer release's value) is left out and reported in the user's
`skipped`; the rest of the user's rows and every other user go on. A memory whose id the other side holds
for another user is this notebook's copy to re-id: reported once, it does not hold the pass. Idempotent: a second run
uploads nothing. When the library is unreachable the run fails, the timer retries with backoff,
and the notebook's own maintenance (the 7-day purge) goes on regardless.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime
from typing import Any, Literal, TypeVar

import anyio
from pydantic import BaseModel, Field, PrivateAttr

from pocketmem.base.clock import Clock, from_iso, to_iso
from pocketmem.base.config import Settings, redact
from pocketmem.base.errors import Conflict, ConflictReason, EmbedderMismatch, PocketmemError, UnreadableRow
from pocketmem.base.models import DeleteReason, EventKind, Memory, Status, Tombstone
from pocketmem.base.progress import Progress, no_progress
from pocketmem.service.transfer.core_merge import Resolution
from pocketmem.service.transfer.sync_rules import apply_memory, apply_tombstone, sync_view, text_to_embed
from pocketmem.service.upkeep.unsent import LIBRARY_KEY, position_key
from pocketmem.service.writing.trash import Trash
from pocketmem.service.writing.vectors import Vectors
from pocketmem.store.base import Store
from pocketmem.store.roles import MetaReads

log = logging.getLogger(__name__)

PAGE = 200
STATE_KEY = "sync.state"
MAX_BACKOFF = 3600.0
FIRST_RUN_DELAY = 1.0
PENDING_LIMIT = 10_000
Side = Literal["notebook", "library"]
ADVICE: dict[Side, str] = {
    "notebook": "run `pocketmem doctor --repair` on this device, then sync again",
    "library": "correct or remove that row in the cloud library (a newer pocketmem may have written it: upgrade "
    "this device), then sync again",
}
# A memory whose id the library holds for another user: the first owner there keeps the id, so the copy that
# cannot travel is this notebook's (an import of another user's export, with its user changed, keeps their ids).
ID_TAKEN_ADVICE = (
    "leave the cloud library's row alone, it is the other user's memory; take this notebook's copy out with "
    "`pocketmem forget {id}` and, if it is this user's, add its text again with `pocketmem add` (a new id; "
    "`pocketmem import` keeps the ids in its file and has no option to give new ones). It is reported once: "
    "sync passes it by until it changes"
)


class UserSyncReport(BaseModel):
    user_id: str
    uploaded: int = 0
    tombstones_uploaded: int = 0
    trash_handed_over: int = 0
    downloaded: int = 0
    tombstones_downloaded: int = 0
    evicted: int = 0
    skipped: list[dict[str, str]] = Field(
        default_factory=list,
        description="rows that could not be read or applied (table, id, where, why, advice); the rest went on",
    )

    conflicts: list[dict[str, str]] = Field(
        default_factory=list,
        description="core memories patched on two devices (id, where, resolution: `merged` when both sides' "
        "appends were kept, `later_wins` when a replace made the later version win as it is)",
    )

    def conflict(self, memory_id: str, where: Side, resolution: Resolution) -> None:
        """A core memory both sides patched since their common version, as it was settled (once a run: its
        push and its pull may both meet it)."""
        if any(c["id"] == memory_id for c in self.conflicts):
            return
        log.info("sync of %s: core memory %s patched on two devices: %s", self.user_id, memory_id, resolution)
        self.conflicts.append({"id": memory_id, "where": where, "resolution": resolution})

    _held: int = PrivateAttr(0)  # rows left out that hold their pass (read again next sync)

    @property
    def held(self) -> int:
        return self._held

    def skip(self, table: str, row_id: str, where: Side, why: str) -> None:
        """A row left out that cannot be read or applied here: its pass is read again next sync, until it travels."""
        self._held += 1
        self._report(table, row_id, where, why, ADVICE[where])

    def left_out(self, memory_id: str, exc: Conflict | UnreadableRow, where: Side) -> None:
        """A memory the receiver would not take: the other side's row when it cannot be read there; this notebook's
        copy, reported once and passed by, when its id is another user's on the other side."""
        if isinstance(exc, Conflict) and exc.reason == ConflictReason.id_taken:
            self._report("memories", memory_id, "notebook", str(exc), ID_TAKEN_ADVICE.format(id=memory_id))
        else:
            self.skip("memories", memory_id, where, _why(exc))

    def _report(self, table: str, row_id: str, where: Side, why: str, advice: str) -> None:
        log.warning("sync of %s: %s row %s in the %s skipped: %s", self.user_id, table, row_id, where, why)
        self.skipped.append({"table": table, "id": row_id, "where": where, "why": why, "advice": advice})


class SyncReport(BaseModel):
    started_at: datetime
    finished_at: datetime | None = None
    ok: bool = False
    error: str | None = None
    scopes: list[str]
    users: list[UserSyncReport] = Field(default_factory=list)

    @property
    def uploaded(self) -> int:
        return sum(u.uploaded + u.tombstones_uploaded + u.trash_handed_over for u in self.users)

    @property
    def skipped(self) -> int:
        return sum(len(u.skipped) for u in self.users)

    @property
    def conflicts(self) -> int:
        return sum(len(u.conflicts) for u in self.users)


class Sync:
    def __init__(
        self, settings: Settings, local: Store, library: Store, trash: Trash, vectors: Vectors, clock: Clock
    ) -> None:
        self.settings = settings
        self.local = local
        self.library = library
        self.trash = trash
        self.vectors = vectors  # the notebook's vectors must be this embedder's too (`_same_model`)
        self.embedder = vectors.embedder
        self.clock = clock
        self._lock = anyio.Lock()
        self._library_id: str | None = None
        self.failures = 0

    # -- one run ----------------------------------------------------------------------------------
    async def run(self, progress: Progress = no_progress) -> SyncReport:
        async with self._lock:
            report = SyncReport(started_at=self.clock.now(), scopes=list(self.settings.sync_scopes))
            try:
                await self._prepare_library()
                async with self.local.read() as reader:
                    # POCKETMEM_USER too: a new device has no rows yet and pulls its user's memories first.
                    users = sorted({*await reader.user_ids(), self.settings.user})
                for done, user_id in enumerate(users, 1):
                    report.users.append(await self._sync_user(user_id))
                    progress(done, len(users))
                report.ok = True
                self.failures = 0
            except (PocketmemError, OSError) as exc:
                report.error = self._shown(str(exc))
                self.failures += 1
                log.info("sync with the cloud library failed: %s", report.error)  # the caller says it
                reconnect = getattr(self.library, "reconnect", None)
                if reconnect is not None:
                    await reconnect()
            report.finished_at = self.clock.now()
            await self._save_state(report)
            return report

    async def _prepare_library(self) -> None:
        ensure = getattr(self.library, "ensure_ready", None)
        if ensure is not None:
            await ensure()
        library_id = await self.library.get_meta("library_id")
        if library_id is None:
            async with self.library.write() as tx:
                library_id = await tx.meta("library_id") or uuid.uuid4().hex
                await tx.put_meta("library_id", library_id)
        self._library_id = library_id
        if await self.local.get_meta(LIBRARY_KEY) != library_id:
            await self.local.set_meta(LIBRARY_KEY, library_id)
        if await self.local.get_meta("embedder") is None:  # a notebook without vectors yet: this embedder's
            await self.local.ensure_vectors(self.embedder.tag, await self._dimensions())
        async with self.local.read() as reader:
            await self._same_model(reader)
        tag = await self.library.get_meta("embedder")
        if tag is None:
            await self.library.prepare_vectors(self.embedder.tag, await self._dimensions())
        elif tag != self.embedder.tag:
            raise EmbedderMismatch(
                f"the cloud library's vectors were made by {tag}, but this notebook embeds with {self.embedder.tag}; "
                "vectors of two models never mix. Configure the same POCKETMEM_EMBEDDER / POCKETMEM_EMBED_MODEL "
                "on every device that syncs with one library."
            )

    async def _dimensions(self) -> int:
        return self.embedder.dimensions or len(await self.embedder.embed("pocketmem"))

    async def _same_model(self, tx: MetaReads) -> None:
        """Inside a notebook transaction that reads or writes vectors: they are this embedder's, as the library's
        are (service/writing/vectors.py); else the run stops before any vector travels."""
        if not await self.vectors.agree_in(tx):
            raise EmbedderMismatch(
                f"this notebook cannot sync: {self.vectors.note() or 'it records no embedder for its vectors'}"
            )

    def _key(self, user_id: str, direction: str) -> str:
        return position_key(self._library_id, user_id, direction)

    async def _sync_user(self, user_id: str) -> UserSyncReport:
        out = UserSyncReport(user_id=user_id)
        async with self.library.write(user_id=user_id) as tx:
            await tx.ensure_user(user_id, self.clock.now())
        await self._push(user_id, out)
        if self.settings.sync_trash:
            await self._hand_over_trash(user_id, out)
        await self._pull(user_id, out)
        return out

    # -- push -------------------------------------------------------------------------------------
    async def _push(self, user_id: str, out: UserSyncReport) -> None:
        key = self._key(user_id, "push")
        held_before = out.held
        async with self.local.read() as reader:
            since = await reader.meta(key)
            marker = await reader.change_marker()
        # Tombstones first: a restore made there arrives before the version it made (sync_rules.blocks).
        await self._push_tombstones(user_id, since, out)
        after: str | None = None
        while True:
            async with self.local.read() as reader:
                page = await reader.changed_memories(user_id, since, after, PAGE)
                memories = [
                    sync_view(m)
                    for m in _readable(page, out, "notebook")
                    if m.status != Status.trashed or m.delete_reason == DeleteReason.evicted
                ]
                await self._same_model(reader)
                vectors = await reader.memory_vectors(user_id, [m.id for m in memories])
                revisions = [r for m in memories if m.core for r in await reader.list_revisions(user_id, m.id)]
            if not page:
                break
            out.uploaded += (await self._send(memories, vectors, revisions, out))[0]
            after = page[-1][0]
        if out.held == held_before:  # else the pass is read again next time, until the row travels
            async with self.local.write() as tx:
                await tx.put_meta(key, marker)

    async def _push_tombstones(self, user_id: str, since: str | None, out: UserSyncReport) -> None:
        after: str | None = None
        while True:
            async with self.local.read() as reader:
                page_of_tombstones = await reader.changed_tombstones(user_id, since, after, PAGE)
            if not page_of_tombstones:
                break
            tombstones = _readable(page_of_tombstones, out, "notebook")
            async with self.library.write(user_id=user_id) as tx:
                for tombstone in tombstones:
                    if await apply_tombstone(tx, tombstone, library=True, record_change=True):
                        out.tombstones_uploaded += 1
            async with self.local.write(user_id=user_id) as tx:
                await tx.mark_tombstones_synced(user_id, [t.tombstone_id for t in tombstones], self.clock.now())
            after = page_of_tombstones[-1][0]

    async def _send(
        self, memories: list[Memory], vectors: dict[str, list[float]], revisions: list[Any], out: UserSyncReport
    ) -> tuple[int, set[str]]:
        """One library transaction: land each memory (and its revisions); the count of those that changed it,
        and the ids of those the library would not take (reported in `out`)."""
        missing = [m for m in memories if m.id not in vectors]
        if missing:
            for memory, vector in zip(
                missing, await self.embedder.embed_many([text_to_embed(m) for m in missing]), strict=True
            ):
                vectors[memory.id] = vector
        changed = 0
        refused: set[str] = set()
        async with self.library.write() as tx:
            await tx.lock_users(m.user_id for m in memories)
            for memory in memories:
                try:
                    landing = await apply_memory(
                        tx, memory, vectors.get(memory.id), library=True, record_change=True,
                        revisions=[r for r in revisions if r.memory_id == memory.id], embed=self.embedder.embed,
                    )
                except (Conflict, UnreadableRow) as exc:  # checked before anything is written
                    out.left_out(memory.id, exc, "library")
                    refused.add(memory.id)
                    continue
                changed += landing.changed
                if landing.conflict:
                    out.conflict(memory.id, "library", landing.conflict)
            for revision in revisions:
                if revision.memory_id not in refused:
                    await tx.import_revision(revision)
        return changed, refused

    async def _hand_over_trash(self, user_id: str, out: UserSyncReport) -> None:
        after: str | None = None
        while True:
            async with self.local.read() as reader:
                trash = await reader.scan_memories(user_id, (Status.trashed,), after, PAGE)
                await self._same_model(reader)
                vectors = await reader.memory_vectors(user_id, [m.id for m in trash])
                tombstones = await reader.tombstones_for(user_id, [m.id for m in trash])
            if not trash:
                return
            after = trash[-1].id
            _, refused = await self._send([sync_view(m) for m in trash], vectors, [], out)
            trash = [m for m in trash if m.id not in refused]
            async with self.library.write(user_id=user_id) as tx:
                for tombstone in tombstones:
                    await apply_tombstone(tx, tombstone, library=True, record_change=True)
            # Only now that the library has committed it does the trash leave the notebook.
            now = self.clock.now()
            async with self.local.write(user_id=user_id) as tx:
                cleared: list[str] = []
                for memory in trash:
                    current = await tx.get_memory(user_id, memory.id)
                    if current is None or current.status != Status.trashed or current.updated_at != memory.updated_at:
                        continue  # restored (or changed) meanwhile: it stays
                    await tx.remove_memory(user_id, memory.id)
                    cleared.append(memory.id)
                await tx.mark_tombstones_synced(
                    user_id, [t.tombstone_id for t in tombstones if t.memory_id in cleared], now
                )
                if cleared:
                    await tx.add_event(user_id, EventKind.synced, now, payload={"trash_handed_over": cleared})
            out.trash_handed_over += len(cleared)

    # -- pull -------------------------------------------------------------------------------------
    async def _pull(self, user_id: str, out: UserSyncReport) -> None:
        key = self._key(user_id, "pull")
        held_before = out.held
        async with self.local.read() as reader:
            since = await reader.meta(key)
        async with self.library.read() as reader:
            marker = await reader.change_marker()
        await self._pull_tombstones(user_id, since, out)  # first, as on push
        after: str | None = None
        while True:
            async with self.library.read() as reader:
                page = await reader.changed_memories(user_id, since, after, PAGE)
                memories = _readable(page, out, "library")
                vectors = await reader.memory_vectors(user_id, [m.id for m in memories])
                revisions = [r for m in memories if m.core for r in await reader.list_revisions(user_id, m.id)]
            if not page:
                break
            now = self.clock.now()
            async with self.local.write(user_id=user_id) as tx:
                await self._same_model(tx)
                landed: list[str] = []
                for memory in memories:
                    incoming = sync_view(memory)  # a library served by a pocketmem server may evict too
                    try:
                        landing = await apply_memory(
                            tx, incoming, vectors.get(memory.id), library=False, record_change=False,
                            revisions=[r for r in revisions if r.memory_id == memory.id], embed=self.embedder.embed,
                        )
                    except (Conflict, UnreadableRow) as exc:  # checked before anything is written
                        out.left_out(memory.id, exc, "notebook")
                        continue
                    if landing.changed:
                        landed.append(memory.id)
                    if landing.conflict:
                        out.conflict(memory.id, "notebook", landing.conflict)
                # A core memory's history travels even when the notebook's own version won (two devices patched
                # it): the losing patch's revision is history on every device.
                held = set(landed) | {
                    mid for mid in {r.memory_id for r in revisions} - set(landed)
                    if await tx.get_memory(user_id, mid) is not None
                }
                for revision in revisions:
                    if revision.memory_id in held:
                        await tx.import_revision(revision)
                evicted = await self.trash.enforce_cap(tx, user_id, now, keep=[])
                if landed:
                    await tx.add_event(user_id, EventKind.synced, now, payload={"downloaded": landed})
            out.downloaded += len(landed)
            out.evicted += len(evicted)
            after = page[-1][0]
        if out.held == held_before:  # else the pass is read again next time, until the row travels
            async with self.local.write() as tx:
                await tx.put_meta(key, marker)

    async def _pull_tombstones(self, user_id: str, since: str | None, out: UserSyncReport) -> None:
        after: str | None = None
        while True:
            async with self.library.read() as reader:
                page_of_tombstones = await reader.changed_tombstones(user_id, since, after, PAGE)
            if not page_of_tombstones:
                break
            now = self.clock.now()
            async with self.local.write(user_id=user_id) as tx:
                for tombstone in _readable(page_of_tombstones, out, "library"):
                    if tombstone.reason == DeleteReason.evicted:
                        continue  # another notebook's capacity, not a delete
                    landed_copy = tombstone.model_copy(update={"cloud_synced_at": tombstone.cloud_synced_at or now})
                    if await apply_tombstone(tx, landed_copy, library=False, record_change=False):
                        out.tombstones_downloaded += 1
            after = page_of_tombstones[-1][0]

    # -- state ------------------------------------------------------------------------------------
    async def _save_state(self, report: SyncReport) -> None:
        previous = await self.state_record()
        state = {
            "last_attempt_at": to_iso(report.started_at),
            "last_success_at": to_iso(report.finished_at) if report.ok and report.finished_at else
            previous.get("last_success_at"),
            "last_error": report.error,
            "consecutive_failures": self.failures,
            "last_run": {
                "ok": report.ok,
                "uploaded": report.uploaded,
                "downloaded": sum(u.downloaded + u.tombstones_downloaded for u in report.users),
                "skipped": report.skipped,
                "conflicts": report.conflicts,
            },
        }
        try:
            await self.local.set_meta(STATE_KEY, json.dumps(state))
        except PocketmemError:  # the notebook itself failing is reported by everything else
            log.exception("could not record the sync state")

    def _shown(self, error: str) -> str:
        """An error as it may be stored and shown: no credential of the library's URL, or of any URL, in it."""
        url = self.settings.cloud_url.get_secret_value() if self.settings.cloud_url is not None else None
        return redact(error, url)

    async def state_record(self) -> dict[str, Any]:
        raw = await self.local.get_meta(STATE_KEY)
        return json.loads(raw) if raw else {}

    async def status(self, user_id: str) -> dict[str, Any]:
        """What `pocketmem stats` and memory://stats show: last sync, pending uploads, errors."""
        state = await self.state_record()
        pending = await self.pending_uploads(user_id)
        return {
            "library": getattr(self.library, "label", None),
            "scopes": list(self.settings.sync_scopes),
            "interval": self.settings.sync_interval,
            "last_attempt_at": _instant(state.get("last_attempt_at")),
            "last_success_at": _instant(state.get("last_success_at")),
            # A state written before errors were stored masked: masked as it is shown.
            "last_error": self._shown(state["last_error"]) if state.get("last_error") else None,
            "consecutive_failures": state.get("consecutive_failures", 0),
            "pending_uploads": pending,
        }

    async def pending_uploads(self, user_id: str) -> int:
        library_id = self._library_id or await self._known_library_id()
        async with self.local.read() as reader:
            since = await reader.meta(position_key(library_id, user_id, "push")) if library_id else None
            changed = await reader.changed_memories(user_id, since, None, PENDING_LIMIT)
            count = sum(
                1
                for _, m in changed
                if isinstance(m, UnreadableRow) or m.status != Status.trashed or m.delete_reason == DeleteReason.evicted
            )
            count += sum(1 for t in await reader.all_tombstones(user_id) if t.cloud_synced_at is None)
            if self.settings.sync_trash:
                _, trashed = await reader.list_memories(user_id, _trash_filter())
                count += trashed
        return count

    async def _known_library_id(self) -> str | None:
        """The library's id as recorded by an earlier sync (the library itself may be unreachable now)."""
        async with self.local.read() as reader:
            raw = await reader.meta(LIBRARY_KEY)
        return raw

    # -- the server's timer -------------------------------------------------------------------------
    async def run_periodically(self, interval: float) -> None:
        """Sync every `interval` seconds while serving; after failures wait longer (doubling, at most an hour)."""
        await anyio.sleep(min(FIRST_RUN_DELAY, interval))
        while True:
            try:
                report = await self.run()
                if not report.ok:
                    log.warning("sync with the cloud library failed: %s", report.error)
            except Exception:  # a failed run must not stop the timer or the server
                log.exception("sync run failed")
                self.failures += 1
            await anyio.sleep(backoff(interval, self.failures))


Row = TypeVar("Row", Memory, Tombstone)


def _readable(page: list[tuple[str, Row | UnreadableRow]], out: UserSyncReport, where: Side) -> list[Row]:
    """The rows of a page of changes that can be read; the others are reported in `out` and left out."""
    rows: list[Row] = []
    for _, row in page:
        if isinstance(row, UnreadableRow):
            out.skip(row.table, row.row_id, where, row.why)
        else:
            rows.append(row)
    return rows


def _why(exc: Conflict | UnreadableRow) -> str:
    return exc.why if isinstance(exc, UnreadableRow) else str(exc)


def backoff(interval: float, failures: int) -> float:
    """Seconds before the next sync: the interval, doubled per consecutive failure, capped at an hour."""
    if failures <= 0:
        return interval
    return min(interval * 2 ** min(failures, 20), max(interval, MAX_BACKOFF))


def _instant(stored: object) -> datetime | None:
    """A time the sync state keeps as text, as a datetime (shown in the user's zone by who shows it)."""
    return from_iso(stored) if isinstance(stored, str) else None


def _trash_filter() -> Any:
    from pocketmem.store.types import MemoryFilter

    return MemoryFilter(statuses=(Status.trashed,), limit=1)
