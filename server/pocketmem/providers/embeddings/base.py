"""The embedder interface: one abstract method; the base class batches and checks."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

from pocketmem.base.errors import ProviderUnavailable


class Embedder(ABC):
    """Turns texts into unit-length vectors.

    `tag` names the model and its vector size; the store records it and refuses to mix vectors
    of two models (switching is `pocketmem reindex`).
    """

    kind: str = "base"
    batch_size: int = 64
    # A lexical embedder's similarity is shared wording, which the keyword index already enumerates;
    # recall then takes its candidates from the keyword index and scores only those (retrieval.py).
    lexical: bool = False

    @property
    @abstractmethod
    def model(self) -> str:
        """Model name as the store records it."""

    @property
    @abstractmethod
    def dimensions(self) -> int | None:
        """Vector size, or None until the first answer tells it."""

    @property
    def tag(self) -> str:
        return f"{self.kind}:{self.model}"

    @abstractmethod
    async def _embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed at most `batch_size` texts."""

    async def embed_many(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            answered = await self._embed_batch(batch)
            if len(answered) != len(batch):
                raise ProviderUnavailable(
                    f"embedder {self.tag} returned {len(answered)} vectors for {len(batch)} texts"
                )
            for vector in answered:
                if not math.isfinite(math.fsum(vector)):  # one NaN or infinity makes the sum so
                    raise ProviderUnavailable(f"embedder {self.tag} returned a vector with NaN or infinity")
                vectors.append(_unit(vector))
        return vectors

    async def embed(self, text: str) -> list[float]:
        return (await self.embed_many([text]))[0]

    async def warm_up(self) -> None:
        """Load whatever is slow to load; called in the background, never before the MCP handshake."""
        return None

    async def aclose(self) -> None:
        """Release connections or models."""
        return None


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.hypot(*vector)
    if norm == 0.0:
        return [0.0] * len(vector)
    return [x / norm for x in vector]
