"""The remember_conversation tool: an LLM decides what the recent messages change in the memory.

Where the LLM comes from, in order:

1. MCP sampling, the client's own model (no API key), when the client declares the capability:
   - on 2025-11-25 connections (today's hosts) a `sampling/createMessage` request goes to the client
     mid-call, under POCKETMEM_LLM_TIMEOUT;
   - on 2026-07-28 connections there is no back-channel: the Resolve/Sample resolvers below hand the
     request to the client, which answers and calls again (one more round if the first answer was
     invalid and needs its retry). The client runs the model between rounds, so the server waits on nothing.
2. The OpenAI-compatible chat model of POCKETMEM_LLM_* (llm.py).
3. Neither: a tool error telling the agent to follow the extract_memories prompt and call add_memory.

The extraction itself — prompt, checks, retry, applying — is extraction.py; this module only routes.
"""

# No `from __future__ import annotations` here: the SDK finds the Resolve markers in the live annotations,
# and the resolvers are closures over this server's services.

from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer, Resolve, Sample
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ModelPreferences,
    SamplingMessage,
    TextContent,
)
from mcp_types.version import is_version_at_least
from pydantic import Field

from pocketmem.app import PocketMem
from pocketmem.base.errors import ProviderUnavailable
from pocketmem.core.operations import InvalidAnswer
from pocketmem.mcp.tools import declare, tool_errors
from pocketmem.providers.llm import ChatAnswer, ChatRequest
from pocketmem.service.extraction.extraction import (
    NO_MODEL_MESSAGE,
    ConversationMessage,
    Extracted,
    Hints,
    Prepared,
    RememberResult,
)

NO_BACK_CHANNEL_VERSION = "2026-07-28"  # from this protocol version on, sampling rides input_required rounds
# Extraction is judgement work: ask the host for a capable model rather than its fastest.
PREFERENCES = ModelPreferences(intelligence_priority=0.8, speed_priority=0.4, cost_priority=0.3)


class _Deferred:
    """The LLM is not asked through the resolvers on this connection; the tool body chooses the source."""


DEFERRED = _Deferred()


def can_sample(ctx: Context) -> bool:
    caps = ctx.client_capabilities
    return caps is not None and caps.sampling is not None


def rounds_protocol(ctx: Context) -> bool:
    version = ctx.protocol_version
    return version is not None and is_version_at_least(version, NO_BACK_CHANNEL_VERSION)


def sampling_params(request: ChatRequest) -> CreateMessageRequestParams:
    return CreateMessageRequestParams(
        messages=[
            SamplingMessage(role=turn.role, content=TextContent(type="text", text=turn.text))
            for turn in request.turns
        ],
        system_prompt=request.system,
        max_tokens=request.max_tokens,
        temperature=0,
        model_preferences=PREFERENCES,
    )


def as_sample(request: ChatRequest) -> Sample:
    params = sampling_params(request)
    return Sample(
        params.messages,
        max_tokens=params.max_tokens,
        system_prompt=params.system_prompt,
        temperature=params.temperature,
        model_preferences=params.model_preferences,
    )


def answer_of(result: CreateMessageResult) -> ChatAnswer:
    content = result.content
    return ChatAnswer(text=content.text if isinstance(content, TextContent) else "", model=result.model)


class SessionSampler:
    """The client's model over a 2025-11-25 connection: one sampling/createMessage request per ask."""

    source: Literal["sampling", "openai"] = "sampling"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def complete(self, request: ChatRequest, timeout_seconds: float) -> ChatAnswer:
        try:
            result = await self.ctx.session.send_request(
                CreateMessageRequest(params=sampling_params(request)),
                CreateMessageResult,
                request_read_timeout_seconds=timeout_seconds,
                metadata=ServerMessageMetadata(related_request_id=self.ctx.request_id),
            )
        except MCPError as exc:
            if "timed out" in str(exc):
                raise ProviderUnavailable(
                    f"the client's model did not answer within {timeout_seconds:g}s (POCKETMEM_LLM_TIMEOUT); "
                    "nothing was stored"
                ) from None
            raise ProviderUnavailable(
                f"the client's model (MCP sampling) refused or failed: {exc}; nothing was stored"
            ) from None
        return answer_of(result)

    async def aclose(self) -> None:
        pass  # the connection belongs to the client


def register_remember_tool(mcp: MCPServer, app: PocketMem, current_user: Callable[[], str]) -> None:
    extraction = app.extraction
    max_messages = app.settings.extract_max_messages

    @tool_errors
    async def prepare(messages: Any, ctx: Context, hints: Any = None) -> Prepared:  # tool arguments, by name
        return await extraction.prepare(current_user(), messages, hints)

    @tool_errors
    async def first_answer(prepared: Annotated[Prepared, Resolve(prepare)], ctx: Context) -> Sample | _Deferred:
        if can_sample(ctx) and rounds_protocol(ctx):
            return as_sample(prepared.request)
        return DEFERRED

    @tool_errors
    async def checked_answer(
        prepared: Annotated[Prepared, Resolve(prepare)],
        first: Annotated[CreateMessageResult | _Deferred, Resolve(first_answer)],
    ) -> Sample | Extracted | _Deferred:
        if isinstance(first, _Deferred):
            return first
        answer = answer_of(first)
        try:
            return Extracted(extraction.check(prepared, answer.text), "sampling", answer.model, 1)
        except InvalidAnswer as exc:
            return as_sample(extraction.retry_request(prepared, answer.text, exc))

    @declare(mcp, app.settings)
    @tool_errors
    async def remember_conversation(
        messages: Annotated[
            list[ConversationMessage],
            Field(min_length=1, max_length=max_messages,
                  description="Recent messages, oldest first, your reply included."),
        ],
        prepared: Annotated[Prepared, Resolve(prepare)],
        outcome: Annotated[Extracted | CreateMessageResult | _Deferred, Resolve(checked_answer)],
        ctx: Context,
        hints: Hints | None = None,
    ) -> RememberResult:
        """Every few turns: an LLM reads the messages with related memories and adds, updates, patches or
        forgets; unsure ones come back pending. No model? Use the extract_memories prompt and add_memory."""
        if isinstance(outcome, CreateMessageResult):  # the answer to the retry, on a 2026-07-28 connection
            extracted = extraction.final_check(prepared, answer_of(outcome), "sampling", 2)
        elif isinstance(outcome, Extracted):
            extracted = outcome
        else:
            model = SessionSampler(ctx) if can_sample(ctx) and ctx.session.can_send_request else extraction.model
            if model is None:
                raise ToolError(NO_MODEL_MESSAGE)
            extracted = await extraction.run(prepared, model)
        return await extraction.apply(prepared, extracted)
