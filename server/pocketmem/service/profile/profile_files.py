"""The profile's Markdown files under $POCKETMEM_HOME/<user>/ — Persona.md, User.md, Project.md, Insights.md —
written after changes and read back when a person edits them.

Writing: after every committed write that can change them (store.on_commit), each file is rendered again
and, when its text differs, replaced atomically (temporary file + rename). The text written is recorded in
the store (`profile_files`), with its hash.

Reading back: at the next read (recall, the card, memory_context; a stat of four files decides) and at every
maintenance run, a file whose hash differs from the one recorded was edited by a person. Its edit is the
difference between the recorded text and the file (a three-way merge, field by field and line by line):

    a field whose value the person changed        -> set (persona / identity, with a revision)
    a memory line whose text the person changed   -> core memory: patched (replace); other: superseded
    a memory line without an id comment           -> a new memory (User.md: core; Project.md: project;
                                                     Insights.md: lesson), stored directly (the person wrote it)
    a memory line the person deleted              -> User.md / Project.md: to the trash (restorable);
                                                     Insights.md: nothing (it only shows the hot lessons)

When both sides changed, the person's edit wins for what the person touched; everything the person did not
touch keeps the store's newer value. What the person touched is judged against the newest version written, or
against an older one (of the last five) when the file holds exactly that version's memory lines: an editor left
open across one of pocketmem's writes does not undo that write, while a file that drops lines deletes those lines.
A file identical to an earlier version edits nothing of it: what it lacks of the last version was deleted. A line
without an id comment whose text is a line written is that memory (editors that strip comments). Anything that
cannot be taken in (an unknown field, a line outside a section, a read-only section changed, a secret under
POCKETMEM_SECRETS=refuse, a memory no longer active) is reported: the person's whole file is kept beside it
as `<name>.rejected-<UTC time>.md`, a `profile_file_rejected` event lists the problems, and the rest of the
edit is still taken in. Then the file is written again from the store. A deleted file is simply written again; a
section missing from the file (an emptied file, the title alone) is left as it is; a file cut off inside a line of
a text written is reported and nothing in it taken in.

A file is replaced only while it holds a text recorded, written or taken in (checked right before the rename): a
save landing after the take-in is taken in next, never overwritten. Processes of one store on one home take turns
on an exclusive lock of the folder's `.pocketmem-store` for the take-in and the write, so one save is applied once.

One store keeps a folder: the first to write it leaves its id in `.pocketmem-store`, and another store over
the same POCKETMEM_HOME (a second database file, a synced device) leaves that folder alone. Processes of one store
share its id (claimed once in store_meta), so starting two at once on a new home claims the folder for both.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import time
import uuid
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import PocketmemError, StoreError
from pocketmem.base.filelock import FileLock
from pocketmem.base.files import atomic_write, check_directory
from pocketmem.base.models import Category, EventKind, Status
from pocketmem.core.formatting import is_overdue
from pocketmem.core.instants import UnreadableInstant
from pocketmem.core.profile_text import FILES, Parsed, Section, md_text, parse, render
from pocketmem.core.shown_time import due_on
from pocketmem.service.profile.file_versions import closest_base, cut_short, distance, restore_ids
from pocketmem.service.profile.profile import Profile
from pocketmem.service.profile.project_summary import ProjectSummary
from pocketmem.service.shared.folder_owner import OWNER_FILE, STORE_ID_KEY, folder_name, folder_owner, folder_problem
from pocketmem.service.shared.usercard import CARD_CORE_LIMIT, CARD_TODO_LIMIT, render_user_card
from pocketmem.service.writing.add_request import AddRequest, screen_secrets
from pocketmem.service.writing.patching import Patching
from pocketmem.service.writing.writing import Writing
from pocketmem.store.base import Store

T = TypeVar("T")

log = logging.getLogger(__name__)

FILE_NAMES = ("Persona.md", "User.md", "Project.md", "Insights.md")
# Writes that never change a file: no re-render on the hot path.
QUIET_KINDS = frozenset({EventKind.recalled, EventKind.retrieval_fail, EventKind.discarded, EventKind.pending})
# What a new line (no id comment) becomes, and whether a deleted line goes to the trash.
NEW_LINE = {"core": (Category.fact, True), "project": (Category.project, False), "insights": (Category.lesson, False)}
REMOVAL_FORGETS = {"core", "project"}
MTIME_SLACK_NS = 2_000_000_000
FOLDER_LOCK_TIMEOUT = 30.0
KEEP_EARLIER = 4  # texts written before the last one, kept to find the copy a person started editing from


def _not_a_file(path: Path) -> str | None:
    """What stands at `path` when it is neither a regular file nor nothing (never followed: a link is a link)."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return None
    return ("a directory" if stat.S_ISDIR(mode) else "a symbolic link" if stat.S_ISLNK(mode)
            else "a pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device")


