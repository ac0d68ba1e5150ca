"""The user card (`memory://user-card`): who the user is, core memories and open todos, in <= 2 KB of Markdown."""

from __future__ import annotations

from datetime import datetime

from pocketmem.base.config import Settings
from pocketmem.core.formatting import user_card
from pocketmem.core.profile_text import profile_summary
from pocketmem.core.text import has_cjk
from pocketmem.store.base import Transactions

CARD_CORE_LIMIT = 60
CARD_TODO_LIMIT = 20
TEMPORARY_CARD = user_card("User card", [("Temporary mode", ["Memories are off: nothing is recalled or stored."])])


async def render_user_card(store: Transactions, user_id: str, settings: Settings, now: datetime) -> str:
    async with store.read() as reader:
        user = await reader.get_user(user_id)
        identity = (await reader.get_profile(user_id)).get("identity", {})
        core = await reader.core_memories(user_id, CARD_CORE_LIMIT)
        todos = await reader.open_todos(user_id, CARD_TODO_LIMIT)
    zone = settings.zone
    # The identity the user confirmed (称呼、职业背景、技术偏好、协作习惯); the bare id only when there is none.
    lang = "zh" if any(has_cjk(str(v)) for v in identity.values()) else "en"
    who = profile_summary("identity", {k: str(v) for k, v in identity.items()}, lang) or [f"id: {user_id}"]
    if user and user.get("display_name") and not identity.get("name"):
        who.insert(0, f"name: {user['display_name']}")
    open_todos = []
    for todo in sorted(todos, key=lambda t: (t.due_at is None, t.due_at or t.created_at)):
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
