"""The 8 contract tools and mark_memory (todos and review decisions). Each body checks types (pydantic, via the
signature), makes one call into the service and maps pocketmem errors to MCP tool errors whose text says what to
send instead. No SQL here.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Literal, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, BeforeValidator, Field

from pocketmem.app import PocketMem
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
from pocketmem.core.instants import not_a_number
from pocketmem.service.add_request import AddRequest
from pocketmem.service.retrieval import RecallRequest

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

TOOL_NAMES = (
    "recall_memories",
    "add_memory",
    "patch_core_memory",
    "confirm_pending",
    "list_trash",
    "restore",
    "forget_memory",
    "list_memories",
    "mark_memory",
)

Unit = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
# An ISO 8601 instant; JSON numbers are refused (expires_at=-1 is not a date). Range checks happen in the service.
Instant = Annotated[datetime, BeforeValidator(not_a_number)]
MemoryId = Annotated[str, Field(min_length=1, max_length=64, description="A memory id as returned by pocketmem.")]


class ScoresIn(BaseModel):
    """E/I/P/J scores, each 0..1. Leave out any you are unsure of; the category's default fills it."""

    emotion: Unit | None = Field(None, description="E: emotional weight; negative feelings weigh more.")
    info: Unit | None = Field(None, description="I: how much useful information it carries.")
    persistence: Unit | None = Field(
        None,
        description="P: how long it stays true. 1 = core (stable likes/dislikes, chronic illness, name, "
        "birthday): never decays, never evicted. ~0.5 long-term plan, ~0.1 short-term fact.",
    )
    judge: Unit | None = Field(None, description="J: your overall judgement of its importance.")


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

    wrapper.__doc__ = inspect.cleandoc(fn.__doc__ or "")  # the tool description, without source indentation
    return wrapper


