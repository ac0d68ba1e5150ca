"""Embedding on the write path, and which embedder's vectors the store holds.

A memory's vector is computed before its write transaction. The first vector also readies what the duplicate
check inside a transaction needs (the similarity scale and the same-fact thresholds, which are measured and
stored outside any write lock) and the store's vector index for the vector's size.

The store records the embedder whose vectors it holds (store_meta `embedder`), and vectors of two models never
mix. The rules, each here once:

    agree_in   a vector is written, searched or compared only inside a transaction that reads this embedder's
               tag in that record: a store another process switched meanwhile (a server with another
               embedder, `pocketmem reindex`) is seen before a vector of one model joins those of another.
               Otherwise a memory is stored without a vector (the keyword index finds it at once; a process
               with the store's embedder computes it) and recall answers through the keyword index.
    upgrades   who switches the record: only `pocketmem serve` on start, by itself, between the built-in
               embedders or when the record was lost (UNKNOWN); `pocketmem reindex` for any change. Every
               other command leaves the record and the vectors as they are.
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
from pocketmem.store.roles import MetaReads

log = logging.getLogger(__name__)

EMBEDDER_KEY = "embedder"  # store_meta: the embedder whose vectors the store holds
# What `doctor --repair` records when store_meta was lost: the vectors are of a model no one can name, so the
# next `pocketmem serve` re-embeds every memory with its own embedder (as after an upgrade).
UNKNOWN = "unknown"
# Embedders that run inside pocketmem (no endpoint, no download): a store whose vectors one of them made is
# re-embedded by `pocketmem serve` when it starts with another of them or a newer version of the same one (the
# built-in lexical vectors, the default before `use`, replaced by the shipped model; `hash:v1` by `hash:v2`). Any
# other change of embedder waits for `pocketmem reindex` (it may call a paid endpoint or download a model).
BUILT_IN = ("hash", "use")


def upgrades(stored_tag: str, embedder: Embedder) -> bool:
    """Whether `pocketmem serve` re-embeds a store embedded by `stored_tag` with `embedder` on start, unasked."""
    return stored_tag == UNKNOWN or (stored_tag.split(":", 1)[0] in BUILT_IN and embedder.kind in BUILT_IN)


def foreign_note(stored_tag: str, embedder: Embedder) -> str:
    """Why vectors are not used while the store records `stored_tag` and this process embeds with `embedder`:
    recall's `degraded`, a stored memory's message, the server's warning."""
    if stored_tag == UNKNOWN:
        return (
            "this store does not record which embedder made its vectors (its record was lost and repaired): recall "
            "uses the keyword index alone and new memories wait for their vectors until `pocketmem serve` "
            "re-embeds every memory on its next start, or `pocketmem reindex` does it now"
        )
    how = "(re)start `pocketmem serve`" if upgrades(stored_tag, embedder) else "run `pocketmem reindex`"
    return (
        f"this store's vectors are made by {stored_tag}, not by the configured embedder {embedder.tag} (vectors of "
        "two models never mix): recall uses the keyword index alone, and memories stored now wait for their "
        "vectors. Set POCKETMEM_EMBEDDER / POCKETMEM_EMBED_MODEL back to the store's embedder and restart "
        f"pocketmem, or {how} to re-embed the store with {embedder.tag}"
    )


class Vectors:
    def __init__(self, store: VectorStore, embedder: Embedder, calibration: Calibration) -> None:
        self.store = store
        self.embedder = embedder
        self.calibration = calibration
        self.sameness = Sameness(store, embedder)
        self._deferred: Callable[[], None] = lambda: None
        # The store's embedder when it is another's, as last read (on opening, then in every transaction that
        # checks): while it is set, no vector is computed for a write, and recall does not encode its query.
        self.foreign: str | None = None

    async def agree_in(self, reader: MetaReads) -> bool:
        """Inside the caller's transaction: whether the store's vectors are this embedder's, so a vector may be
        written, searched or compared in it (the module's first rule). A store that records no embedder holds
        none of this one's vectors yet (the first vector written records it: `ready`)."""
        stored = await reader.meta(EMBEDDER_KEY)
        self.foreign = None if stored in (None, self.embedder.tag) else stored
        return stored == self.embedder.tag

    async def look(self) -> str | None:
        """Read the store's record now (on opening); the note saying why vectors are not used, or None."""
        async with self.store.read() as reader:
            await self.agree_in(reader)
        return self.note()

    def note(self) -> str | None:
        """Why this process uses no vectors (the store records another embedder's), or None."""
        return foreign_note(self.foreign, self.embedder) if self.foreign is not None else None

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
        # The first vector tells the size (OpenAI-compatible endpoints without POCKETMEM_EMBED_DIMENSIONS); a store
        # recording no embedder yet records this one (one recording another is left as it is).
        await self.store.ensure_vectors(self.embedder.tag, dimensions)

    async def embed(self, content: str, keywords: Sequence[str]) -> list[float] | None:
        """The vector of a memory with this content and these keywords; raises ProviderUnavailable. None while
        the store's vectors are another embedder's (`foreign`): the memory is written without one."""
        if self.foreign is not None:
            return None
        vector = await self.embedder.embed(embedding_text(content, keywords))
        await self.ready(len(vector))
        return vector

    async def embed_many(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[list[float] | None]:
        """The vectors of several (content, keywords) at once, in order (bulk writes); None each as `embed`."""
        if self.foreign is not None:
            return [None] * len(items)
        vectors = await self.embedder.embed_many([embedding_text(content, keywords) for content, keywords in items])
        if vectors:
            await self.ready(len(vectors[0]))
        else:
            await self.calibration.scales()
            await self.sameness.thresholds()
        return list(vectors)

    async def embed_or_defer(self, content: str, keywords: Sequence[str]) -> list[float] | None:
        """The vector, or None when the embedder cannot answer now: the memory is then stored without one,
        found by keyword at once, and embedded later by the embed queue (embed_queue.py)."""
        try:
            return await self.embed(content, keywords)
        except ProviderUnavailable as exc:
            log.warning("embedder unavailable, storing without a vector for now: %s", exc)
            return None

    def missing_note(self) -> str:
        """What a memory stored without a vector is told: why, and who computes it."""
        if self.foreign is not None:
            return f" It is stored without a vector and found by keyword: {self.note()}."
        return (
            " The embedding endpoint did not answer, so it is found by keyword until its vector is computed"
            " in the background."
        )
