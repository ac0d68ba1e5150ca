"""Large-library recall (docs/postgres-and-sync.md, "Large-library recall"): the notebook asks the cloud library
for what it evicted or never held.

The library is asked at the same time as the notebook, within POCKETMEM_LIBRARY_TIMEOUT (300 ms
by default). Its hits that the notebook does not hold (or holds only as evicted) and has not
deleted are ranked with the same rules and follow the notebook's own hits ("local first").
A library that is slow or down costs recall nothing but that budget: the question is left to
finish (or fail) in the background, and after a failure the library is left alone for a while. A
failure within the budget (the library down, or a row of it that cannot be read) is named in the
recall's `degraded`, so an empty answer never hides it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from pocketmem.base.clock import monotonic
from pocketmem.base.config import Settings
from pocketmem.base.models import DeleteReason, Status
from pocketmem.core.ranking import Ranked
from pocketmem.store.base import Store

log = logging.getLogger(__name__)

REST_AFTER_FAILURE = 30.0  # seconds the library is not asked after it failed


@dataclass
class LibraryHits:
    """The library's answer: its ranked hits, and what went wrong when they are missing or partial."""

    ranked: list[Ranked] = field(default_factory=list)
    problem: str | None = None


class LibraryRecall:
    def __init__(self, settings: Settings, local: Store, library: Store, embed_tag: str) -> None:
        self.settings = settings
        self.local = local
        self.cloud = library  # the cloud library's store
        self.embed_tag = embed_tag
        self._resting_until = 0.0
        self._compatible: bool | None = None
        self._background: set[asyncio.Task[LibraryHits]] = set()

    @property
    def enabled(self) -> bool:
        return self.settings.library_timeout > 0 and monotonic() >= self._resting_until

    def ask(self, search: Callable[[], Awaitable[LibraryHits]]) -> LibraryAnswer | None:
        """Start asking the library now; None when it is not to be asked."""
        if not self.enabled:
            return None
        task = asyncio.get_running_loop().create_task(self._guarded(search))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return LibraryAnswer(task, monotonic() + self.settings.library_timeout)

    async def _guarded(self, search: Callable[[], Awaitable[LibraryHits]]) -> LibraryHits:
        try:
            if self._compatible is None:
                tag = await self.cloud.get_meta("embedder")
                self._compatible = tag is None or tag == self.embed_tag
                if not self._compatible:
                    log.warning(
                        "the cloud library is embedded by %s, not %s: recall does not ask it", tag, self.embed_tag
                    )
            if not self._compatible:
                return LibraryHits()
            return await search()
        except Exception as exc:  # noqa: BLE001 - the library is an extra; recall answers without it
            log.warning("the cloud library did not answer recall: %s", exc)
            self._resting_until = monotonic() + REST_AFTER_FAILURE
            return LibraryHits(problem=str(exc) or type(exc).__name__)

    async def new_to_the_notebook(self, user_id: str, ranked: Sequence[Ranked]) -> list[Ranked]:
        """The library's hits the notebook neither holds (unless evicted) nor has deleted."""
        ids = [r.memory.id for r in ranked]
        if not ids:
            return []
        async with self.local.read() as reader:
            held = {m.id: m for m in await reader.get_memories(user_id, ids)}
            tombstones = await reader.tombstones_for(user_id, ids)
        deleted = {t.memory_id for t in tombstones if t.restored_at is None and t.reason != DeleteReason.evicted}
        out = []
        for r in ranked:
            mine = held.get(r.memory.id)
            if r.memory.id in deleted:
                continue
            if mine is not None and not (mine.status == Status.trashed and mine.delete_reason == DeleteReason.evicted):
                continue
            out.append(r)
        return out


class LibraryAnswer:
    def __init__(self, task: asyncio.Task[LibraryHits], deadline: float) -> None:
        self._task = task
        self._deadline = deadline

    async def result(self) -> LibraryHits:
        """The library's answer if it came within the budget, else none (the task runs on alone)."""
        remaining = self._deadline - monotonic()
        if not self._task.done() and remaining > 0:
            await asyncio.wait({self._task}, timeout=remaining)
        if not self._task.done():
            return LibraryHits()
        return self._task.result()
