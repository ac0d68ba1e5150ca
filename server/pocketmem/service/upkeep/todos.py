"""Todos (docs/how-it-decides.md, "Todos"): reminders when they come due, and completing or reopening them.

A todo is a memory with category `todo`, optionally with `due_at` and `remind_at`.

    open       status active and completed_at empty
    due        open, and remind_at (or, without one, due_at) has come     -> a reminder in recall_memories (at most
                                                                            three, the latest come due first)
    overdue    open, and due_at has passed                                -> flagged in reminders and the user card
    completed  completed_at set: it leaves the user card and the reminders, and stays recallable as
               a done todo (marked 已完成 / done), so "did I send the report?" still finds it;
               it then ages like any other memory.
"""

from __future__ import annotations

from datetime import datetime, tzinfo

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import Conflict, ConflictReason, NotFound
from pocketmem.base.models import Category, EventKind, Memory, Status
from pocketmem.base.results import MarkResult, MemoryView, RecallHit, ReminderView
from pocketmem.core import privacy
from pocketmem.core.formatting import due_label, is_overdue
from pocketmem.core.shown_time import absolute
from pocketmem.store.base import Transactions
from pocketmem.store.roles import MemoryReads

MAX_REASON_CHARS = 500

REMINDERS_SHOWN = 3


def open_todo_label(shown: Memory | RecallHit, now: datetime, zone: tzinfo, locale: str) -> str | None:
    """The due label of an open todo with a due time wherever it is shown (a recalled line, a recent one), so a
    todo beyond the reminders shown keeps its due time and overdue mark. None for any other memory; the caller
    leaves out a todo that is no longer current (outdated)."""
    if shown.category != Category.todo or shown.completed_at is not None or shown.due_at is None:
        return None
    return due_label(shown.due_at, now, zone, locale)


async def due_reminders(
    reader: MemoryReads, user_id: str, now: datetime, limit: int = REMINDERS_SHOWN
) -> list[Memory]:
    """Open todos whose reminder time has come, the one that came due last first (one indexed range scan), so a
    todo that has just come due is always among those shown however many older ones are still open; those stay
    on the user card, marked overdue. A todo past its expires_at is not reminded, as recall no longer shows it."""
    return await reader.open_todos(user_id, now, limit, due_by=now, latest_first=True)


def reminder_view(todo: Memory, now: datetime, zone: tzinfo, locale: str) -> ReminderView:
    return ReminderView(
        id=todo.id,
        content=todo.content,
        due_at=todo.due_at,
        remind_at=todo.remind_at,
        overdue=is_overdue(todo.due_at, now),
        label=due_label(todo.due_at, now, zone, locale),
    )


class Todos:
    def __init__(self, settings: Settings, store: Transactions, clock: Clock) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock

    async def set_done(
        self, user_id: str, memory_id: str, done: bool, reason: str | None = None
    ) -> MarkResult:
        if reason is not None:
            reason = privacy.kept_text(reason, "reason", max_chars=MAX_REASON_CHARS)
        now = self.clock.now()
        async with self.store.write(user_id=user_id) as tx:
            todo = await tx.get_memory(user_id, memory_id)
            if todo is None:
                raise NotFound(
                    f"memory_id: no memory with id {memory_id!r}; find todos with list_memories(category='todo')"
                )
            if todo.category != Category.todo:
                raise Conflict(
                    f"memory {memory_id} is a {todo.category.value}, not a todo; only todos are completed"
                )
            if todo.status != Status.active:
                raise Conflict(
                    f"memory {memory_id} is {todo.status.value}; only an active todo can be completed or reopened",
                    ConflictReason.not_active, status=todo.status.value,
                )
            if done and todo.completed_at is not None:
                when = absolute(todo.completed_at, self.settings.zone)  # a time a person sees
                raise Conflict(f"todo {memory_id} was already completed on {when}")
            if not done and todo.completed_at is None:
                raise Conflict(f"todo {memory_id} is open; nothing to reopen")
            await tx.update_memory(user_id, memory_id, completed_at=now if done else None, updated_at=now)
            await tx.add_event(
                user_id,
                EventKind.completed if done else EventKind.reopened,
                now,
                memory_id=memory_id,
                payload={"due_at": todo.due_at.isoformat() if todo.due_at else None, "reason": reason},
            )
            updated = await tx.get_memory(user_id, memory_id)
        assert updated is not None
        if done:
            message = (
                "Done: it left the user card and the reminders; it stays recallable as a completed todo."
            )
        else:
            message = "Reopened: it is back among the open todos."
        return MarkResult(
            memory=MemoryView.of(updated), action="complete" if done else "reopen", message=message
        )
