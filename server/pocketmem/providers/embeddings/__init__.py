"""Embedders: `use` (the default: a multilingual sentence encoder shipped inside its wheel), `hash` (built in,
lexical), `openai` (any OpenAI-compatible endpoint), `local` (optional extra)."""

from __future__ import annotations

from pocketmem.base.config import Settings
from pocketmem.providers.embeddings.base import Embedder
from pocketmem.providers.embeddings.hashing import HashEmbedder
from pocketmem.providers.embeddings.openai_compat import OpenAICompatibleEmbedder
from pocketmem.providers.embeddings.universal import UniversalSentenceEncoder

__all__ = ["Embedder", "HashEmbedder", "OpenAICompatibleEmbedder", "UniversalSentenceEncoder", "make_embedder"]


def make_embedder(settings: Settings) -> Embedder:
    if settings.embedder == "use":
        return UniversalSentenceEncoder()
    if settings.embedder == "hash":
        return HashEmbedder()
    if settings.embedder == "openai":
        assert settings.embed_model is not None
        return OpenAICompatibleEmbedder(
            settings.embed_model,
            base_url=settings.embed_base_url,
            api_key=settings.embed_api_key.get_secret_value() if settings.embed_api_key else None,
            dimensions=settings.embed_dimensions,
            timeout=settings.embed_timeout,
            batch_size=settings.embed_batch_size,
        )
    from pocketmem.providers.embeddings.local import LocalEmbedder  # optional extra: sentence-transformers

    assert settings.embed_model is not None
    return LocalEmbedder(settings.embed_model, batch_size=settings.embed_batch_size)
