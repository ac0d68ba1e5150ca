"""The tools of the contract plus mark_memory (todos and review decisions), declared in one table.

`TOOLS` names every tool the server offers (this module's, remember_conversation and update_profile) with its
title and annotations; `declare` registers a tool from that row and fills its description from the settings
(`{episode_days}`, `{trash_days}`, the confidence thresholds), so a changed setting never leaves a false
description. Each tool is one small factory here: its body checks types (pydantic, via the signature), makes
one call into the service and maps pocketmem errors to tool errors whose text says what to send instead.

Descriptions are short on purpose: hosts send them with every model request (bench/tool_sizes.py measures
them). The detail lives in docs/tools.md and in the error messages. No SQL here.
"""

# No `from __future__ import annotations`: argument descriptions are built from the settings inside the
# factories, so the SDK must see the live annotations.

import functools
import logging
from collections.abc import Awaitable, Callable
from datetime import tzinfo
from typing import Annotated, Any, Literal, NamedTuple, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from pocketmem.app import PocketMem
from pocketmem.base.config import Settings
from pocketmem.base.errors import InvalidInput, PocketmemError
from pocketmem.base.models import Category
from pocketmem.base.results import (
    AddResult,
    ConfirmResult,
    ForgetResult,
    MarkResult,
    MemoryList,
    PatchResult,
    RecallResult,
    RestoreResult,
    TrashList,
)
from pocketmem.core.instants import Due, Instant
from pocketmem.core.routing import routing_rule
from pocketmem.core.shown_time import in_zone
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])
User = Callable[[], str]


class Declaration(NamedTuple):
    title: str
    annotations: ToolAnnotations


READS = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
CHANGES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)

# Every tool of the server, by name (the contract: design.md; outside checks call these names).
TOOLS: dict[str, Declaration] = {
    "recall_memories": Declaration("Recall memories", WRITES),  # counts uses and takes `used` feedback
    "add_memory": Declaration("Add a memory", WRITES),
    "patch_core_memory": Declaration("Patch a core memory", CHANGES),
    "confirm_pending": Declaration("Confirm, reject or snooze a pending memory", WRITES),
    "list_trash": Declaration("List the trash", READS),
    "restore": Declaration("Restore from the trash", WRITES),
    "forget_memory": Declaration("Forget a memory", CHANGES),
    "list_memories": Declaration("List memories", READS),
    "mark_memory": Declaration("Complete a todo, or decide a memory review", CHANGES),
    "remember_conversation": Declaration(  # its LLM may be the server's configured model
        "Remember a conversation", CHANGES.model_copy(update={"open_world_hint": True})
    ),
    "update_profile": Declaration(
        "Save the persona and the user's identity", WRITES.model_copy(update={"idempotent_hint": True})
    ),
}


def _not_true_or_false(value: object) -> object:
    """A number argument given true or false is an error: pydantic alone would read `top_k: true` as 1."""
    if isinstance(value, bool):
        raise PydanticCustomError("number_not_bool", "must be a number, not true or false")
    return value


# After the bounds: pydantic writes a Field's bounds as JSON Schema (minimum, maximum) only when no validator
# stands before it in the Annotated; the validator still runs before the number is read.
NotBool = BeforeValidator(_not_true_or_false)
Unit = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False), NotBool]
MemoryId = Annotated[str, Field(min_length=1, max_length=64)]
Why = Annotated[str | None, Field(max_length=500)]
Limit = Annotated[int, Field(ge=1, le=500), NotBool]
Offset = Annotated[int, Field(ge=0, le=1_000_000), NotBool]


class ScoresIn(BaseModel):
    # E/I/P/J, each 0-1; one left out takes the category's default. Another name is an error, not a default.
    model_config = ConfigDict(extra="forbid")

    emotion: Unit | None = None
    info: Unit | None = None
    persistence: Unit | None = Field(None, description="1 = core: never decays")
    judge: Unit | None = None


def describe(text: str, settings: Settings) -> str:
    """A tool description with today's settings in place of `{episode_days}`, `{trash_days}`..., and the
    confidence routing in words in place of `{routing}`."""
    return " ".join(text.split()).format(**settings.model_dump(), routing=routing_rule(settings))


