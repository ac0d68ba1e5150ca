"""Where remember_conversation gets its LLM: a chat request, and the sources that answer it.

    ChatModel          the interface: complete(request, timeout_seconds) -> ChatAnswer
    OpenAIChatModel    any OpenAI-compatible /v1/chat/completions endpoint (POCKETMEM_LLM_*)
    (MCP sampling, the client's own model, is the other source; it lives with the MCP tool in
    remember.py because it needs the connection.)

Failures become ProviderUnavailable with a message that says what to check.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio.to_thread

from pocketmem.base.config import Settings
from pocketmem.base.errors import ProviderUnavailable

Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class ChatTurn:
    role: Role
    text: str


@dataclass(frozen=True)
class ChatRequest:
    system: str
    turns: tuple[ChatTurn, ...]
    max_tokens: int
    schema: dict[str, Any] | None = None  # the JSON schema the answer must follow, for endpoints that enforce one
    schema_name: str = "answer"


@dataclass(frozen=True)
class ChatAnswer:
    text: str
    model: str | None


class ChatModel(Protocol):
    source: Literal["sampling", "openai"]

    async def complete(self, request: ChatRequest, timeout_seconds: float) -> ChatAnswer: ...

    async def aclose(self) -> None: ...


async def _import_openai() -> Any:
    # Importing openai takes about a second; do it off the event loop so other requests keep flowing.
    return await anyio.to_thread.run_sync(importlib.import_module, "openai")


class OpenAIChatModel:
    """Chat completions from an OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, LM Studio, gateways)."""

    source: Literal["sampling", "openai"] = "openai"

    def __init__(self, model: str, *, base_url: str | None, api_key: str | None) -> None:
        self.model = model
        self.base_url = base_url
        self._api_key = api_key
        self._client: Any = None
        # Structured output (response_format) and temperature are sent until the endpoint shows it refuses them
        # (_create): some servers know neither json_schema nor a temperature for reasoning models.
        self._extras = True

    async def _get_client(self) -> Any:
        if self._client is None:
            openai = await _import_openai()
            # Made once and off the event loop: building the client loads the TLS certificates (tens of ms).
            client = await anyio.to_thread.run_sync(
                functools.partial(
                    openai.AsyncOpenAI,
                    # Local servers (Ollama, vLLM) ignore the key but the client insists on one.
                    api_key=self._api_key or "unused",
                    base_url=self.base_url,
                    # The caller's deadline covers the whole extraction, and it retries bad answers itself.
                    max_retries=0,
                )
            )
            if self._client is None:
                self._client = client
            else:  # another request made one meanwhile
                await client.close()
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    @property
    def endpoint(self) -> str:
        return self.base_url or "https://api.openai.com/v1"

    async def complete(self, request: ChatRequest, timeout_seconds: float) -> ChatAnswer:
        openai = await _import_openai()
        client = await self._get_client()
        messages = [{"role": "system", "content": request.system}]
        messages += [{"role": turn.role, "content": turn.text} for turn in request.turns]
        try:
            response = await self._create(openai, client, messages, request, timeout_seconds)
            content = _text_of(response.choices[0].message.content)
            model = getattr(response, "model", None) or self.model
        except openai.APITimeoutError:
            raise ProviderUnavailable(
                f"the chat endpoint {self.endpoint} did not answer within {timeout_seconds:g}s (POCKETMEM_LLM_TIMEOUT)"
            ) from None
        except openai.APIConnectionError:
            raise ProviderUnavailable(
                f"cannot reach the chat endpoint {self.endpoint}; check POCKETMEM_LLM_BASE_URL and that the "
                "server is running"
            ) from None
        except openai.APIStatusError as exc:
            raise ProviderUnavailable(
                f"the chat endpoint {self.endpoint} answered HTTP {exc.status_code} for model {self.model!r}: "
                f"{_short(exc.message)}"
            ) from None
        except openai.OpenAIError as exc:
            raise ProviderUnavailable(f"the chat endpoint {self.endpoint} failed: {_short(str(exc))}") from None
        except (IndexError, AttributeError, TypeError, ValueError) as exc:
            raise ProviderUnavailable(
                f"the chat endpoint {self.endpoint} returned a malformed answer for model {self.model!r}: "
                f"{_short(str(exc))}"
            ) from None
        return ChatAnswer(text=content or "", model=str(model))

    async def _create(
        self, openai: Any, client: Any, messages: list[dict[str, str]], request: ChatRequest, timeout_seconds: float
    ) -> Any:
        """One completion. A 400/422 with the extras on is asked again without them; they stay off for the
        next calls only when the error names them or the plain request then succeeds, so a refusal for another
        cause (a context too long) does not turn off structured output for good."""
        create = functools.partial(
            client.chat.completions.create, model=self.model, messages=messages, timeout=timeout_seconds
        )
        extras = self._extra_args(request)
        try:
            return await create(**extras)
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            if not extras:
                raise
            if _names_extras(exc.message):
                self._extras = False
        response = await create()
        self._extras = False
        return response

    def _extra_args(self, request: ChatRequest) -> dict[str, Any]:
        if not self._extras:
            return {}
        args: dict[str, Any] = {"temperature": 0}
        if request.schema is not None:
            args["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.schema},
            }
        return args


def configured_model(settings: Settings) -> OpenAIChatModel | None:
    """The OpenAI-compatible chat model of POCKETMEM_LLM_*, or None when none is configured."""
    if not settings.llm_model:
        return None
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key is not None else None
    return OpenAIChatModel(settings.llm_model, base_url=settings.llm_base_url, api_key=key)


def _names_extras(error: str) -> bool:
    """Whether an endpoint's refusal names what only structured output sends."""
    return any(word in error.lower() for word in ("response_format", "json_schema", "temperature"))


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _text_of(content: Any) -> str | None:
    """An answer's text: a string, or the text parts of a list of content parts (some endpoints answer so)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part.get("text") for part in content if isinstance(part, dict) and part.get("type") == "text"]
        return "".join(text for text in texts if isinstance(text, str))
    raise TypeError(f"message.content is {type(content).__name__}, not text")
