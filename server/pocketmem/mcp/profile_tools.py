"""update_profile: save the assistant's persona and the user's identity (docs/profile.md, "Persona and identity")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, ConfigDict, Field

from pocketmem.app import PocketMem
from pocketmem.mcp.tools import declare, tool_errors
from pocketmem.service.profile.profile import ProfileResult

Value = Annotated[str | None, Field(max_length=300)]


class PersonaIn(BaseModel):
    # Who the assistant is for this user (Persona.md: 身份定位、语气、边界、禁区、优先行为). No docstring: it would
    # be sent as the schema's description with every model request.

    model_config = ConfigDict(extra="forbid")

    role: Value = Field(None, description="Who you are to the user: assistant, partner, tutor...")
    tone: Value = None
    boundaries: Value = Field(None, description="Limits you keep, e.g. ask before changing things")
    taboos: Value = Field(None, description="What you never do or bring up")
    priorities: Value = Field(None, description="What you do first")


class IdentityIn(BaseModel):
    # Who the user is (User.md: 称呼、职业背景、技术偏好、协作习惯).

    model_config = ConfigDict(extra="forbid")

    name: Value = Field(None, description="What to call the user")
    background: Value = Field(None, description="Their work and background")
    tech: Value = Field(None, description="Languages, tools and tech they prefer")
    collaboration: Value = Field(None, description="How they like to work together")


def register_profile_tools(mcp: MCPServer, app: PocketMem, current_user: Callable[[], str]) -> None:
    @declare(mcp, app.settings)
    @tool_errors
    async def update_profile(
        persona: PersonaIn | None = None,
        identity: IdentityIn | None = None,
        confirmed: Annotated[bool, Field(description="The user approved it: ends onboarding.")] = False,
    ) -> ProfileResult:
        """Save your persona and the user's identity in their language; send changed fields only ("" clears).
        After onboarding, changes wait for confirm_pending. No secrets."""
        return await app.profile.update(
            current_user(),
            persona.model_dump(exclude_none=True) if persona is not None else None,
            identity.model_dump(exclude_none=True) if identity is not None else None,
            confirmed=confirmed,
        )
