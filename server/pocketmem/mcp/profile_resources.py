"""Resources of the profile layer: memory://persona, memory://project, memory://insights (Markdown).
The user card (memory://user-card, resources.py) shows the identity."""

from __future__ import annotations

from collections.abc import Callable

from mcp.server.mcpserver import MCPServer

from pocketmem.app import PocketMem
from pocketmem.core.profile_text import PERSONA_FIELDS

PERSONA_URI = "memory://persona"
PROJECT_URI = "memory://project"
INSIGHTS_URI = "memory://insights"
PROFILE_URIS = (PERSONA_URI, PROJECT_URI, INSIGHTS_URI)


async def render_resource(app: PocketMem, user_id: str, uri: str) -> str:
    await app.profile_files.check(user_id)
    if uri == PERSONA_URI:
        return await app.profile.render_persona(user_id)
    if uri == PROJECT_URI:
        return await app.profile.render_project(user_id)
    return await app.profile.render_insights(user_id)


def register_profile_resources(mcp: MCPServer, app: PocketMem, current_user: Callable[[], str]) -> None:
    @mcp.resource(
        PERSONA_URI, name="persona", title="Assistant persona", mime_type="text/markdown",
        description=f"Who the assistant is for this user ({', '.join(fd.key for fd in PERSONA_FIELDS)}), Markdown.",
    )
    async def persona() -> str:
        return await render_resource(app, current_user(), PERSONA_URI)

    @mcp.resource(
        PROJECT_URI, name="project", title="Project state", mime_type="text/markdown",
        description="The current state of the user's projects (memories of category project), newest last; "
        "older entries beyond POCKETMEM_PROJECT_LINES stay in the database.",
    )
    async def project() -> str:
        return await render_resource(app, current_user(), PROJECT_URI)

    @mcp.resource(
        INSIGHTS_URI, name="insights", title="Hot lessons", mime_type="text/markdown",
        description="The 10 most recalled lessons (category lesson); the rest stay in the database.",
    )
    async def insights() -> str:
        return await render_resource(app, current_user(), INSIGHTS_URI)