def _claim_folder(owner: Path, store_id: str) -> str:
    """The id of the store that keeps the folder: the one in `owner`, or `store_id` written there now when there is
    none; UnreadableMarker (an OSError) when `owner` holds no store id. The file appears whole or not at all (written
    aside, then linked in place, which fails when another process got there first), so a process starting at the
    same moment never reads it half-written."""
    if (theirs := folder_owner(owner)) is not None:
        return theirs
    owner.parent.mkdir(parents=True, exist_ok=True)
    aside = owner.with_name(f"{owner.name}.{uuid.uuid4().hex}")
    aside.write_text(store_id + "\n", encoding="utf-8")
    try:
        os.link(aside, owner)
    except FileExistsError:
        pass
    finally:
        aside.unlink()
    return folder_owner(owner) or store_id


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _saved_since(path: Path, known: set[str | None]) -> bool:
    """The file holds none of the texts `known` (recorded, written, taken in): a person saved it meanwhile."""
    try:
        return _hash(path.read_bytes()) not in known
    except FileNotFoundError:
        return False


@dataclass
class FileReport:
    user_id: str
    taken_in: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # steps that stopped on a fault (`maintain` exits 1 for one)
    kept: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)


class ProfileFiles:
    def __init__(
        self, settings: Settings, store: Store, profile: Profile, writing: Writing, patching: Patching, clock: Clock
    ) -> None:
        self.settings = settings
        self.store = store
        self.profile = profile
        self.writing = writing
        self.patching = patching
        self.clock = clock
        self.enabled = settings.files_on
        self.summary: ProjectSummary | None = None  # set by the app: Project.md's rolling summary (LLM)
        self._locks: dict[str, anyio.Lock] = {}
        self._busy: set[str] = set()
        self._dirty: set[str] = set()
        self._seen: dict[tuple[str, str], tuple[int, int, int] | None] = {}  # file's (mtime, size) when last looked at
        self._written: dict[tuple[str, str], str] = {}  # hash of the text last written (this process)
        self._taken: dict[tuple[str, str], str] = {}  # hash of the person's save last taken in (this process)
        self._owned: dict[str, bool] = {}
        self._store_id: str | None = None
        self._faults: dict[str, str] = {}  # user -> what keeps their folder from being read or written (logged once)
        if self.enabled:
            store.on_commit(self._on_commit)

    async def export_markdown(self, user_id: str, directory: Path) -> list[Path]:
        """The four profile files as the resources show them — User.md (the user card), Persona.md, Project.md,
        Insights.md — each replaced atomically."""
        check_directory(directory, "--markdown")
        texts = {
            "User.md": await render_user_card(self.store, user_id, self.settings, self.clock.now()),
            "Persona.md": await self.profile.render_persona(user_id),
            "Project.md": await self.profile.render_project(user_id),
            "Insights.md": await self.profile.render_insights(user_id),
        }
        written = []
        for name, text in texts.items():
            atomic_write(directory / name, text if text.endswith("\n") else text + "\n")
            written.append(directory / name)
        return written

    def folder(self, user_id: str) -> Path:
        return self.settings.home / folder_name(user_id)

    # -- triggers -------------------------------------------------------------------------------
    async def _on_commit(self, changes: Mapping[str, frozenset[EventKind]]) -> None:
        for user_id, kinds in changes.items():
            if kinds and not kinds <= QUIET_KINDS:
                await self.sync(user_id)

    async def check(self, user_id: str) -> str | None:
        """At a read: take in a person's edit if a file changed on disk since pocketmem last looked. What keeps the
        user's folder from being read or written, else None: the files are a mirror of the store, so that is never
        an error of the read."""
        if not self.enabled:
            return None
        try:
            edited = self._owned.get(user_id) is not False and any(self._maybe_edited(user_id, n) for n in FILE_NAMES)
        except OSError as exc:
            return self._fault(user_id, exc)
        if edited:
            await self.sync(user_id)
        return self._faults.get(user_id)

    def _fault(self, user_id: str, exc: OSError) -> str:
        """The user's folder could not be read or written: in words naming the path and the change, logged once
        until it is cleared (`_faults`)."""
        why = folder_problem(self.folder(user_id)) or f"the profile files in {self.folder(user_id)}: {exc}"
        if self._faults.get(user_id) != why:
            log.warning("profile files of %s: %s", user_id, why)
        self._faults[user_id] = why
        return why

    def _maybe_edited(self, user_id: str, name: str) -> bool:
        """False when the file is surely what this process wrote (same stat, or the same bytes)."""
        if self._unchanged(user_id, name):
            return False
        key = (user_id, name)
        if key not in self._written or _not_a_file(self.folder(user_id) / name):
            return True
        try:
            return _hash((self.folder(user_id) / name).read_bytes()) != self._written[key]
        except FileNotFoundError:
            return True

    async def sync_all(self) -> list[FileReport]:
        """Maintenance: every user's files, edits taken in and rewritten (and Project.md's rolling summary, which
        memory://project shows even with the files off)."""
        async with self.store.read() as reader:
            users = await reader.user_ids()
        reports = []
        # The stdio user's files count even before the user has anything stored (a person may write them first).
        for user in dict.fromkeys([self.settings.user, *users]):
            report = FileReport(user)
            if self.summary is not None:
                await self._guarded(report, "Project.md summary", self.summary.refresh(user))
            if self.enabled:
                synced = await self._guarded(report, "files", self.sync(user))
                report = synced if synced is not None else report
            reports.append(report)
        return reports

    @staticmethod
    async def _guarded(report: FileReport, what: str, work: Awaitable[T]) -> T | None:
        """One user's (or file's) failure is a problem of its report, never a stop for the others."""
        try:
            return await work
        except Exception as exc:  # noqa: BLE001 - one user's bad row must not stop the next user's files
            why = str(exc) if isinstance(exc, PocketmemError | UnreadableInstant) else f"{type(exc).__name__}: {exc}"
            log.error("profile files of %s: %s failed: %s", report.user_id, what, why)
            log.debug("profile files of %s: %s failed", report.user_id, what, exc_info=True)
            report.failed.append(f"{what} failed: {why}")
            return None

    async def sync(self, user_id: str) -> FileReport:
        """Take in a person's edits, then write what changed. Re-entrant calls (our own commits) only mark the
        user dirty: the running sync goes round once more."""
        report = FileReport(user_id)
        if not self.enabled:
            return report
        if user_id in self._busy:
            self._dirty.add(user_id)
            return report
        try:
            if not await self._owns(user_id):
                return report
        except OSError as exc:
            report.failed.append(f"files failed: {self._fault(user_id, exc)}")
            return report
        # Other processes of the store (Claude Desktop and Claude Code on one home) wait on the folder's lock: each
        # compares a file with the text recorded, takes in the difference and records it before the next looks.
        lock = FileLock(str(self.folder(user_id) / OWNER_FILE), FOLDER_LOCK_TIMEOUT,
                        f"the profile files of {user_id} are busy: another process has been taking in or writing them "
                        f"for over {FOLDER_LOCK_TIMEOUT:g} s", create=False)
        async with self._locks.setdefault(user_id, anyio.Lock()):
            self._busy.add(user_id)
            try:
                async with lock.hold():
                    for _ in range(3):
                        self._dirty.discard(user_id)
                        for name in FILE_NAMES:
                            await self._guarded(report, name, self._take_in(user_id, name, report))
                        for name in FILE_NAMES:
                            await self._guarded(report, name, self._write(user_id, name, report))
                        if user_id not in self._dirty:
                            break
            except OSError as exc:  # the store is the truth; a disk problem never fails the write that triggered us
                report.failed.append(f"files failed: {self._fault(user_id, exc)}")
            except StoreError as exc:
                log.warning("profile files of %s: %s", user_id, exc)
                report.failed.append(f"files failed: {exc}")
            else:
                self._faults.pop(user_id, None)
            finally:
                self._busy.discard(user_id)
                self._dirty.discard(user_id)
        return report

    async def _owns(self, user_id: str) -> bool:
        """Whether this store keeps the user's folder. Two stores over one POCKETMEM_HOME (two database files,
        or a notebook and a server) would otherwise take each other's writes for a person's edits: the first
        store to write a folder claims it (OWNER_FILE holds its id) and the others leave it alone."""
        owner = self.folder(user_id) / OWNER_FILE
        if user_id in self._owned and (not self._owned[user_id] or owner.exists()):
            return self._owned[user_id]  # (a folder deleted meanwhile is claimed again)
        if self._store_id is None:
            # Only inserted, never overwritten: processes starting together on a new home share one id.
            self._store_id = (await self.store.get_meta(STORE_ID_KEY)
                              or await self.store.claim_meta(STORE_ID_KEY, uuid.uuid4().hex))
        claimed = await anyio.to_thread.run_sync(_claim_folder, owner, self._store_id)
        self._owned[user_id] = claimed == self._store_id
        if not self._owned[user_id]:
            log.warning("%s belongs to another pocketmem store; its profile files are left alone", owner.parent)
        return self._owned[user_id]

    def _stat(self, user_id: str, name: str) -> tuple[int, int, int] | None:
        try:
            st = (self.folder(user_id) / name).lstat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _unchanged(self, user_id: str, name: str) -> bool:
        """The file is as this process last saw it. A modification time under MTIME_SLACK old proves nothing
        (file systems stamp times coarsely: an edit right after our write may keep both time and size)."""
        key = (user_id, name)
        if key not in self._seen:
            return False
        stat = self._stat(user_id, name)
        if stat != self._seen[key]:
            return False
        return stat is None or time.time_ns() - stat[0] > MTIME_SLACK_NS

    # -- rendering --------------------------------------------------------------------------------
    async def render_file(self, user_id: str, name: str) -> str:
        if name == "Persona.md":
            return await self.profile.render_persona(user_id, for_file=True)
        if name == "Project.md":
            return await self.profile.render_project(user_id, for_file=True)
        if name == "Insights.md":
            return await self.profile.render_insights(user_id, for_file=True)
        return await self.render_user(user_id)

    async def render_user(self, user_id: str) -> str:
        now = self.clock.now()
        async with self.store.read() as reader:
            identity = (await reader.get_profile(user_id)).get("identity", {})
            core = await reader.core_memories(user_id, CARD_CORE_LIMIT)
            todos = await reader.open_todos(user_id, now, CARD_TODO_LIMIT)
            total = await reader.count_open_todos(user_id, now) if len(todos) == CARD_TODO_LIMIT else len(todos)
        zone = self.settings.zone
        todo_lines = []
        for todo in todos:
            when = f" — due {due_on(todo.due_at, zone)}" if todo.due_at else ""
            late = " (overdue)" if is_overdue(todo.due_at, now) else ""
            todo_lines.append(f"- {md_text(todo.content)}{when}{late}")
        if total > len(todos):
            todo_lines.append(f"- … +{total - len(todos)}")  # as on the user card
        return render(
            "User.md",
            fields={"identity": {k: str(v) for k, v in identity.items()}},
            memories={"core": [(m.id, m.content) for m in core]},
            views={"todos": todo_lines},
        )

    async def _write(self, user_id: str, name: str, report: FileReport) -> None:
        if _not_a_file(self.folder(user_id) / name) == "a directory":
            return  # refused by _take_in
        text = await self.render_file(user_id, name)
        digest = _hash(text.encode())
        path = self.folder(user_id) / name
        key = (user_id, name)
        if self._written.get(key) == digest and self._unchanged(user_id, name):
            return  # the file holds exactly this text already, and nobody touched it since
        async with self.store.read() as reader:
            stored = await reader.get_profile_file(user_id, name)
        on_disk = path.read_bytes() if path.exists() else None
        if on_disk is not None and _hash(on_disk) == digest and stored is not None and stored[1] == digest:
            self._seen[key] = self._stat(user_id, name)
            self._written[key] = digest
            return
        replaced = True
        if on_disk is None or _hash(on_disk) != digest:
            # Only over the text recorded, written or taken in: a save that landed since the take-in is taken in
            # at the next round (or the next check), never replaced.
            known = {stored[1] if stored else None, self._written.get(key), self._taken.get(key)}
            replaced = await anyio.to_thread.run_sync(atomic_write, path, text, lambda: _saved_since(path, known))
            report.written += [name] if replaced else []
        earlier = ([stored[0], *stored[2]] if stored is not None and stored[0] != text else
                   (stored[2] if stored is not None else []))[:KEEP_EARLIER]
        # Recorded even when the file was not replaced: it is what the store holds after the take-in, the text the
        # next take-in compares the newer save with (so what was taken in is not taken in twice).
        async with self.store.write(user_id=user_id) as tx:
            await tx.put_profile_file(user_id, name, text, digest, earlier, self.clock.now())
        if not replaced:
            self._dirty.add(user_id)
            return
        self._seen[key] = self._stat(user_id, name)
        self._written[key] = digest

    # -- reading back -----------------------------------------------------------------------------
    async def _take_in(self, user_id: str, name: str, report: FileReport) -> None:
        path = self.folder(user_id) / name
        key = (user_id, name)
        if key in self._written and self._unchanged(user_id, name):
            return  # unchanged since this process wrote it
        if await self._replace_special(user_id, name, report) or not path.exists():
            return
        raw = path.read_bytes()
        if self._written.get(key) == _hash(raw):
            return  # our own text
        async with self.store.read() as reader:
            stored = await reader.get_profile_file(user_id, name)
        if stored is not None and stored[1] == _hash(raw):
            return
        problems: list[str] = []
        written = [stored[0], *stored[2]] if stored else [""]
        try:
            text = raw.decode("utf-8-sig")  # without the byte order mark some editors put first
        except UnicodeDecodeError:
            problems.append(f"{name}: not UTF-8 text; nothing in it was taken in")
        else:
            if cut_short(text, written):
                problems.append(f"{name} ends inside a line of the text pocketmem wrote: it looks cut short (an editor "
                                "or a sync client stopped writing); nothing in it was taken in")
            else:
                await self._take_in_text(user_id, name, parse(name, text), written, report, problems)
        if problems:
            await self._keep_rejected(user_id, name, raw, problems, report)
        self._taken[key] = _hash(raw)

    async def _take_in_text(
        self, user_id: str, name: str, theirs: Parsed, written: list[str], report: FileReport, problems: list[str],
    ) -> None:
        versions = [parse(name, text) for text in written]
        restore_ids(theirs, versions)
        base, newest = closest_base(theirs, versions), versions[0]
        # A file identical to an earlier version changes nothing of it: the person deleted what came after.
        opened = newest if distance(base, theirs) == 0 else base
        problems += [f"{name} {p}" for p in theirs.problems]
        await self._apply(user_id, name, (base, opened, newest), theirs, written != [""], report, problems)

    async def _apply(
        self, user_id: str, name: str, bases: tuple[Parsed, Parsed, Parsed], theirs: Parsed, known: bool,
        report: FileReport, problems: list[str],
    ) -> None:
        base, opened, newest = bases
        for spec in FILES[name]:
            b, t = base.sections[spec.key], theirs.sections[spec.key]
            if not t.present:
                continue  # a section missing from the file (an emptied or cut-off file) is left as it is
            if spec.kind == "fields":
                await self._apply_fields(user_id, name, spec.key, b, t, report, problems)
            elif spec.kind == "memories":
                await self._apply_memories(
                    user_id, name, spec.key, (b, opened.sections[spec.key], newest.sections[spec.key]), t, report,
                    problems,
                )
            elif known and t.lines != b.lines:
                problems.append(f"{name}: the section {spec.heading!r} is only a view; its edit was not taken in")

    async def _apply_fields(
        self, user_id: str, name: str, section: str, base: Section, theirs: Section, report: FileReport,
        problems: list[str],
    ) -> None:
        wanted = {k: v for k, v in theirs.fields.items() if base.fields.get(k) != v}
        clean: dict[str, str] = {}
        for key, value in wanted.items():
            try:
                one, _ = self.profile.clean_fields(section, {key: value})
            except PocketmemError as exc:
                problems.append(f"{name}: {exc}")
                continue
            clean.update(one)
        if not clean:
            return
        async with self.store.write(user_id=user_id) as tx:
            changed = await self.profile.apply_in(tx, user_id, {section: clean}, "file", self.clock.now())
        report.taken_in += [f"{name}: {c}" for c in changed]

    async def _apply_memories(
        self, user_id: str, name: str, section: str, bases: tuple[Section, Section, Section], theirs: Section,
        report: FileReport, problems: list[str],
    ) -> None:
        # Edits against the version the person started from. Deletions: lines of the version they opened that are
        # still in the last one written and missing from their file; a line written after they opened it stays.
        before = {line.memory_id: line.text for line in bases[0].memories if line.memory_id}
        opened = {line.memory_id for line in bases[1].memories if line.memory_id}
        last = {line.memory_id for line in bases[2].memories if line.memory_id}
        kept_ids = {line.memory_id for line in theirs.memories if line.memory_id}
        for line in theirs.memories:
            try:
                if line.memory_id is None:
                    await self._add_line(user_id, name, section, line.text, report, problems)
                elif before.get(line.memory_id) != line.text:
                    await self._edit_line(user_id, name, section, line.memory_id, line.text, report, problems)
            except PocketmemError as exc:
                problems.append(f"{name}: {line.text[:40]!r}: {exc}")
        if section not in REMOVAL_FORGETS:
            return
        for memory_id in sorted((opened & last) - kept_ids):
            try:
                await self.writing.trash.forget(user_id, memory_id, f"removed from {name}")
                report.taken_in.append(f"{name}: forgot {memory_id} (restorable from the trash)")
            except PocketmemError as exc:
                problems.append(f"{name}: removing {memory_id}: {exc}")

    async def _add_line(
        self, user_id: str, name: str, section: str, text: str, report: FileReport, problems: list[str],
        supersedes: str | None = None,
    ) -> None:
        category, core = NEW_LINE[section]
        req = AddRequest(
            content=text, category=category, scores={"persistence": 1.0} if core else None, supersedes=supersedes,
            source=name, confidence=1.0,
        )
        req, kinds, refused = screen_secrets(req, self.settings)  # add_many checks the rest
        if refused:
            problems.append(f"{name}: {text[:40]!r} holds a secret ({', '.join(kinds)}); not saved")
            return
        # The person wrote it: stored directly, whatever confirm-everything says about the agent's writes.
        [result] = await self.writing.add_many(user_id, [req])
        report.taken_in.append(f"{name}: {result.status} {result.memory_id}")

    async def _edit_line(
        self, user_id: str, name: str, section: str, memory_id: str, text: str, report: FileReport,
        problems: list[str],
    ) -> None:
        async with self.store.read() as reader:
            memory = await reader.get_memory(user_id, memory_id)
        if memory is None or memory.status != Status.active:
            problems.append(f"{name}: memory {memory_id} is not active any more; its edited line was not taken in")
            return
        if memory.content == text:
            return
        if memory.core:
            await self.patching.patch_core(user_id, memory_id, text, "replace", f"edited in {name}")
            report.taken_in.append(f"{name}: patched {memory_id}")
        else:
            await self._add_line(user_id, name, section, text, report, problems, supersedes=memory_id)

    async def _replace_special(self, user_id: str, name: str, report: FileReport) -> bool:
        """Something other than a regular file at the file's path is never read through (a link may point anywhere,
        a pipe blocks). A link, pipe, socket or device is removed (a link's target is left as it is) and the file
        is written in its place; a directory is left alone and refused. One event each, the directory's once for
        the store (store_meta), not on every read or start. True when the file is refused."""
        path = self.folder(user_id) / name
        kind = _not_a_file(path)
        if kind is None:
            return False
        refused = kind == "a directory"
        if refused:
            key = f"profile_file_refused:{user_id}:{name}"
            if await self.store.get_meta(key) is not None:
                return True
            await self.store.set_meta(key, self.clock.now().isoformat())
            problem = f"{name} is a directory: it is left alone and this file is not kept until it is removed"
        else:
            await anyio.to_thread.run_sync(path.unlink)
            problem = f"{name} was {kind}: replaced by the file; nothing was read through it"
        log.warning("profile files of %s: %s", user_id, problem)
        report.problems.append(problem)
        async with self.store.write(user_id=user_id) as tx:
            await tx.add_event(user_id, EventKind.profile_file_rejected, self.clock.now(),
                               payload={"file": name, "problems": [problem], "kept": None})
        return refused

    async def _keep_rejected(
        self, user_id: str, name: str, raw: bytes, problems: list[str], report: FileReport
    ) -> None:
        now: datetime = self.clock.now()
        stamp = f"{now.astimezone(UTC):%Y%m%dT%H%M%S}Z"
        copy = self.folder(user_id) / f"{Path(name).stem}.rejected-{stamp}.md"
        number = 1
        while copy.exists():
            number += 1
            copy = self.folder(user_id) / f"{Path(name).stem}.rejected-{stamp}-{number}.md"
        await anyio.to_thread.run_sync(copy.write_bytes, raw)
        report.problems += problems
        report.kept.append(str(copy))
        async with self.store.write(user_id=user_id) as tx:
            await tx.add_event(user_id, EventKind.profile_file_rejected, now,
                               payload={"file": name, "problems": problems, "kept": copy.name})
