"""update_profile: save the assistant's persona and the user's identity (docs/profile.md, "Persona and identity")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from pocketmem.app import PocketMem
from pocketmem.mcp.tools import tool_errors
from pocketmem.service.profile import ProfileResult

PROFILE_TOOL_NAMES = ("update_profile",)

Value = Annotated[str | None, Field(max_length=300)]


class PersonaIn(BaseModel):
    """Who you, the assistant, are for this user. Leave out what did not change; "" clears a field."""

    model_config = ConfigDict(extra="forbid")

    role: Value = Field(None, description="身份定位: who you are to the user (assistant, partner, tutor...).")
    tone: Value = Field(None, description="语气: how you speak.")
    boundaries: Value = Field(None, description="边界: limits you keep (e.g. ask before changing files).")
    taboos: Value = Field(None, description="禁区: what you must never do or bring up.")
    priorities: Value = Field(None, description="优先行为: what you do first.")


class IdentityIn(BaseModel):
    """Who the user is. Leave out what did not change; "" clears a field."""

    model_config = ConfigDict(extra="forbid")

    name: Value = Field(None, description="称呼: what to call the user.")
    background: Value = Field(None, description="职业背景: their work and background.")
    tech: Value = Field(None, description="技术偏好: languages, tools and technology they prefer.")
    collaboration: Value = Field(None, description="协作习惯: how they like to work together.")


def register_profile_tools(mcp: MCPServer, app: PocketMem, current_user: Callable[[], str]) -> None:
    @mcp.tool(
        title="Save the persona and the user's identity",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    @tool_errors
    async def update_profile(
        persona: Annotated[
            PersonaIn | None, Field(description="Your persona for this user (身份定位、语气、边界、禁区、优先行为).")
        ] = None,
        identity: Annotated[
            IdentityIn | None, Field(description="The user's identity (称呼、职业背景、技术偏好、协作习惯).")
        ] = None,
        confirmed: Annotated[
            bool, Field(description="true once the user has seen your summary and said it is right: ends onboarding.")
        ] = False,
    ) -> ProfileResult:
        """Save who you are for this user (persona) and who the user is (identity), in the user's language.

        First conversation (recall_memories returns `onboarding`): ask what the onboarding note says, show a
        short summary, and when the user confirms call this with everything and confirmed=true; the note then
        never comes back. Later, when the user's role, tools or preferences change, call it with just the
        changed fields: the change waits as a pending confirmation (status pending, pending_id) until the user
        agrees (confirm_pending). Never put secrets in a profile. The profile shows in memory://user-card,
        memory://persona and the memory_context prompt.
        """
        return await app.profile.update(
            current_user(),
            persona.model_dump(exclude_none=True) if persona is not None else None,
            identity.model_dump(exclude_none=True) if identity is not None else None,
            confirmed=confirmed,
        )
