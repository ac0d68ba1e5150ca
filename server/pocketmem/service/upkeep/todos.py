"""Todos (docs/how-it-decides.md, "Todos"): reminders when they come due, and completing or reopening them.

A todo is a memory with category `todo`, optionally with `due_at` and `remind_at`.

    open       status active and completed_at empty
    due        open, and remind_at (or, without one, due_at) has come     -> a reminder in recall_memories (at most
               (`is_due`)                                                   three, the latest come due first); only
                                                                            a due todo is called a reminder anywhere
                                                                            (`shown_item`), one not due yet shows its
                                                                            due time
    overdue    open, and due_at has passed                                -> flagged in reminders and the user card
    completed  completed_at set: it leaves the user card and the reminders, and stays recallable as
               a done todo (marked 已完成 / done), so "did I send the report?" still finds it;
               it then ages like any other memory.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, tzinfo

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import Conflict, ConflictReason, NotFound
from pocketmem.base.models import Category, EventKind, Memory, Status
from pocketmem.base.results import MarkResult, MemoryView, RecallHit, ReminderView
from pocketmem.core import privacy
from pocketmem.core.formatting import InjectionItem, due_label, is_overdue
from pocketmem.core.shown_time import absolute
from pocketmem.store.base import Transactions
from pocketmem.store.roles import MemoryReads

MAX_REASON_CHARS = 500

REMINDERS_SHOWN = 3


def is_due(todo: Memory | RecallHit, now: datetime) -> bool:
    """What is due, the one rule: an open todo whose remind_at, or without one due_at, has come. The store reads
    the same from its rows (open_todos(due_by=now): recall's reminders, the page's), and every line that calls a
    todo a reminder asks this."""
    when = todo.remind_at or todo.due_at
    return todo.category == Category.todo and todo.completed_at is None and when is not None and when <= now


def shown_item(
    shown: Memory | RecallHit, days: int, now: datetime, zone: tzinfo, locale: str, *, outdated: bool = False
) -> InjectionItem:
    """A recalled or recent memory as an injection line wherever it is shown (recall's injection, memory_context):
    a due todo as a reminder with its due label, so one beyond the reminders listed keeps its overdue mark; an open
    todo not due yet with its due time, never as a reminder; a completed one marked done. An outdated version is
    no reminder."""
    done = shown.completed_at is not None
    item = InjectionItem(content=shown.content, days=days, outdated=outdated, done=done)
    if outdated or shown.category != Category.todo or done:
        return item
    if is_due(shown, now):
        return replace(item, reminder=due_label(shown.due_at, now, zone, locale))
    return replace(item, due=None if shown.due_at is None else due_label(shown.due_at, now, zone, locale))


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
