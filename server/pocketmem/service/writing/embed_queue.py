"""Vectors computed later: memories stored while the embedding endpoint was down get theirs here.

A write never waits for, or fails because of, an OpenAI-compatible embedding endpoint that is down
(docs/recall-safety.md §1, "Degradation": retried with exponential backoff). The write path stores such a
memory without a vector; the keyword index has it at once, so recall finds it by its words. This queue then embeds it:

    work list  memories whose vector is missing (the store's `missing_vectors`), so the queue survives a
               restart with no table of its own: whatever was left is found again on the next start
    batches    at most BATCH memories per request to the endpoint
    backoff    after a failure, wait FIRST_DELAY seconds, doubling up to MAX_DELAY; a success resets it
    bounded    a memory whose batch failed MAX_ATTEMPTS times is set aside until the next start (or
               `pocketmem reindex`), so one text the endpoint rejects cannot hold up the others forever

Vectors are written only where the memory still has none (a patch meanwhile brings its own), and only in a
transaction that finds the store recording this embedder (vectors.py, `agree_in`): a queue whose store records
another embedder's vectors (another process switched it) writes none.

Re-embedding a whole store (`pocketmem reindex`, or the first start of `pocketmem serve` after an upgrade from
the built-in `hash` embedder to the default `use`: vectors.py, `upgrades`) is the same work list: `begin` empties
the vector index and records the new embedder in one transaction, then the run in store_meta (`reembed`: from,
to, total, done), and the queue fills every vector. A crash half-way loses nothing: the memories still without a
vector are the rest of the work, found again on the next start. Until the run is done recall answers through the
word path and says so (`reembedding`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, replace

import anyio

from pocketmem.base.progress import Progress, no_progress
from pocketmem.service.shared.rows import embedding_text
from pocketmem.service.writing.vectors import Vectors
from pocketmem.store.base import VectorStore

log = logging.getLogger(__name__)

BATCH = 32
FIRST_DELAY = 1.0
MAX_DELAY = 300.0
MAX_ATTEMPTS = 8
REEMBED_KEY = "reembed"
LOG_EVERY = 1000  # a re-embedding run logs its progress every this many memories


@dataclass
class Reembed:
    """A run re-embedding every memory (kept in store_meta under REEMBED_KEY)."""

    source: str | None  # the tag of the vectors replaced (None: a store without one)
    target: str
    total: int
    done: int = 0
    finished: bool = False

    def note(self) -> str:
        return (
            f"re-embedding memories with {self.target}: {self.done} of {self.total} done; "
            "until it finishes recall uses the keyword index alone"
        )


@dataclass
class QueueState:
    """What the queue knows between passes (in memory: a restart starts afresh from the store)."""

    delay: float = 0.0  # seconds to wait before the next attempt; 0 when the last pass succeeded
    failures: int = 0  # consecutive failed passes
    embedded: int = 0  # vectors written since start
    last_error: str | None = None
    attempts: dict[str, int] = field(default_factory=dict)  # memory id -> failed batches it was in
    set_aside: set[str] = field(default_factory=set)


class EmbedQueue:
    def __init__(
        self,
        store: VectorStore,
        vectors: Vectors,
        *,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.store = store
        self.vectors = vectors
        self.embedder = vectors.embedder
        self.state = QueueState()
        self._sleep = sleep
        self._wake = anyio.Event()
        self.reembed: Reembed | None = None

    @property
    def reembedding(self) -> str | None:
        """What recall's `degraded` says while a re-embedding run is under way; None otherwise."""
        run = self.reembed
        return run.note() if run is not None and not run.finished and run.target == self.embedder.tag else None

    async def load(self) -> Reembed | None:
        """The store's last re-embedding run (on open: an unfinished one is resumed by the next pass)."""
        stored = await self.store.get_meta(REEMBED_KEY)
        self.reembed = Reembed(**json.loads(stored)) if stored else None
        return self.reembed

    async def begin(self, source: str | None, total: int) -> Reembed:
        """Empty the vector index for this embedder and record a run over `total` memories, in one transaction; the
        passes fill it. Where another process began the same run since `source` was read (two servers starting
        together on an old store), its run is joined, not begun again from zero."""
        dimensions = self.embedder.dimensions or len(await self.embedder.embed("pocketmem"))
        run = Reembed(source=source, target=self.embedder.tag, total=total)
        if not await self.store.rebuild_vectors(self.embedder.tag, dimensions, source, json.dumps(asdict(run))):
            log.info("re-embedding with %s: joining the run another process began", self.embedder.tag)
            self.reembed = await self.load() or replace(run, total=0, finished=True)
            return self.reembed
        self.reembed = run
        log.info("re-embedding %d memories with %s (replacing %s)", total, self.embedder.tag, source or "nothing")
        return run

    async def _save(self) -> None:
        assert self.reembed is not None
        await self.store.set_meta(REEMBED_KEY, json.dumps(asdict(self.reembed)))

    async def _advance(self, count: int, progress: Progress) -> None:
        run = self.reembed
        if run is None or run.finished or run.target != self.embedder.tag:
            progress(self.state.embedded, None)  # vectors an import or an outage left: no known total
            return
        before = run.done
        async with self.store.write() as tx:  # counted in the store: another process may share the run
            stored = await tx.meta(REEMBED_KEY)
            run.done = min(run.total, (Reembed(**json.loads(stored)).done if stored else run.done) + count)
            await tx.put_meta(REEMBED_KEY, json.dumps(asdict(run)))
        progress(run.done, run.total)
        if run.done // LOG_EVERY != before // LOG_EVERY:
            log.info("re-embedding with %s: %d of %d memories done", run.target, run.done, run.total)

    async def _finish(self) -> None:
        run = self.reembed
        if run is None or run.finished or run.target != self.embedder.tag or self.state.set_aside:
            return
        run.done, run.finished = run.total, True
        await self._save()
        log.info("re-embedding with %s finished: %d memories", run.target, run.total)

    def wake(self) -> None:
        """A memory was just stored without a vector: try now, unless backing off after a failure."""
        self._wake.set()

    async def _batch(self, after: int) -> list[tuple[int, str, str, str, list[str]]]:
        async with self.store.read() as reader:
            rows = await reader.missing_vectors(BATCH * 2, after)
        return rows

    async def run_once(self, progress: Progress = no_progress) -> int:
        """Embed every memory still without a vector (except those set aside). Returns how many got one.
        Raises the embedder's error when the endpoint fails; what was done before it is kept. While the store
        records another embedder's vectors it embeds nothing: a process with that embedder computes them."""
        if await self.vectors.look() is not None:
            return 0
        done = 0
        after = 0
        while True:
            rows = await self._batch(after)
            if not rows:
                await self._finish()
                return done
            after = rows[-1][0]
            work = [r for r in rows if r[2] not in self.state.set_aside][:BATCH]
            if not work:
                continue
            after = work[-1][0]
            try:
                texts = [embedding_text(content, kws) for _, _, _, content, kws in work]
                vectors = await self.embedder.embed_many(texts)
            except Exception:
                self._count_failure([r[2] for r in work])
                raise
            # The endpoint was down when the store opened: the vector index waits for the first vector's size.
            await self.store.ensure_vectors(self.embedder.tag, len(vectors[0]))
            async with self.store.write() as tx:
                await tx.lock_users(user for _, user, _, _, _ in work)
                if not await self.vectors.agree_in(tx):  # switched to another embedder meanwhile
                    log.warning("vectors not written: %s", self.vectors.note() or "the store records no embedder")
                    return done
                await tx.write_vectors(
                    [(user, mid, vec) for (_, user, mid, _, _), vec in zip(work, vectors, strict=True)],
                    self.embedder.tag,
                    only_missing=True,
                )
            for _, _, mid, _, _ in work:
                self.state.attempts.pop(mid, None)
            done += len(work)
            self.state.embedded += len(work)
            await self._advance(len(work), progress)

    def _count_failure(self, ids: list[str]) -> None:
        for mid in ids:
            self.state.attempts[mid] = self.state.attempts.get(mid, 0) + 1
            if self.state.attempts[mid] >= MAX_ATTEMPTS:
                self.state.set_aside.add(mid)
                log.warning("memory %s set aside after %d failed embedding attempts", mid, MAX_ATTEMPTS)

    async def attempt(self) -> bool:
        """One pass with the backoff bookkeeping: True when nothing is left to do (for now)."""
        try:
            await self.run_once()
        except Exception as exc:  # noqa: BLE001 - the background task never dies; it retries later
            self.state.failures += 1
            self.state.last_error = str(exc)
            self.state.delay = min(MAX_DELAY, FIRST_DELAY * math.pow(2, self.state.failures - 1))
            log.warning("embedding later failed (%s); next try in %.0fs", exc, self.state.delay)
            return False
        self.state.failures = 0
        self.state.delay = 0.0
        self.state.last_error = None
        return True

    async def run_forever(self) -> None:
        """The background task: a pass at start (what an earlier run left), then on every wake-up, and after a
        failure again after the backoff delay."""
        while True:
            self._wake = anyio.Event()
            await self.attempt()
            if self.state.delay > 0:
                await self._sleep(self.state.delay)
            else:
                await self._wake.wait()
