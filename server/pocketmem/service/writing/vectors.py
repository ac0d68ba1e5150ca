"""Embedding on the write path: a memory's vector, computed before its write transaction.

The first vector also readies what the duplicate check inside a transaction needs (the similarity
scale and the same-fact thresholds, which are measured and stored outside any write lock) and the
store's vector index for the vector's size.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from pocketmem.base.errors import ProviderUnavailable
from pocketmem.providers.embeddings import Embedder
from pocketmem.service.shared.calibration import Calibration
from pocketmem.service.shared.rows import embedding_text
from pocketmem.service.shared.sameness import Sameness
from pocketmem.store.base import VectorStore

log = logging.getLogger(__name__)


class Vectors:
    def __init__(self, store: VectorStore, embedder: Embedder, calibration: Calibration) -> None:
        self.store = store
        self.embedder = embedder
        self.calibration = calibration
        self.sameness = Sameness(store, embedder)
        self._deferred: Callable[[], None] = lambda: None

    def when_deferred(self, callback: Callable[[], None]) -> None:
        """Call `callback` whenever a memory was stored without a vector (the app passes the embed queue's wake-up)."""
        self._deferred = callback

    def deferred(self) -> None:
        """A memory was stored without a vector: tell whoever computes it later."""
        self._deferred()

    async def ready(self, dimensions: int) -> None:
        """Before a write that may use the vector: the scales, the thresholds and the vector index are there."""
        # Computed (and stored) now, outside any write transaction: the duplicate check inside one needs them.
        await self.calibration.scales()
        await self.sameness.thresholds()
        # The first vector tells the size (OpenAI-compatible endpoints without POCKETMEM_EMBED_DIMENSIONS).
        await self.store.ensure_vectors(self.embedder.tag, dimensions)

    async def embed(self, content: str, keywords: Sequence[str]) -> list[float]:
        """The vector of a memory with this content and these keywords; raises ProviderUnavailable."""
        vector = await self.embedder.embed(embedding_text(content, keywords))
        await self.ready(len(vector))
        return vector

    async def embed_many(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[list[float]]:
        """The vectors of several (content, keywords) at once, in order (bulk writes)."""
        vectors = await self.embedder.embed_many([embedding_text(content, keywords) for content, keywords in items])
        if vectors:
            await self.ready(len(vectors[0]))
        else:
            await self.calibration.scales()
            await self.sameness.thresholds()
        return vectors

    async def embed_or_defer(self, content: str, keywords: Sequence[str]) -> list[float] | None:
        """The vector, or None when the embedder cannot answer now: the memory is then stored without one,
        found by keyword at once, and embedded later by the embed queue (embed_queue.py)."""
        try:
            return await self.embed(content, keywords)
        except ProviderUnavailable as exc:
            log.warning("embedder unavailable, storing without a vector for now: %s", exc)
            return None