def register_tools(mcp: MCPServer, app: PocketMem, current_user: Callable[[], str]) -> None:
    @mcp.tool(
        title="Recall memories",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    )
    @tool_errors
    async def recall_memories(
        query: Annotated[str, Field(description="The user's current message, verbatim.")],
        context: Annotated[
            list[str] | None,
            Field(description="Up to 3 recent conversation lines before the message, oldest first. "
                  "Send them when the message is vague (e.g. 那就按第一个方案办吧 / 'ok, do that').",
                  max_length=3),
        ] = None,
        keywords: Annotated[
            list[str] | None,
            Field(description="2-6 short search terms you infer: synonyms, the topic, the other language's words "
                  "(e.g. for 晚饭想吃点清淡的: 饮食, 口味, 胃, 忌口). Greatly improves recall.", max_length=12),
        ] = None,
        top_k: Annotated[int | None, Field(ge=1, le=50, description="How many memories at most (default 3).")] = None,
        categories: Annotated[list[Category] | None, Field(description="Only these categories.")] = None,
        include_history: Annotated[
            bool, Field(description="Also return superseded (outdated) versions, marked as outdated.")
        ] = False,
        explain: Annotated[bool, Field(description="Add each hit's score breakdown.")] = False,
        used: Annotated[
            list[str] | None,
            Field(description="Ids of memories from your previous recall that really shaped your last reply "
                  "(not those merely recalled). They are reinforced more than a recall.", max_length=50),
        ] = None,
        temporary: Annotated[
            bool, Field(description="Temporary conversation: recall nothing and record nothing.")
        ] = False,
    ) -> RecallResult:
        """Recall what you know about the user that matters for their current message.

        Call this before answering a user message. Returns at most top_k relevant memories (often none:
        nothing is returned when nothing is relevant) and `injection`, text ready to paste into your
        context, one line per memory with its age, e.g. 3天前的对话摘要“你不喜欢香菜，吃到会很反感。”.
        Also returns `pending_confirmations`: memories waiting for the user's yes/no; ask at a natural
        moment and answer with confirm_pending. `reminders` are todos that are due (also first in
        `injection`): mention them once, and call mark_memory(action="complete") when the user has done
        one. Pass `used` with the ids that shaped your previous reply.
        """
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

    @mcp.tool(
        title="Add a memory",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    )
    @tool_errors
    async def add_memory(
        content: Annotated[
            str,
            Field(description="One fact, preference, lesson, plan, person, todo or conversation summary, as one "
                  "or two sentences in the language the user spoke. Do not translate.", min_length=1),
        ],
        category: Annotated[
            Category,
            Field(description="preference, fact, lesson, goal, person, todo, event, episode (a conversation "
                  "summary; expires after 14 days), context, or project (the state of a project the user works "
                  "on: shown in Project.md / memory://project)."),
        ] = Category.fact,
        keywords: Annotated[
            list[str] | None,
            Field(description="3-6 short terms that help find it later: synonyms, broader topic, the other "
                  "language's words (香菜 -> coriander, 忌口, 饮食).", max_length=12),
        ] = None,
        scores: Annotated[
            ScoresIn | None, Field(description="E/I/P/J scores; persistence 1 makes a core memory.")
        ] = None,
        confidence: Annotated[
            Unit,
            Field(description="How sure you are the user meant this. >=0.85 stored; 0.60-0.85 waits for the "
                  "user's confirmation; <0.60 discarded. Default 1 (the user said it plainly)."),
        ] = 1.0,
        supersedes: Annotated[
            str | None,
            Field(description="Id of an older memory this one corrects or updates (it is kept as history). "
                  "For core memories use patch_core_memory instead.", max_length=64),
        ] = None,
        created_at: Annotated[Instant | None, Field(description="When it was said, ISO 8601; default now.")] = None,
        valid_from: Annotated[Instant | None, Field(description="When it became true; default created_at.")] = None,
        due_at: Annotated[Instant | None, Field(description="For todos: when it is due, ISO 8601.")] = None,
        remind_at: Annotated[Instant | None, Field(description="For todos: when to remind.")] = None,
        expires_at: Annotated[Instant | None, Field(description="When it stops mattering.")] = None,
        source: Annotated[
            str | None, Field(description="Where it came from, e.g. chat, import.", max_length=500)
        ] = None,
        source_ref: Annotated[
            str | None, Field(description="Id of the source message or session.", max_length=500)
        ] = None,
        operation_id: Annotated[
            str | None,
            Field(description="Idempotency key: retrying with the same id returns the first result and writes "
                  "nothing twice.", max_length=200),
        ] = None,
        temporary: Annotated[
            bool, Field(description="Temporary conversation: store nothing (status discarded, reason temporary).")
        ] = False,
    ) -> AddResult:
        """Remember something about the user for future conversations.

        Save facts that will matter later: preferences and dislikes, facts about their life and work,
        lessons learned, plans, people, todos, and short summaries of conversations. Write in the user's
        language. If it corrects an older memory, pass that memory's id as `supersedes`. Status tells
        what happened: stored, pending (ask the user, then confirm_pending), discarded (see `reason`), or
        duplicate (already known; reinforced). Memories beyond the cap move the least important ones to the
        trash. Never save secrets: passwords, API keys, private keys, card and ID numbers are redacted (see
        `redacted`) or the memory is refused. For a todo, give due_at and, optionally, remind_at.
        """
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

    @mcp.tool(
        title="Patch a core memory",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
        ),
    )
    @tool_errors
    async def patch_core_memory(
        memory_id: MemoryId,
        patch: Annotated[str, Field(description="The new information, in the user's language.", min_length=1)],
        mode: Annotated[
            Literal["append", "replace"],
            Field(description="append adds a dated note: 你很爱吃辣。（2026-11-26：最近胃炎，暂时不吃辣） ; "
                  "replace swaps the whole content."),
        ] = "append",
        reason: Annotated[
            str | None, Field(description="Why it changed (kept with the revision).", max_length=500)
        ] = None,
    ) -> PatchResult:
        """Update a core memory (persistence 1) when the user's newer words contradict or refine it.

        The user's latest statement wins. `append` keeps the original and adds a dated note in
        parentheses; `replace` rewrites it. The previous text is kept as a revision. Only core
        memories are patched; for others call add_memory with supersedes.
        """
        return await app.patching.patch_core(current_user(), memory_id, patch, mode, reason)

    @mcp.tool(
        title="Confirm, reject or snooze a pending memory",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    )
    @tool_errors
    async def confirm_pending(
        pending_id: Annotated[
            str, Field(min_length=1, max_length=64, description="pending_id from add_memory or recall.")
        ],
        action: Annotated[
            Literal["confirm", "reject", "snooze"],
            Field(description="confirm stores it; reject drops it for good; snooze asks again later."),
        ],
        snooze_hours: Annotated[
            float | None, Field(
                gt=0, le=2160, allow_inf_nan=False, description="For snooze: hours to wait (default 24)."
            )
        ] = None,
    ) -> ConfirmResult:
        """Act on the user's answer about an uncertain memory (one that add_memory left pending)."""
        return await app.pending.confirm_pending(current_user(), pending_id, action, snooze_hours)

    @mcp.tool(
        title="List the trash",
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False),
    )
    @tool_errors
    async def list_trash(
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
        offset: Annotated[int, Field(ge=0, le=1_000_000)] = 0,
    ) -> TrashList:
        """List forgotten, evicted, replaced and expired memories that can still be restored, newest first."""
        return await app.trash.list_trash(current_user(), limit, offset)

    @mcp.tool(
        title="Restore from the trash",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    )
    @tool_errors
    async def restore(memory_id: MemoryId) -> RestoreResult:
        """Bring a memory back from the trash (possible until it is purged, 7 days after deletion)."""
        return await app.trash.restore(current_user(), memory_id)

    @mcp.tool(
        title="Forget a memory",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
        ),
    )
    @tool_errors
    async def forget_memory(
        memory_id: MemoryId,
        reason: Annotated[
            str | None, Field(description="Why, e.g. the user asked; kept in the log.", max_length=500)
        ] = None,
    ) -> ForgetResult:
        """Move a memory to the trash when it is wrong or the user asks you to forget it.

        It stops being recalled at once and can be restored for 7 days, then it is purged.
        """
        return await app.trash.forget(current_user(), memory_id, reason)

    @mcp.tool(
        title="List memories",
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False),
    )
    @tool_errors
    async def list_memories(
        category: Annotated[Category | None, Field(description="Only this category.")] = None,
        status: Annotated[
            Literal["active", "superseded", "pending", "trashed"],
            Field(description="active (default), superseded (history), pending (awaiting confirmation), trashed."),
        ] = "active",
        text: Annotated[str | None, Field(description="Only memories containing this text.", max_length=200)] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
        offset: Annotated[int, Field(ge=0, le=1_000_000)] = 0,
        since: Annotated[
            datetime | None, Field(description="Only memories recorded at or after this time, ISO 8601 (a date alone "
                                   "means its midnight in the user's time zone).")
        ] = None,
        until: Annotated[
            datetime | None, Field(description="Only memories recorded before this time, ISO 8601.")
        ] = None,
    ) -> MemoryList:
        """Browse stored memories, newest first, with ids, categories, importance and status.

        `counts` gives how many match per category, so "how many todos did I note last month" is one call:
        list_memories(category="todo", since="2026-10-01", until="2026-11-01") -> total (and counts).
        """
        return await app.listing.list_memories(
            current_user(), category=category, status=status, text=text, limit=limit, offset=offset,
            since=since, until=until,
        )

    @mcp.tool(
        title="Complete a todo, or decide a memory review",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
        ),
    )
    @tool_errors
    async def mark_memory(
        memory_id: MemoryId,
        action: Annotated[
            Literal["complete", "reopen", "promote", "keep", "forget"],
            Field(description="complete / reopen: a todo is done (or not after all). promote / keep / forget: "
                  "your decision on a memory from the memory://review resource."),
        ],
        reason: Annotated[str | None, Field(description="Why (kept in the log).", max_length=500)] = None,
    ) -> MarkResult:
        """Record a decision about one memory.

        complete: the user has done a todo; it leaves the reminders and the user card (reopen undoes it).
        Review (read memory://review for the candidates and how to judge them): promote makes a memory core
        (never decays, never evicted); keep leaves it as it is and takes it off the queue; forget moves it
        to the trash (restorable for 7 days). Nothing is promoted or forgotten unless you decide so.
        """
        user = current_user()
        if action == "complete" or action == "reopen":
            return await app.todos.set_done(user, memory_id, done=action == "complete", reason=reason)
        return await app.review.decide(user, memory_id, action, reason)

