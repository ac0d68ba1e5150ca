"""Embeddings from any OpenAI-compatible `/v1/embeddings` endpoint
(OpenAI, Azure-style gateways, Ollama, vLLM, LM Studio)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pocketmem.base.errors import ProviderUnavailable
from pocketmem.providers.embeddings.base import Embedder


class OpenAICompatibleEmbedder(Embedder):
    kind = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key: str | None,
        dimensions: int | None = None,
        timeout: float = 30.0,
        batch_size: int = 64,
    ) -> None:
        self._model = model
        self._base_url = base_url
        self._api_key = api_key
        self._requested_dimensions = dimensions
        self._dimensions = dimensions
        self._timeout = timeout
        self.batch_size = batch_size
        self._client: Any = None

    @property
    def model(self) -> str:
        return self._model if self._requested_dimensions is None else f"{self._model}@{self._requested_dimensions}"

    @property
    def dimensions(self) -> int | None:
        return self._dimensions

    @property
    def endpoint(self) -> str:
        return self._base_url or "https://api.openai.com/v1"

    def _get_client(self) -> Any:
        if self._client is None:
            import openai  # imported on first use: it is slow to import and only this embedder needs it

            self._client = openai.AsyncOpenAI(
                # Local servers (Ollama, vLLM) ignore the key but the client insists on one.
                api_key=self._api_key or "unused",
                base_url=self._base_url,
                timeout=self._timeout,
                max_retries=1,
            )
        return self._client

    async def _embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        import openai

        client = self._get_client()
        extra: dict[str, Any] = {}
        if self._requested_dimensions is not None:
            extra["dimensions"] = self._requested_dimensions
        try:
            # float, not the client's default base64: several OpenAI-compatible servers only speak float.
            response = await client.embeddings.create(
                model=self._model, input=list(texts), encoding_format="float", **extra
            )
            data = sorted(response.data, key=lambda item: item.index)
            vectors = [[float(x) for x in item.embedding] for item in data]
            indexes = [item.index for item in data]
        except openai.APITimeoutError:
            raise ProviderUnavailable(
                f"embedding endpoint {self.endpoint} did not answer within {self._timeout:g}s, twice "
                f"(POCKETMEM_EMBED_TIMEOUT)"
            ) from None
        except openai.APIConnectionError:
            raise ProviderUnavailable(
                f"cannot reach the embedding endpoint {self.endpoint}; check POCKETMEM_EMBED_BASE_URL "
                f"and that the server is running"
            ) from None
        except openai.APIStatusError as exc:
            raise ProviderUnavailable(
                f"embedding endpoint {self.endpoint} answered HTTP {exc.status_code} for model "
                f"{self._model!r}: {_short(exc.message)}"
            ) from None
        except openai.OpenAIError as exc:
            raise ProviderUnavailable(f"embedding endpoint {self.endpoint} failed: {_short(str(exc))}") from None
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            # A 200 answer that is not an embeddings response (a proxy's HTML page, an error object, no data).
            raise ProviderUnavailable(
                f"embedding endpoint {self.endpoint} returned a malformed answer for model {self._model!r}: "
                f"{_short(str(exc))}"
            ) from None
        if indexes != list(range(len(texts))):
            raise ProviderUnavailable(
                f"embedding endpoint {self.endpoint} returned {len(vectors)} vectors with indexes {indexes[:10]} "
                f"for {len(texts)} texts"
            )
        if vectors:
            size = len(vectors[0])
            if any(len(v) != size for v in vectors) or (self._dimensions not in (None, size)):
                raise ProviderUnavailable(
                    f"embedding endpoint {self.endpoint} returned vectors of size {size}, expected {self._dimensions}"
                )
            self._dimensions = size
        return vectors

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
