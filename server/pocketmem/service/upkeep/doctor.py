"""`pocketmem doctor`: each check is a step of its own, and whatever a step meets (a missing table, a damaged
page, a lock file it may not create) becomes a line of the report with the repair it suggests; the doctor itself
never fails. With `repair`, what can be rebuilt is: derived tables, indexes and triggers from the migrations'
schema, the keyword rows of memories that have none, the vector index from the stored vectors, unreadable times
in their stored form, and rows the reads or export leave out because they cannot be decoded (store/sql/
row_check.py: mended where a value can be put right, else set aside with their stored values kept in an event); a
missing table that holds data of its own is recreated empty.

The advice fits the cause: a path this user may not write, or a read-only disk, names the path and what to change;
a write lock another process holds names that process, within LOCK_WAIT; a memory.db missing beside its -wal says
to put it back; another program's database, a -wal that is not memory.db's, or something other than a file in place
of the store's files says what to move and which setting to change; only damage to the file itself sends the user to
a backup (restoring a file a running process holds
open, or removing its -wal, loses what it wrote)."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import NewerStore, PocketmemError
from pocketmem.base.models import EventKind, ProfileRevision
from pocketmem.core.text import content_hash
from pocketmem.providers.embeddings import Embedder
from pocketmem.service.shared.rows import indexed_text, new_id
from pocketmem.service.upkeep.doctor_files import adopt_lost_id, folder_problems
from pocketmem.service.writing.vectors import EMBEDDER_KEY, UNKNOWN, upgrades
from pocketmem.store.base import Store
from pocketmem.store.roles import StoreWriter
from pocketmem.store.sqlite import access, faults
from pocketmem.store.sqlite.driver import NotAStore, orphaned_journal
from pocketmem.store.sqlite.store import SQLiteStore

log = logging.getLogger(__name__)

T = TypeVar("T")
# Restoring memory.db alone is not enough: a -wal left by a process that was killed replays over the restored file.
FROM_BACKUP = (
    "restore memory.db from a backup and remove memory.db-wal and memory.db-shm beside it (left there, the old "
    "WAL replays over the restored file)"
)
RESTORE_SQLITE = f"{FROM_BACKUP}, or import a `pocketmem export` into a new POCKETMEM_HOME"
# What --repair cannot mend (a page of the file itself): what can still be read goes to a new store.
SALVAGE_SQLITE = (
    "export what it holds (`pocketmem export -o memories.jsonl`), then set POCKETMEM_HOME to a new folder and run "
    f"`pocketmem import memories.jsonl`; or {FROM_BACKUP}"
)
RESTORE_POSTGRES = (
    "check that the PostgreSQL server in POCKETMEM_DATABASE_URL is running and reachable and that the URL's user, "
    "password and database are right; if the database itself is lost, restore it with pg_restore, or import a "
    "`pocketmem export`"
)


def restore_advice(settings: Settings) -> str:
    """What to do when the store cannot be used, for its backend."""
    return RESTORE_POSTGRES if settings.database_url is not None else RESTORE_SQLITE


def rebuild_advice(settings: Settings, repairing: bool = False) -> str:
    """Damage: --repair first; once --repair has met it, what it cannot mend (never --repair again)."""
    if not repairing:
        return f"run `pocketmem doctor --repair`; if the problem stays, {restore_advice(settings)}"
    salvage = RESTORE_POSTGRES if settings.database_url is not None else SALVAGE_SQLITE
    return f"`pocketmem doctor --repair` cannot mend this damage to the file itself: {salvage}"


# How long the doctor waits for another process's write lock before it names that process (writers wait longer).
LOCK_WAIT = 3.0
REPAIR_BLOCKED = "nothing was repaired: `pocketmem doctor --repair` needs to save to the store; fix the above first"


def missing_store(settings: Settings) -> tuple[list[str], str | None]:
    """The doctor's report when there is no SQLite store to look at, as (problems, note): a journal left without its
    store is a problem; no store at all (a fresh install, or a mistyped POCKETMEM_HOME) is a note, not an alarm. A
    diagnostic creates nothing, so neither is opened. Both empty when there is something to open, or a folder on the
    way cannot be made (the opening says why, creating nothing)."""
    path = settings.db_path
    if settings.database_url is not None or not access.absent(path):
        return [], None
    if (orphaned := orphaned_journal(str(path))) is not None:
        return [orphaned], None
    chosen = settings.db_setting() or "POCKETMEM_HOME"
    return [], (f"no store at {path}: nothing was created. If the store is elsewhere, set {chosen} to where it is; "
                "a new store is made by the first `pocketmem add` or start of `pocketmem serve`")


def opening_problems(settings: Settings, exc: BaseException) -> list[str]:
    """Why the store cannot be opened, with the remedy of its cause: a folder that cannot be made, a path this user
    may not read or write, a write lock another process holds; a backup only for a file that is damaged."""
    why = str(exc) if isinstance(exc, PocketmemError) else f"{type(exc).__name__}: {exc}"
    if isinstance(exc, NewerStore):
        return [str(exc)]  # a newer release migrated it: nothing is damaged, and no backup is needed
    if settings.database_url is not None:
        return [f"the store cannot be opened ({why}): {RESTORE_POSTGRES}"]
    path = str(settings.db_path)
    if not os.path.isdir(settings.db_path.parent):
        return [f"the store cannot be opened: {why}"]  # the folder cannot be made (access.creation_problem)
    if (orphaned := orphaned_journal(path)) is not None:
        return [orphaned]  # never "restore from a backup": the writes are in that journal
    if isinstance(exc, NotAStore):
        return [str(exc)]  # another program's database, or a -wal of one: nothing is damaged
    if found := access.access_problems(path, settings.db_setting()):
        return found
    if any(s in why.lower() for s in access.LOCKED):
        return [access.held_problem(path, LOCK_WAIT)]
    return [f"the store cannot be opened ({why}): {RESTORE_SQLITE}"]


def step_advice(settings: Settings, exc: BaseException, repairing: bool = False) -> str:
    """What to do when a step failed, by its cause (`repairing`: the step was one of --repair's)."""
    text = str(exc).lower()
    if "no such table" in text:
        return "run `pocketmem doctor --repair`: it recreates the missing table"
    if any(s in text for s in access.LOCKED):
        return "another process holds the store's write lock: run the doctor again once it is done"
    if settings.database_url is None and (fault := faults.classify(exc, "", writing=True)) is not None:
        if fault.kind == "read-only":
            return "the store cannot be written: make memory.db, its folder and memory.db.lock writable by this user"
        if fault.kind == "full":
            return "the disk is full: free some space and run the doctor again"
    return rebuild_advice(settings, repairing)


def vector_problems(report: dict[str, Any], *, postgres: bool) -> list[str]:
    """What is wrong with the vector index, with the step that fixes that cause (nothing on a fresh store)."""
    store = report["store"]
    if store["vectors_available"] or "note" in report["embedder"]:
        return []  # (a store the next server re-embeds gets its index then)
    stored_embedder = report["embedder"].get("store_embedder")
    fresh = stored_embedder is None and not store["memories"]
    if postgres:
        if fresh:
            return []  # no vectors yet: the vector column and its index are sized by the first memory's embedder
        return ["the vector index is missing: recall uses the keyword index only; run `pocketmem reindex` "
                "(the database needs the pgvector extension: CREATE EXTENSION vector)"]
    if not store.get("vector_extension", False):
        return ["the sqlite-vec extension cannot be loaded by this Python's sqlite3: recall uses the keyword index "
                "only. Install sqlean.py (pip install sqlean.py), which can load it, and check that sqlite-vec is "
                "installed for this platform (pip install sqlite-vec)"]
    if fresh:
        return []  # a fresh store: the index is created with the first memory
    return ["the vector index is missing although sqlite-vec loads: run `pocketmem doctor --repair` "
            "(or `pocketmem reindex`) to rebuild it"]


async def _mend_memory(tx: StoreWriter, user_id: str, memory_id: str, fixes: dict[str, Any], now: datetime) -> None:
    """A memory's columns rewritten; its content, when it was not UTF-8, as a patch would (its hash and keyword
    row with it), without a vector: the embed queue gives it one."""
    rest = dict(fixes)
    if "content" in rest:
        content, keywords = rest.pop("content"), rest.pop("keywords")
        await tx.replace_content(
            user_id, memory_id, content=content, content_hash=content_hash(content), keywords=keywords, vector=None,
            text=indexed_text(content, keywords), updated_at=now,
        )
    if rest:
        await tx.update_memory(user_id, memory_id, **rest)


async def _set_aside(tx: StoreWriter, item: dict[str, Any], values: dict[str, Any], now: datetime) -> None:
    """Stored values a repair removes or rewrites, kept in a `set_aside` event of the row's user."""
    await tx.add_event(item["user_id"], EventKind.set_aside, now, payload={
        "table": item["table"], "id": item["id"], "why": item["why"], "row": values, "source": "repair",
    })


class Doctor:
    def __init__(self, settings: Settings, store: Store, embedder: Embedder, clock: Clock) -> None:
        self.settings, self.store, self.embedder, self.clock = settings, store, embedder, clock
        self.repairing = False

    async def _step(self, what: str, fn: Callable[[], Awaitable[T]], advice: str | None = None) -> T | None:
        try:
            return await fn()
        except Exception as exc:  # noqa: BLE001 - the doctor reports what it met, whatever it is
            log.debug("doctor: %s failed", what, exc_info=True)
            advice = advice or step_advice(self.settings, exc, self.repairing)
            self.problems.append(f"{what} failed ({type(exc).__name__}: {str(exc)[:200]}): {advice}")
            return None

    async def run(self, repair: bool = False) -> dict[str, Any]:
        self.problems: list[str] = []
        self.repairing = repair
        report: dict[str, Any] = {"database": self.settings.database_label, "repaired": []}
        if isinstance(self.store, SQLiteStore):
            report["repaired"] += self.store.rebuilt
        blocked = await self._step("checking that the store can be written", self._write_problems) or []
        self.problems += blocked
        if repair and blocked:
            self.problems.append(REPAIR_BLOCKED)
            repair = False
        if repair:
            recreated = await self._step("recreating missing tables and columns", self.store.repair_schema)
            report["repaired"] += recreated or []
        report["embedder"] = await self._embedder()
        lost = await self._step("checking whose vectors the store keeps", lambda: self._lost_record(report, repair))
        (report["repaired"] if repair else self.problems).extend(lost or [])
        if repair and isinstance(self.store, SQLiteStore):
            report["repaired"] += await self._repair_vectors(self.store, report["embedder"])
        schema = await self._step("checking the schema", self.store.schema_problems) or []
        self.problems += schema
        if repair:
            report["repaired"] += await self._step("mending the indexes", self.store.mend_indexes) or []
            report["repaired"] += await self._step("applying the core rule", self._apply_core_rule) or []
        store = await self._step("reading the store's health", self.store.health)
        report["store"] = store if store is not None else {"error": self.problems[-1]}
        if store is not None and isinstance(self.store, SQLiteStore):
            from pocketmem.store.sqlite.driver import sqlite_module

            # Apart from the index itself, which a fresh store creates only with its first memory.
            store["vector_extension"] = sqlite_module()[1]
        times = await self._step(
            "reading every stored time", lambda: self.store.check_instants(repair=repair, now=self.clock.now())
        )
        report["unreadable_times"] = times or []
        # Read once the schema is whole (with repair it is by now): a missing column is its own problem above.
        rows = None if schema else await self._step("reading every memory and profile row", lambda: self._rows(repair))
        report["unreadable_rows"] = rows or []
        memories = store.get("memories") if store is not None else None
        if repair:
            report["repaired"] += await self._step(
                "taking back the profile folders", lambda: adopt_lost_id(self.settings, self.store, memories)
            ) or []
        self.problems += await self._step(
            "checking the profile folders", lambda: folder_problems(self.settings, self.store, memories)
        ) or []
        self.problems += self._judge(report, repair)
        report["ok"] = not self.problems
        report["problems"] = self.problems
        return report

    async def _apply_core_rule(self) -> list[str]:
        demoted = await self.store.apply_core_rule(self.clock.now())
        return [f"{len(demoted)} todo, episode or context memories were core (persistence 1): each given the "
                f"persistence of its category ({', '.join(demoted)})"] if demoted else []

    async def _write_problems(self) -> list[str]:
        if not isinstance(self.store, SQLiteStore):
            return []
        return await self.store.write_problems(LOCK_WAIT)

    async def _rows(self, repair: bool) -> list[dict[str, Any]]:
        """Rows the reads leave out or export refuses (store.unreadable_rows); with repair, each mended or set aside
        inside one write transaction and given `repaired_to` (what was written; None when nothing would make it
        readable)."""
        if not repair:
            async with self.store.read() as reader:
                found = await reader.unreadable_rows()
        else:
            async with self.store.write() as tx:
                found = await tx.unreadable_rows()
                for item in found:
                    item["repaired_to"] = await self._mend(tx, item, self.clock.now())
        return [{k: v for k, v in item.items() if k not in ("key", "fixes", "row", "undecoded")} for item in found]

    @staticmethod
    async def _mend(tx: StoreWriter, item: dict[str, Any], now: datetime) -> dict[str, Any] | None:
        """A memory: the columns records.mend_memory names, its text untouched unless it is not UTF-8; a user: a name
        that is not UTF-8; a tombstone: its reason (records.mend_tombstone), since it keeps a purged memory from
        coming back. The stored bytes of a value that was not UTF-8 are kept in a `set_aside` event of its user. A
        profile section: emptied, its stored text kept as the revision's `previous` (`unreadable`). A profile
        file's earlier texts (pocketmem's own older versions of the file): none. Any other row (a pending candidate,
        an event, a revision, a use counter) is set aside: removed, every stored value of it kept in a `set_aside`
        event of its user."""
        table, user_id, key = item["table"], item["user_id"], item["id"]
        if "fixes" in item:
            fixes = item["fixes"]
            if fixes and table == "memories":
                await _mend_memory(tx, user_id, key, fixes, now)
            elif fixes:
                await tx.rewrite_row(table, item["key"], fixes)
            if fixes and "undecoded" in item:
                await _set_aside(tx, item, item["undecoded"], now)
            return fixes or None
        if "row" in item:
            await _set_aside(tx, item, item["row"], now)
            await tx.remove_row(table, item["key"])
            return {"set_aside_in": "memory_events"}
        if table == "profiles":
            await tx.put_profile(user_id, key, {}, now)
            await tx.insert_profile_revision(ProfileRevision(
                id=new_id(), user_id=user_id, section=key, previous={"unreadable": item["value"]}, new={},
                source="repair", created_at=now,
            ))
            await tx.add_event(user_id, EventKind.profile_updated, now,
                               payload={"section": key, "fields": [], "source": "repair"})
            return {"fields": {}}
        stored = await tx.get_profile_file(user_id, key)  # its earlier texts left out
        if stored is not None:
            await tx.put_profile_file(user_id, key, stored[0], stored[1], [], now)
        return {"earlier": []}

    async def _embedder(self) -> dict[str, Any]:
        try:
            vector = await self.embedder.embed("pocketmem doctor: 香菜 coriander")
            out: dict[str, Any] = {"tag": self.embedder.tag, "ok": True, "dimensions": len(vector)}
        except Exception as exc:  # noqa: BLE001 - the report says what failed
            out = {"tag": self.embedder.tag, "ok": False, "error": str(exc)}
        out["store_embedder"] = await self._step(
            "reading the store's embedder", lambda: self.store.get_meta(EMBEDDER_KEY)
        )
        self._note(out)
        waiting = await self._step("counting memories without a vector", self._missing_vectors)
        # Memories stored while the embedding endpoint was down; `serve` embeds them in the background.
        out["waiting_for_vectors"] = waiting if waiting is None or waiting < 1000 else "1000+"
        return out

    def _note(self, out: dict[str, Any]) -> None:
        """No problem, a note: a store the next `pocketmem serve` re-embeds by itself (docs/configuration.md,
        "Changing embedder")."""
        stored = out["store_embedder"]
        if stored is None or stored == self.embedder.tag or not upgrades(stored, self.embedder):
            return
        made = (
            "the store does not know which embedder made its vectors (its record was lost)"
            if stored == UNKNOWN
            else f"the store's vectors were made by {stored}"
        )
        out["note"] = (
            f"{made}: the next start of `pocketmem serve` re-embeds every memory with {self.embedder.tag} in the "
            "background (no command needed), or `pocketmem reindex` does it now"
        )

    async def _lost_record(self, report: dict[str, Any], repair: bool) -> list[str]:
        """Vectors that no record names (store_meta lost, an early release's store) are never taken for the
        configured embedder's: with repair the store is marked as keeping an UNKNOWN model's, which the next
        `pocketmem serve` re-embeds. The line for `repaired`, or without repair the problem."""
        embedder = report["embedder"]
        if embedder["store_embedder"] is not None:
            return []
        async with self.store.read() as reader:
            if not await reader.holds_vectors():
                return []
        if not repair:
            return [
                "the store keeps vectors but no record of the embedder that made them (its store_meta was lost, or an "
                "early release never wrote it): run `pocketmem doctor --repair`; it marks the store for re-embedding, "
                "which the next start of `pocketmem serve` does (or `pocketmem reindex`)"
            ]
        await self.store.set_meta(EMBEDDER_KEY, UNKNOWN)
        embedder["store_embedder"] = UNKNOWN
        self._note(embedder)
        return [
            "the store no longer recorded which embedder made its vectors: no model is assumed; it is marked for "
            "re-embedding, which the next start of `pocketmem serve` does with its embedder (or `pocketmem reindex` "
            "now); until then recall uses the keyword index"
        ]

    async def _missing_vectors(self) -> int:
        async with self.store.read() as reader:
            return len(await reader.missing_vectors(1000))

    async def _repair_vectors(self, store: SQLiteStore, embedder: dict[str, Any]) -> list[str]:
        """The vector index rebuilt from the vectors each memory keeps, when the configured embedder made them."""
        from pocketmem.store.sqlite.driver import sqlite_module

        if store.vectors_available or not sqlite_module()[1] or not embedder["ok"]:
            return []
        if embedder["store_embedder"] not in (None, embedder["tag"]):
            return []  # vectors of another model: `pocketmem reindex` re-embeds them

        async def rebuild() -> bool:
            await store.prepare_vectors(self.embedder.tag, int(embedder["dimensions"]))
            return True

        if not await self._step("rebuilding the vector index", rebuild, "run `pocketmem reindex`"):
            return []
        return ["the vector index was missing: rebuilt from the stored vectors"]

    def _judge(self, report: dict[str, Any], repair: bool) -> list[str]:
        problems: list[str] = []
        times, store, embedder = report["unreadable_times"], report["store"], report["embedder"]
        if times and not repair:
            problems.append(
                f"{len(times)} stored time(s) cannot be read back or lie outside the years 1000..9999 "
                "(listed under unreadable_times): run `pocketmem doctor --repair`"
            )
        rows = report["unreadable_rows"]
        if rows and not repair:
            problems.append(
                f"{len(rows)} stored row(s) cannot be read, each left out of its user's reads and export (listed "
                "under unreadable_rows): run `pocketmem doctor --repair`"
            )
        if unmended := [row for row in rows if repair and row["repaired_to"] is None]:
            problems.append(
                f"{len(unmended)} row(s) under unreadable_rows hold a value --repair cannot guess (a memory's status "
                f"or delete reason no version writes): {restore_advice(self.settings)}"
            )
        if "error" not in store:
            if store["integrity"] != "ok":
                problems.append(f"integrity_check: {store['integrity']}: {rebuild_advice(self.settings, repair)}")
            problems += vector_problems(report, postgres=self.settings.database_url is not None)
            if gaps := store["keyword_gaps"]:
                has, them = ("has", "it") if gaps == 1 else ("have", "them")
                problems.append(
                    f"{gaps} of {store['memories']} memories {has} no keyword row (a recall by an exact word misses "
                    f"{them}): run `pocketmem doctor --repair`"
                )
            if bad := store["bad_vectors"]:
                problems.append(
                    f"{bad} of {store['memories']} memories keep a vector that cannot be read (not a float32 vector "
                    "of the store's size): recall leaves them out of its vector side; run `pocketmem doctor --repair` "
                    "(it clears them, and `pocketmem serve` embeds them again)"
                )
            if core := store["short_lived_core"]:
                problems.append(
                    f"{core} todo, episode or context memories are core (persistence 1), which no write may make "
                    "(listed among the core memories on every message, never expiring): run `pocketmem doctor "
                    "--repair` to give each the persistence of its category"
                )
            if store["keyword_orphans"] or store["vector_mismatches"] or store["count_mismatches"]:
                problems.append("the indexes disagree with the memories table: run `pocketmem doctor --repair`")
            if not store["schema_current"]:
                problems.append("the schema is not current: open the store once with write access to migrate it")
        if not embedder["ok"]:
            problems.append(f"embedder: {embedder['error']}")
        stored = embedder["store_embedder"]
        if stored is not None and stored != embedder["tag"] and "note" not in embedder:
            problems.append(
                f"the store's vectors were made by {stored}, not by the configured embedder {embedder['tag']}: "
                "run `pocketmem reindex` to re-embed every memory, or set POCKETMEM_EMBEDDER and "
                "POCKETMEM_EMBED_MODEL back"
            )
        return problems