def declare(mcp: MCPServer, settings: Settings) -> Callable[[F], F]:
    """Register a tool under its row of TOOLS, its description filled from the settings, its result's instants
    in the user's zone (`shown_in_zone`)."""

    def add(fn: F) -> F:
        row = TOOLS[fn.__name__]
        mcp.add_tool(
            shown_in_zone(fn, settings.zone), name=fn.__name__, title=row.title, annotations=row.annotations,
            description=describe(fn.__doc__ or "", settings),
        )
        return fn

    return add


def shown_in_zone(fn: Callable[P, Awaitable[R]], zone: tzinfo) -> Callable[P, Awaitable[R]]:
    """The tool with every datetime of its result in `zone`, whole seconds (core/shown_time.in_zone): the model
    reads `due_at` and the label beside it on one clock. The one place a tool's result meets the zone."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        return in_zone(await fn(*args, **kwargs), zone)

    return wrapper


def tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Turn pocketmem errors into MCP tool errors the model can act on."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except ToolError:
            raise
        except InvalidInput as exc:
            raise ToolError(f"invalid argument {exc}") from None
        except PocketmemError as exc:
            raise ToolError(str(exc)) from None
        except Exception as exc:
            log.exception("tool %s failed", fn.__name__)
            raise ToolError(
                f"internal error ({type(exc).__name__}); nothing was "
                "changed by this call. Details are in the server log."
            ) from None

    return wrapper


def register_tools(mcp: MCPServer, app: PocketMem, current_user: User) -> None:
    add = declare(mcp, app.settings)
    for factory in (recall_tool, add_tool, patch_tool, confirm_tool, list_trash_tool, restore_tool, forget_tool,
                    list_memories_tool, mark_tool):
        add(tool_errors(factory(app, current_user)))


def recall_tool(app: PocketMem, current_user: User) -> Callable[..., Awaitable[RecallResult]]:
    top_k = app.settings.top_k

    async def recall_memories(
        query: Annotated[str, Field(description="The user's message, verbatim.")],
        context: Annotated[
            list[str] | None,
            Field(
                description="Earlier lines, oldest first: a follow-up (那我能吃吗) is read through them.", max_length=3
            ),
        ] = None,
        keywords: Annotated[
            list[str] | None,
            Field(
                description="Terms you infer: synonyms, topic, other language, what it involves (香菜 for 火锅).",
                max_length=12,
            ),
        ] = None,
        top_k: Annotated[
            Annotated[int, Field(ge=1, le=50), NotBool] | None, Field(description=f"Default {top_k}.")
        ] = None,
        categories: list[Category] | None = None,
        include_history: Annotated[bool, Field(description="Add superseded versions.")] = False,
        explain: Annotated[bool, Field(description="Score breakdowns.")] = False,
        used: Annotated[
            list[str] | None,
            Field(description="Ids that shaped your last reply.", max_length=50),
        ] = None,
        temporary: Annotated[bool, Field(description="Off the record.")] = False,
    ) -> RecallResult:
        """Call before answering each user message: relevant memories (often none) and `injection` for your
        context. Ask about `pending_confirmations`, mention due `reminders` once, ask `onboarding` (then
        update_profile)."""
        return await app.retrieval.answer(
            current_user(),
            RecallRequest(
                query=query,
                context=context or (),
                keywords=keywords or (),
                top_k=top_k,
                categories=categories,
                include_history=include_history,
                explain=explain,
                used=used or (),
                temporary=temporary,
            ),
        )

    return recall_memories


def add_tool(app: PocketMem, current_user: User) -> Callable[..., Awaitable[AddResult]]:
    async def add_memory(
        content: Annotated[
            str, Field(description="1-2 sentences in the user's language.", min_length=1)
        ],
        category: Category = Category.fact,
        keywords: Annotated[
            list[str] | None, Field(description="Search terms: synonyms, topic, other language.",
                                    max_length=12),
        ] = None,
        scores: ScoresIn | None = None,
        confidence: Unit = 1.0,
        supersedes: Annotated[
            str | None, Field(description="Id of the memory this corrects.", max_length=64)
        ] = None,
        created_at: Instant | None = None,
        valid_from: Instant | None = None,
        due_at: Due | None = None,
        remind_at: Instant | None = None,
        expires_at: Instant | None = None,
        source: Annotated[str | None, Field(max_length=500)] = None,
        source_ref: Annotated[str | None, Field(max_length=500)] = None,
        operation_id: Annotated[
            str | None, Field(description="Idempotency key.", max_length=200)
        ] = None,
        temporary: Annotated[bool, Field(description="Off the record.")] = False,
    ) -> AddResult:
        """Remember a preference, fact, lesson, goal, person, todo (due_at) or episode (chat summary, expires
        in {episode_days} days). {routing} Secrets are redacted or refused. Times: ISO 8601 date or date-time; a
        due_at date is due by the end of that day."""
        request = AddRequest(
            content=content,
            category=category,
            keywords=keywords or [],
            scores=scores.model_dump() if scores is not None else None,
            confidence=confidence,
            supersedes=supersedes,
            created_at=created_at,
            valid_from=valid_from,
            due_at=due_at,
            remind_at=remind_at,
            expires_at=expires_at,
            source=source,
            source_ref=source_ref,
            operation_id=operation_id,
        )
        return await app.writing.add(current_user(), request, temporary=temporary)

    return add_memory


def patch_tool(app: PocketMem, current_user: User) -> Callable[..., Awaitable[PatchResult]]:
    async def patch_core_memory(
        memory_id: MemoryId,
        patch: Annotated[str, Field(min_length=1)],
        mode: Annotated[
            Literal["append", "replace"], Field(description="append adds a dated note.")
        ] = "append",
        reason: Why = None,
    ) -> PatchResult:
        """Update a core memory; the old text stays as a revision."""
        return await app.patching.patch_core(current_user(), memory_id, patch, mode, reason)

    return patch_core_memory


def confirm_tool(app: PocketMem, current_user: User) -> Callable[..., Awaitable[ConfirmResult]]:
    async def confirm_pending(
        pending_id: Annotated[str, Field(min_length=1, max_length=64)],
        action: Literal["confirm", "reject", "snooze"],
        snooze_hours: Annotated[
            Annotated[float, Field(gt=0, le=2160, allow_inf_nan=False), NotBool] | None,
            Field(description="Default 24."),
        ] = None,
    ) -> ConfirmResult:
        """Act on the user's answer about a pending item."""
        return await app.pending.confirm_pending(current_user(), pending_id, action, snooze_hours)

    return confirm_pending


