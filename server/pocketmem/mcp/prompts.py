"""The two contract prompts: `memory_context` (a system-prompt block for a message) and
`extract_memories` (how to turn a conversation into add_memory calls: the rubric remember_conversation uses)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import Field

from pocketmem.app import PocketMem
from pocketmem.base.errors import InvalidInput
from pocketmem.core.rubric import agent_rubric
from pocketmem.core.text import guess_language
from pocketmem.service.retrieval import RecallRequest

# The same rubric remember_conversation gives its LLM (rubric.py), with the tool calls that carry it out.
EXTRACTION_RUBRIC_ZH = agent_rubric("zh")
EXTRACTION_RUBRIC_EN = agent_rubric("en")


def register_prompts(mcp: MCPServer, app: PocketMem, current_user: Callable[[], str]) -> None:
    @mcp.prompt(title="Memory context for a message")
    async def memory_context(
        message: Annotated[str, Field(description="The user's current message.")],
        context: Annotated[str | None, Field(description="Recent conversation lines, one per line (up to 3).")] = None,
    ) -> str:
        """A system-prompt block with the user card and the memories relevant to `message`."""
        lines = [line for line in (context or "").splitlines() if line.strip()][-3:]
        user = current_user()
        try:
            result = await app.retrieval.recall(user, RecallRequest(query=message, context=lines))
        except InvalidInput as exc:
            # Any other exception would reach the client only as "Error rendering prompt memory_context".
            field = "message" if exc.field == "query" else exc.field
            raise MCPError(INVALID_PARAMS, f"invalid argument {field}: {exc.rule}") from None
        card = await app.user_card(user)
        zh = guess_language(message) == "zh"
        parts = [card.strip()]
        if result.injection:
            parts.append(
                ("[关于用户的相关记忆]\n" if zh else "[Relevant memories about the user]\n") + result.injection
            )
        if result.pending_confirmations:
            head = "[待用户确认的记忆]" if zh else "[Memories waiting for the user's confirmation]"
            waiting = "\n".join(f"- {p.content} (pending_id {p.pending_id})" for p in result.pending_confirmations)
            parts.append(head + "\n" + waiting)
        parts.append(
            "自然地运用这些记忆，不要生硬地说“我记得你说过……”。"
            if zh
            else "Use these memories naturally; don't announce that you remember them."
        )
        return "\n\n".join(parts)

    @mcp.prompt(title="Extract memories from a conversation")
    def extract_memories(
        conversation: Annotated[str | None, Field(description="The recent messages to mine, as plain text.")] = None,
        language: Annotated[str | None, Field(description="zh or en; default follows the conversation.")] = None,
    ) -> str:
        """The rubric remember_conversation uses, for turning a conversation into add_memory calls yourself."""
        lang = language or (guess_language(conversation) if conversation else "zh")
        rubric = EXTRACTION_RUBRIC_ZH if lang == "zh" else EXTRACTION_RUBRIC_EN
        if conversation:
            head = "对话：" if lang == "zh" else "Conversation:"
            return f"{rubric}\n{head}\n{conversation.strip()}\n"
        return rubric
