"""Large-library recall (docs/postgres-and-sync.md, "Large-library recall"): the notebook asks the cloud library
for what it evicted or never held.

The library is asked at the same time as the notebook and waited for at most POCKETMEM_LIBRARY_TIMEOUT
(300 ms by default) once the question is encoded (its search needs the query's vectors, as the notebook's
does). Its hits that the notebook does not hold (or holds only as evicted) and has not deleted are ranked
with the same rules and follow the notebook's own hits ("local first"). A library that is slow or down costs
recall nothing but that budget: the question is left to finish (or fail) in the background, and after a
failure the library is left alone for a while. Whenever its hits are missing, the recall's `degraded` says
why: a failure (the library down, or a row of it that cannot be read), no answer within the budget (with why
the last attempt to connect failed, when one did), or the rest after a failure; an empty answer never hides it.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pocketmem.base.clock import monotonic
from pocketmem.base.config import Settings, redact
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
        self._failure = ""  # why it rests
        self._compatible: bool | None = None
        self._background: set[asyncio.Task[LibraryHits]] = set()

    def ask(self, search: Callable[[], Awaitable[LibraryHits]], ready: asyncio.Future[Any]) -> LibraryAnswer | None:
        """Start asking the library now; `ready` is the question's encoding, after which its budget runs. None when
        recall asks only the notebook (POCKETMEM_LIBRARY_TIMEOUT=0); while the library rests after a failure it is
        not asked, and the answer says so."""
        budget = self.settings.library_timeout
        if budget <= 0:
            return None
        resting = self._resting_until - monotonic()
        if resting > 0:
            return LibraryAnswer(budget, problem=f"not asked for {math.ceil(resting)} s more, after it failed: "
                                 f"{self._failure}")
        task = asyncio.get_running_loop().create_task(self._guarded(search))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return LibraryAnswer(budget, task, ready, lambda: self.cloud.connect_error)

    async def prepare(self) -> None:
        """Connect and check the library's embedder before the first recall needs it (a server's warm-up); a
        failure lets it rest as a failed question would."""
        await self._guarded(_nothing)

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
            url = self.settings.cloud_url.get_secret_value() if self.settings.cloud_url is not None else None
            self._failure = redact(str(exc), url) or type(exc).__name__
            log.warning("the cloud library did not answer: %s", self._failure)
            self._resting_until = monotonic() + REST_AFTER_FAILURE
            return LibraryHits(problem=self._failure)

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
    """The library's answer to one recall: awaited for at most `budget` seconds once `ready` (the question's
    encoding) is done; or, when it was not asked, why."""

    def __init__(
        self, budget: float, task: asyncio.Task[LibraryHits] | None = None, ready: asyncio.Future[Any] | None = None,
        late: Callable[[], str | None] = lambda: None, problem: str | None = None,
    ) -> None:
        self._budget = budget
        self._task = task
        self._late = late  # why it may be late: the last attempt to connect failed
        self._problem = problem
        self._deadline = monotonic() + budget
        if ready is not None and not ready.done():
            ready.add_done_callback(self._start_clock)

    def _start_clock(self, _: object) -> None:
        self._deadline = monotonic() + self._budget

    async def result(self) -> LibraryHits:
        """The library's answer if it came within the budget, else none and why (the task runs on alone)."""
        if self._task is None:
            return LibraryHits(problem=self._problem)
        remaining = self._deadline - monotonic()
        if not self._task.done() and remaining > 0:
            await asyncio.wait({self._task}, timeout=remaining)
        if self._task.cancelled():
            return LibraryHits(problem="its question was withdrawn")
        if not self._task.done():
            why = self._late()
            return LibraryHits(problem=f"no answer within {self._budget:g} s"
                               + (f" (the last attempt to connect failed: {why})" if why else ""))
        return self._task.result()


async def _nothing() -> LibraryHits:
    return LibraryHits()
