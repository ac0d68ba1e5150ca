"""A local neural embedder (the `pocketmem[local]` extra): sentence-transformers on this machine.

`POCKETMEM_EMBED_MODEL` is a model name (downloaded by sentence-transformers on first use, where the
network allows) or a local folder. The model is loaded lazily in a worker thread — never at import
or before the MCP handshake — and the server starts loading it in the background as soon as it runs,
so the first recall does not pay for it. Encoding also runs in a worker thread, off the event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from pocketmem.base.errors import ProviderUnavailable
from pocketmem.providers.embeddings.base import Embedder


class LocalEmbedder(Embedder):
    kind = "local"

    def __init__(self, model: str, *, batch_size: int = 64) -> None:
        self._source = model
        self.batch_size = batch_size
        self._model: Any = None
        self._dimensions: int | None = None
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        path = Path(self._source).expanduser()
        if path.is_dir():
            # Stable across machines: the folder's own name (with its parent when the name says little).
            parts = path.resolve().parts
            return "/".join(parts[-2:]) if parts[-1] in {"model", "models", "snapshot"} else parts[-1]
        return self._source

    @property
    def dimensions(self) -> int | None:
        return self._dimensions

    def _load(self) -> Any:
        with self._lock:
            if self._model is not None:
                return self._model
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise ProviderUnavailable(
                    "POCKETMEM_EMBEDDER=local needs the local extra: pip install 'pocketmem[local]'"
                ) from None
            path = Path(self._source).expanduser()
            try:
                if path.is_dir():
                    # A folder never needs the network: don't let the library look for updates.
                    model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
                else:
                    model = SentenceTransformer(self._source, device="cpu")
            except Exception as exc:  # noqa: BLE001 - any loading failure is reported the same way
                raise ProviderUnavailable(
                    f"cannot load the local embedding model {self._source!r}: {exc}. Give POCKETMEM_EMBED_MODEL a "
                    "local folder with a sentence-transformers model, or a model name the machine can download"
                ) from None
            size = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            dimensions = size()
            if dimensions is None:
                raise ProviderUnavailable(f"the local embedding model {self._source!r} does not say its vector size")
            self._dimensions = int(dimensions)
            self._model = model
            return model

    def _encode(self, texts: list[str]) -> list[list[float]]:
        model = self._load()
        vectors = model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False)
        return [list(map(float, v)) for v in vectors]

    async def warm_up(self) -> None:
        await anyio.to_thread.run_sync(self._load)

    async def _embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        return await anyio.to_thread.run_sync(self._encode, list(texts))

    async def aclose(self) -> None:
        self._model = None
