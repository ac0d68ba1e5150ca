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

    model_config = ConfigDict(extra="forbid")

    role: Value = Field(None, description="身份定位")
    tone: Value = Field(None, description="语气")
    boundaries: Value = Field(None, description="边界")
    taboos: Value = Field(None, description="禁区")
    priorities: Value = Field(None, description="优先行为")


class IdentityIn(BaseModel):

    model_config = ConfigDict(extra="forbid")

    name: Value = Field(None, description="称呼")
    background: Value = Field(None, description="职业背景")
    tech: Value = Field(None, description="技术偏好")
    collaboration: Value = Field(None, description="协作习惯")


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
