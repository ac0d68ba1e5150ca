"""PocketMem: settings -> store + embedder + clock, wired into the services.

The one object the MCP server's lifespan and the CLI open. Opening is cheap (SQLite file,
migrations, no model loading), so the MCP handshake is never held up.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pocketmem.base.clock import Clock, SystemClock
from pocketmem.base.config import Settings
from pocketmem.base.errors import EmbedderMismatch, NotFound
from pocketmem.base.models import EventKind
from pocketmem.base.progress import Progress, no_progress
from pocketmem.base.results import MemoryRecord, MemoryView, RevisionView
from pocketmem.core.scoring import importance_now
from pocketmem.core.text import shown_language
from pocketmem.providers.embeddings import Embedder, make_embedder
from pocketmem.service.extraction.extraction import Extraction
from pocketmem.service.manage.listing import Listing
from pocketmem.service.profile.profile import Profile
from pocketmem.service.profile.profile_files import ProfileFiles
from pocketmem.service.profile.project_summary import ProjectSummary
from pocketmem.service.recall.library import LibraryRecall
from pocketmem.service.recall.retrieval import Retrieval, warm_up
from pocketmem.service.shared.calibration import Calibration
from pocketmem.service.shared.usercard import render_user_card, temporary_card
from pocketmem.service.upkeep.maintenance import Maintenance
from pocketmem.service.upkeep.review import Review
from pocketmem.service.upkeep.todos import Todos
from pocketmem.service.writing.embed_queue import EmbedQueue
from pocketmem.service.writing.patching import Patching
from pocketmem.service.writing.pending import Pending
from pocketmem.service.writing.trash import Trash
from pocketmem.service.writing.vectors import EMBEDDER_KEY, UNKNOWN, Vectors, upgrades
from pocketmem.service.writing.writing import Writing
from pocketmem.store.base import Store
from pocketmem.store.sqlite.faults import StorageFault
from pocketmem.store.sqlite.store import SQLiteStore

if TYPE_CHECKING:
    from pocketmem.service.manage.browse import Browse
    from pocketmem.service.manage.curation import Curation
    from pocketmem.service.profile.context import ContextBuilder
    from pocketmem.service.transfer.exporting import Exporter
    from pocketmem.service.transfer.sync import Sync

log = logging.getLogger(__name__)


def make_library(settings: Settings) -> Store | None:
    """The cloud library named by POCKETMEM_CLOUD_URL, opened without waiting for it."""
    if settings.cloud_url is None:
        return None
    from pocketmem.store.postgres.store import PostgresStore  # imported only when a PostgreSQL store is named

    return PostgresStore(
        settings.cloud_url.get_secret_value(), pool_size=min(settings.pg_pool_size, 4), wait=False,
        timeout=settings.cloud_timeout, setting="POCKETMEM_CLOUD_URL",
    )


def make_store(settings: Settings, *, wait: float | None = None) -> Store:
    """PostgreSQL when POCKETMEM_DATABASE_URL is set, else the SQLite file; `wait`: how long a SQLite connection
    waits for another process's lock (default: the writers' busy timeout; the doctor waits less)."""
    if settings.database_url is not None:
        from pocketmem.store.postgres.store import PostgresStore  # imported only when a PostgreSQL store is named

        return PostgresStore(settings.database_url.get_secret_value(), pool_size=settings.pg_pool_size)
    setting = settings.db_setting()
    if wait is None:
        return SQLiteStore(settings.db_path, setting=setting)
    return SQLiteStore(settings.db_path, wait=wait, setting=setting)


class PocketMem:
    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock | None = None,
        store: Store | None = None,
        embedder: Embedder | None = None,
        library: Store | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.store = store or make_store(settings)
        self.embedder = embedder or make_embedder(settings)
        self.calibration = Calibration(self.store, self.embedder)
        # A memory's life: each job one service (docs/architecture.md, "The write path and a memory's life").
        self.vectors = Vectors(self.store, self.embedder, self.calibration)
        self.trash = Trash(settings, self.store, self.clock)
        self.writing = Writing(settings, self.store, self.clock, self.vectors, self.trash)
        self.patching = Patching(settings, self.store, self.clock, self.vectors)
        self.listing = Listing(settings, self.store, self.clock)
        # The profile layer: persona and identity, the Markdown files, the context package.
        self.profile = Profile(settings, self.store, self.clock)
        self.pending = Pending(self.store, self.clock, self.writing, self.profile.confirm_change)
        # Memories stored while the embedding endpoint was down get their vectors here, in the background.
        self.embed_queue = EmbedQueue(self.store, self.vectors)
        self.vectors.when_deferred(self.embed_queue.wake)
        # The cloud library (POCKETMEM_CLOUD_URL): synced with, and asked by recall for what the notebook lacks.
        self.library: Store | None = library or make_library(settings)
        library_recall = (
            LibraryRecall(settings, self.store, self.library, self.embedder.tag) if self.library is not None else None
        )
        self.retrieval = Retrieval(settings, self.store, self.vectors, self.clock, library=library_recall)
        self.retrieval.vectors_pending = lambda: self.embed_queue.reembedding
        self.maintenance = Maintenance(settings, self.store, self.clock, self.trash)
        self.review = Review(settings, self.store, self.clock, self.trash)
        self.todos = Todos(settings, self.store, self.clock)
        self.extraction = Extraction(settings, self.store, self.writing, self.patching, self.retrieval, self.clock)
        self.sync: Sync | None = None
        if self.library is not None:
            from pocketmem.service.transfer.sync import Sync  # imported only when a cloud library is named

            self.sync = Sync(settings, self.store, self.library, self.trash, self.vectors, self.clock)
        self.extraction.propose_profile = self.profile.update  # remember_conversation's PROFILE operations
        self.profile_files = ProfileFiles(settings, self.store, self.profile, self.writing, self.patching, self.clock)
        self.project_summary = ProjectSummary(settings, self.store, self.clock)
        self.profile_files.summary = self.project_summary
        self.retrieval.files_check = self.profile_files.check  # the recall tool's one call (retrieval.answer)
        self.retrieval.onboarding = self.profile.onboarding
        self._opened = 0
        self._open_lock = asyncio.Lock()

    # -- built on first use: a server's handshake needs none of these, so their modules load after it ------------
    @cached_property
    def browse(self) -> Browse:
        from pocketmem.service.manage.browse import Browse  # the management page's lists: loaded on first use

        return Browse(self.settings, self.store, self.clock, self.retrieval)

    @cached_property
    def curation(self) -> Curation:
        from pocketmem.service.manage.curation import Curation  # the management page's edits: loaded on first use

        return Curation(self.settings, self.store, self.clock, self.writing)

    @cached_property
    def exporter(self) -> Exporter:
        from pocketmem.service.transfer.exporting import Exporter  # export and import: loaded on first use

        return Exporter(self.settings, self.store, self.embedder, self.clock, self.trash, self.vectors)

    @cached_property
    def context(self) -> ContextBuilder:
        from pocketmem.service.profile.context import ContextBuilder  # the prompt's context package: on first use

        return ContextBuilder(
            self.settings, self.store, self.clock, self.retrieval, self.profile, self.profile_files
        )

    # -- lifetime -------------------------------------------------------------------------------
    async def open(self, *, serving: bool = False, warm: bool = True) -> None:
        """Open the store (refcounted: each MCP connection may open and close it). With `warm`, the text tools
        start loading in a worker thread at once; a server passes False and calls warm_up after its handshake.

        `serving`: `pocketmem serve`, the one process that takes the store for its embedder on start
        (`_take_store`). Every other opening leaves the store's embedder and vectors as they are; when they are
        another embedder's, it uses none (service/writing/vectors.py) and says so."""
        async with self._open_lock:
            if self._opened == 0:
                if warm:
                    self._warming = asyncio.get_running_loop().run_in_executor(None, warm_up)
                await self.store.open()
                try:
                    if serving:
                        await self._take_store()
                    if (note := await self.vectors.look()) is not None:
                        log.log(logging.WARNING if serving else logging.INFO, "%s", note)
                    await self.embed_queue.load()  # a re-embedding run left unfinished goes on
                    if self.library is not None:
                        await self.library.open()  # without waiting: the library may be down at start-up
                except BaseException:
                    await self.store.close()
                    raise
            self._opened += 1

    async def warm_up(self) -> None:
        """Load the segmenter, the tagger and the background frequencies in a worker thread (about a second), then
        the embedder's model, so the first recall or write does not pay for them; meanwhile connect to the cloud
        library and check its embedder. A server calls it after its handshake; a call that comes first loads what
        it needs itself."""
        library = self.retrieval.library
        connecting = asyncio.ensure_future(library.prepare()) if library is not None else None
        await asyncio.get_running_loop().run_in_executor(None, warm_up)
        await self.embedder.warm_up()
        if connecting is not None:
            await connecting

    async def close(self) -> None:
        async with self._open_lock:
            self._opened = max(0, self._opened - 1)
            if self._opened == 0:
                try:
                    await self.retrieval.uses.flush()  # a clean shutdown keeps every use count
                except Exception:  # noqa: BLE001 - closing goes on; the log says what was lost
                    log.exception("recall bookkeeping of %d recalls could not be written", self.retrieval.uses.pending)
                await self.store.close()
                if self.library is not None:
                    await self.library.close()
                await self.embedder.aclose()
                await self.extraction.aclose()
                await self.project_summary.aclose()

    async def __aenter__(self) -> PocketMem:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _take_store(self) -> None:
        """The server's start: a store without vectors records this embedder; one whose vectors another built-in
        embedder made, or a model no record names, is re-embedded in the background (embed_queue.py); another
        embedder's store is refused (vectors.py, `upgrades`: the rule). A store that cannot be written (a
        read-only mount) is served as it is: recall through the keyword index, saying why."""
        stored = await self.store.get_meta(EMBEDDER_KEY)
        if stored is None and await self._holds_vectors():
            stored = UNKNOWN  # vectors no record names (store_meta lost, an early release): never taken for ours
        if stored is not None and stored != self.embedder.tag and not upgrades(stored, self.embedder):
            raise EmbedderMismatch(
                f"this store's vectors were made by {stored}, but the configured embedder is {self.embedder.tag}; "
                "vectors of two models never mix. Run `pocketmem reindex` to re-embed every memory with the "
                "configured embedder, or set POCKETMEM_EMBEDDER / POCKETMEM_EMBED_MODEL back."
            )
        try:
            if stored is not None and stored != self.embedder.tag:
                await self.embed_queue.begin(stored, await self._memory_total())
            elif self.embedder.dimensions is not None:
                await self.store.ensure_vectors(self.embedder.tag, self.embedder.dimensions)
            # Otherwise the index is created when the endpoint first tells the vector size.
        except StorageFault as exc:
            if exc.kind != "read-only":
                raise
            log.warning("the store keeps its embedder as it is: %s", exc)

    # -- views ----------------------------------------------------------------------------------
    async def get_memory(self, user_id: str, memory_id: str) -> dict[str, Any]:
        """memory_record as JSON, its instants as stored (UTC): `pocketmem show`, the resource's fingerprint."""
        return (await self.memory_record(user_id, memory_id)).model_dump(mode="json")

    async def memory_record(self, user_id: str, memory_id: str) -> MemoryRecord:
        async with self.store.read() as reader:
            memory = await reader.get_memory(user_id, memory_id)
            if memory is None:
                raise NotFound(f"no memory with id {memory_id!r}")
            revisions = await reader.list_revisions(user_id, memory_id)
        view = MemoryView.of(memory, importance_now(memory, self.clock.now()))
        return MemoryRecord(**dict(view), revisions=[RevisionView.of(r) for r in revisions])

    async def user_card(self, user_id: str) -> str:
        if self.settings.temporary:
            return temporary_card(shown_language(self.settings.locale, ""))
        await self.profile_files.check(user_id)  # a person's edit of User.md shows at once
        return await render_user_card(self.store, user_id, self.settings, self.clock.now())

    async def stats(self, user_id: str) -> dict[str, Any]:
        async with self.store.read() as reader:
            stats = await reader.stats(user_id)
        active = stats.by_status.get("active", 0)
        return {
            "user": user_id,
            "active": active,
            "core": stats.core,
            "superseded": stats.by_status.get("superseded", 0),
            "trashed": stats.by_status.get("trashed", 0),
            "pending": stats.pending,
            "max_active": self.settings.max_active,
            "by_category": stats.by_category,
            "tombstones": stats.tombstones,
            "revisions": stats.revisions,
            "events": stats.events,
            "oldest": stats.oldest,
            "newest": stats.newest,
            "embedder": self.embedder.tag,
            "database": self.settings.database_label,
            **({"sync": await self.sync.status(user_id)} if self.sync is not None else {}),
            **({"skipped": [{"user_id": user_id, "why": why} for why in stats.unreadable]} if stats.unreadable else {}),
        }

    # -- maintenance ------------------------------------------------------------------------------
    async def reindex(self, progress: Progress = no_progress) -> int:
        """Re-embed every memory with the configured embedder and rebuild the vector index (embed_queue.py); a run
        left unfinished (a crash, or the re-embedding after an upgrade) is resumed where it stopped."""
        run = await self.embed_queue.load()
        stored = await self.store.get_meta(EMBEDDER_KEY)
        if run is None or run.finished or run.target != self.embedder.tag or stored != self.embedder.tag:
            await self.embedder.embed("pocketmem")  # the embedder answers before the old vectors are dropped
            run = await self.embed_queue.begin(stored, await self._memory_total())
        progress(run.done, run.total)
        await self.embed_queue.run_once(progress)
        async with self.store.write(user_id=self.settings.user) as tx:
            await tx.add_event(self.settings.user, EventKind.reindexed, self.clock.now(),
                               payload={"embedder": self.embedder.tag, "memories": run.total})
        self.calibration.reset()
        return run.total

    async def _holds_vectors(self) -> bool:
        async with self.store.read() as reader:
            return await reader.holds_vectors()

    async def _memory_total(self) -> int:
        async with self.store.read() as reader:
            total = 0
            for user in await reader.user_ids():
                total += sum((await reader.stats(user)).by_status.values())
            return total

    async def doctor(self, repair: bool = False) -> dict[str, Any]:
        """Every check of service/upkeep/doctor.py; a problem is a line of the report (`problems`), never an error."""
        from pocketmem.service.upkeep.doctor import Doctor  # the doctor's checks load when it runs, not at start

        report = await Doctor(self.settings, self.store, self.embedder, self.clock).run(repair=repair)
        try:
            run = await self.embed_queue.load()
        except Exception:  # noqa: BLE001 - a store_meta that cannot be read is among the report's problems
            log.debug("the re-embedding run cannot be read", exc_info=True)
            run = None
        if run is not None and not run.finished:  # re-embedding after an upgrade, resumed by `serve`
            report["embedder"]["reembedding"] = {"to": run.target, "done": run.done, "total": run.total}
        return report


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=_plain)


def _plain(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)
