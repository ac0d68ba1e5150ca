"""The two contract prompts: `memory_context` (a system-prompt block for a message) and
`extract_memories` (how to turn a conversation into add_memory calls: the rubric remember_conversation uses)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar, get_args

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import Field

from pocketmem.app import PocketMem
from pocketmem.base.errors import InvalidInput
from pocketmem.core.rubric import Language, agent_rubric
from pocketmem.core.text import own_language
from pocketmem.mcp.tools import describe
from pocketmem.service.shared.usercard import content_language

LANGUAGES = get_args(Language)  # the rubric's languages
# remember_conversation takes at most 100 messages of 4,000 characters; the prompt takes no more text than that.
MAX_CONVERSATION_CHARS = 40_000
F = TypeVar("F", bound=Callable[..., Any])


class CheckedPrompt(Prompt):
    """A prompt whose required argument, left out, is refused as invalid params (-32602) naming it, as the prompts
    refuse a bad argument: the SDK's own check raises a ValueError, which reaches the client as error code 0 and
    is logged with a traceback."""

    async def render(self, arguments: dict[str, Any] | None, context: Context[Any, Any]) -> Any:
        missing = [arg.name for arg in self.arguments or () if arg.required and arg.name not in (arguments or {})]
        if missing:
            raise MCPError(INVALID_PARAMS, f"invalid argument {missing[0]}: is required")
        return await super().render(arguments, context)


def prompt(mcp: MCPServer, app: PocketMem, title: str) -> Callable[[F], F]:
    """Register a prompt with its docstring as one clean paragraph, as the tools' descriptions are written
    (mcp/tools.describe): the SDK would send it with the docstring's indentation."""

    def add(fn: F) -> F:
        description = describe(fn.__doc__ or "", app.settings)
        mcp.add_prompt(CheckedPrompt.from_function(fn, title=title, description=description))
        return fn

    return add


def register_prompts(mcp: MCPServer, app: PocketMem, current_user: Callable[[], str]) -> None:
    @prompt(mcp, app, "Memory context for a message")
    async def memory_context(
        message: Annotated[str, Field(description="The user's current message.")],
        context: Annotated[str | None, Field(description="Recent conversation lines, one per line (up to 3).")] = None,
    ) -> str:
        """A system-prompt block within POCKETMEM_CONTEXT_TOKENS: the persona and user card, recent memories and
        the long-term memories relevant to `message` (more of them when it asks about the past)."""
        lines = [line for line in (context or "").splitlines() if line.strip()][-3:]
        try:
            package = await app.context.build(current_user(), message, lines)
        except InvalidInput as exc:
            # Any other exception would reach the client only as "Error rendering prompt memory_context".
            field = "message" if exc.field == "query" else exc.field
            raise MCPError(INVALID_PARAMS, f"invalid argument {field}: {exc.rule}") from None
        return package.text

    @prompt(mcp, app, "Extract memories from a conversation")
    async def extract_memories(
        conversation: Annotated[str | None, Field(description="The recent messages to mine, as plain text.")] = None,
        language: Annotated[
            str | None, Field(description="zh or en; default follows the conversation, else your memories.")
        ] = None,
    ) -> str:
        """The rubric remember_conversation uses, for turning a conversation into add_memory calls yourself."""
        if conversation is not None and len(conversation) > MAX_CONVERSATION_CHARS:
            raise MCPError(
                INVALID_PARAMS,
                f"invalid argument conversation: is {len(conversation)} characters; the limit is "
                f"{MAX_CONVERSATION_CHARS} — send the most recent messages only",
            )
        if language is not None and language not in LANGUAGES:
            raise MCPError(
                INVALID_PARAMS,
                f"invalid argument language: must be one of: {', '.join(LANGUAGES)} (leave it out to follow the "
                "conversation)",
            )
        # The conversation's language; without one of its own (none given, 👍, ok), the user's content's.
        lang = language or own_language(conversation or "") or await content_language(
            app.store, current_user(), app.clock.now()
        )
        # The rubric remember_conversation gives its LLM (rubric.py) with the settings in force, then the tool
        # calls that carry it out.
        rubric = agent_rubric("zh" if lang == "zh" else "en", app.settings)
        if conversation:
            head = "对话：" if lang == "zh" else "Conversation:"
            return f"{rubric}\n{head}\n{conversation.strip()}\n"
        return rubric