def list_trash_tool(app: PocketMem, current_user: User) -> Callable[..., Awaitable[TrashList]]:
    async def list_trash(limit: Limit = 50, offset: Offset = 0) -> TrashList:
        """Forgotten, evicted and expired memories one can restore, newest first."""
        return await app.trash.list_trash(current_user(), limit, offset)

    return list_trash


def restore_tool(app: PocketMem, current_user: User) -> Callable[..., Awaitable[RestoreResult]]:
    async def restore(memory_id: MemoryId) -> RestoreResult:
        """Bring a memory back from the trash (within {trash_days} days)."""
        return await app.trash.restore(current_user(), memory_id)

    return restore


def forget_tool(app: PocketMem, current_user: User) -> Callable[..., Awaitable[ForgetResult]]:
    async def forget_memory(memory_id: MemoryId, reason: Why = None) -> ForgetResult:
        """Move a memory to the trash (restorable for {trash_days} days)."""
        return await app.trash.forget(current_user(), memory_id, reason)

    return forget_memory


def list_memories_tool(app: PocketMem, current_user: User) -> Callable[..., Awaitable[MemoryList]]:
    async def list_memories(
        category: Category | None = None,
        status: Literal["active", "superseded", "pending", "trashed"] = "active",
        text: Annotated[str | None, Field(max_length=200)] = None,
        limit: Limit = 50,
        offset: Offset = 0,
        since: Instant | None = None,
        until: Instant | None = None,
    ) -> MemoryList:
        """Browse memories, newest first, with `counts` per category. A date alone is local midnight."""
        return await app.listing.list_memories(
            current_user(), category=category, status=status, text=text, limit=limit, offset=offset,
            since=since, until=until,
        )

    return list_memories


def mark_tool(app: PocketMem, current_user: User) -> Callable[..., Awaitable[MarkResult]]:
    async def mark_memory(
        memory_id: MemoryId,
        action: Literal["complete", "reopen", "promote", "keep", "forget"],
        reason: Why = None,
    ) -> MarkResult:
        """complete/reopen a todo; promote (make core), keep or forget a memory://review candidate."""
        user = current_user()
        if action == "complete" or action == "reopen":
            return await app.todos.set_done(user, memory_id, done=action == "complete", reason=reason)
        return await app.review.decide(user, memory_id, action, reason)

    return mark_memory
