"""The user card (`memory://user-card`): who the user is, core memories and open todos, in <= 2 KB of Markdown."""

from __future__ import annotations

from datetime import datetime

from .config import Settings
from .formatting import user_card
from .models import Category, Status
from .store import MemoryFilter, Store

CARD_CORE_LIMIT = 60
CARD_TODO_LIMIT = 20


async def render_user_card(store: Store, user_id: str, settings: Settings, now: datetime) -> str:
    async with store.read() as reader:
        user = await reader.get_user(user_id)
        core = await reader.core_memories(user_id, CARD_CORE_LIMIT)
        todos, _ = await reader.list_memories(
            user_id, MemoryFilter(statuses=(Status.active,), category=Category.todo, limit=CARD_TODO_LIMIT)
        )
    zone = settings.zone
    who = [f"id: {user_id}"]
    if user and user.get("display_name"):
        who.insert(0, f"name: {user['display_name']}")
    open_todos = []
    for todo in sorted(
        (t for t in todos if t.completed_at is None),
        key=lambda t: (t.due_at is None, t.due_at or t.created_at),
    ):
        if todo.due_at is not None:
            due = todo.due_at.astimezone(zone)
            flag = " (overdue)" if todo.due_at < now else ""
            open_todos.append(f"{todo.content} — due {due:%Y-%m-%d %H:%M}{flag}")
        else:
            open_todos.append(todo.content)
    return user_card(
        "User card",
        [
            ("Who", who),
            ("Core memories", [m.content for m in core]),
            ("Open todos", open_todos),
        ],
    )
