"""Resources: the user card, store statistics, the review queue, and one memory by id. The instants of the JSON
ones are in the user's zone, to the whole second (core/shown_time.in_zone), as the tools' results are."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from pocketmem.app import PocketMem
from pocketmem.base.errors import NotFound, PocketmemError
from pocketmem.core.shown_time import in_zone

USER_CARD_URI = "memory://user-card"
STATS_URI = "memory://stats"
REVIEW_URI = "memory://review"
MEMORY_URI_TEMPLATE = "memory://memories/{memory_id}"
MEMORIES_URI = "memory://memories"
LISTED = 50  # memories in the memory://memories listing


async def listing(app: PocketMem, user_id: str) -> dict[str, Any]:
    listed = await app.listing.list_memories(
        user_id, category=None, status="active", text=None, limit=LISTED, offset=0
    )
    return in_zone(listed, app.settings.zone).model_dump(mode="json", exclude={"counts"})


def register_resources(mcp: MCPServer, app: PocketMem, current_user: Callable[[], str]) -> None:
    @mcp.resource(
        USER_CARD_URI,
        name="user-card",
        title="User card",
        description="Who the user is: core memories and open todos, Markdown, at most 2 KB. Put it in every prompt.",
        mime_type="text/markdown",
    )
    async def user_card() -> str:
        return await app.user_card(current_user())

    @mcp.resource(
        STATS_URI,
        name="stats",
        title="Memory statistics",
        description="Counts by status and category, the cap, the embedder, the database path and, with a cloud "
        "library, the sync state (last sync, pending uploads, last error).",
        mime_type="application/json",
    )
    async def stats() -> dict[str, Any]:
        stats = in_zone(await app.stats(current_user()), app.settings.zone)
        if get_access_token() is not None:
            # A network user has no business knowing where the server keeps its files.
            stats.pop("database", None)
            if isinstance(stats.get("sync"), dict):
                stats["sync"].pop("library", None)
        return stats

    @mcp.resource(
        REVIEW_URI,
        name="review",
        title="Memories to review",
        description="Promotion candidates (keep being used) and decay candidates (importance fell under 0.5), "
        "with instructions; decide each with the mark_memory tool (promote, keep or forget).",
        mime_type="application/json",
    )
    async def review() -> dict[str, Any]:
        return in_zone(await app.review.queue(current_user()), app.settings.zone).model_dump(mode="json")

    @mcp.resource(
        MEMORIES_URI,
        name="memories",
        title="Memories",
        description=f"The newest {LISTED} active memories and the total; subscribe to hear when one is added, "
        "changed or removed (memory://memories/{memory_id} for one memory).",
        mime_type="application/json",
    )
    async def memories() -> dict[str, Any]:
        return await listing(app, current_user())

    @mcp.resource(
        MEMORY_URI_TEMPLATE,
        name="memory",
        title="One memory",
        description="A memory with all its fields and its revisions.",
        mime_type="application/json",
    )
    async def memory(memory_id: str) -> dict[str, Any]:
        try:
            record = await app.memory_record(current_user(), memory_id)
            return in_zone(record, app.settings.zone).model_dump(mode="json")
        except NotFound as exc:
            raise ResourceNotFoundError(f"{exc}; list ids with the list_memories tool or memory://memories") from None
        except PocketmemError as exc:
            raise ResourceError(str(exc)) from None
