"""Vectors computed later: memories stored while the embedding endpoint was down get theirs here.

A write never waits for, or fails because of, an OpenAI-compatible embedding endpoint that is down
(seed 004: 向量入库队列重试（指数退避）). Lifecycle stores such a memory without a vector; the keyword
index has it at once, so recall finds it by its words. This queue then embeds it:

    work list  memories whose vector is missing (the store's `missing_vectors`), so the queue survives a
               restart with no table of its own: whatever was left is found again on the next start
    batches    at most BATCH memories per request to the endpoint
    backoff    after a failure, wait FIRST_DELAY seconds, doubling up to MAX_DELAY; a success resets it
    bounded    a memory whose batch failed MAX_ATTEMPTS times is set aside until the next start (or
               `pocketmem reindex`), so one text the endpoint rejects cannot hold up the others forever

Vectors are written only where the memory still has none (a patch meanwhile brings its own).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from pocketmem.base.progress import Progress, no_progress
from pocketmem.providers.embeddings import Embedder
from pocketmem.service.rows import embedding_text
from pocketmem.store.roles import VectorStore

log = logging.getLogger(__name__)

BATCH = 32
FIRST_DELAY = 1.0
MAX_DELAY = 300.0
MAX_ATTEMPTS = 8


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
        embedder: Embedder,
        *,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.state = QueueState()
        self._sleep = sleep
        self._wake = anyio.Event()

    def wake(self) -> None:
        """A memory was just stored without a vector: try now, unless backing off after a failure."""
        self._wake.set()

    async def _batch(self, after: int) -> list[tuple[int, str, str, str, list[str]]]:
        async with self.store.read() as reader:
            rows = await reader.missing_vectors(BATCH * 2, after)
        return rows

    async def run_once(self, progress: Progress = no_progress) -> int:
        """Embed every memory still without a vector (except those set aside). Returns how many got one.
        Raises the embedder's error when the endpoint fails; what was done before it is kept."""
        done = 0
        after = 0
        while True:
            rows = await self._batch(after)
            if not rows:
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
            await self.store.write_vectors(
                [(user, mid, vec) for (_, user, mid, _, _), vec in zip(work, vectors, strict=True)],
                self.embedder.tag,
                only_missing=True,
            )
            for _, _, mid, _, _ in work:
                self.state.attempts.pop(mid, None)
            done += len(work)
            self.state.embedded += len(work)
            progress(done, None)

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
