"""The user card (`memory://user-card`): who the user is, core memories and open todos, in <= 2 KB of Markdown.
A section cut short ends with `- … +N`, N counted over all of them; the todos keep room for the most urgent one
(core/formatting.user_card).

Everything on it (headings, labels, the todos' due times) is in one language, the one core/text.shown_language
gives: POCKETMEM_LOCALE, or with `auto` the language of the message asked about (recall, memory_context) when it
has one of its own, else (👍, ok, 2333, or the card read on its own) that of the user's content: the card's own
words, or when they say nothing, the newest memories' (`content_language`, `user_language`). memory_context shows
the persona and the card under the same words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from pocketmem.base.config import Settings
from pocketmem.base.models import Memory
from pocketmem.core.formatting import CardSection, due_label, user_card
from pocketmem.core.profile_text import profile_summary
from pocketmem.core.text import guess_language, own_language, stated_language
from pocketmem.store.base import Transactions
from pocketmem.store.roles import StoreReader
from pocketmem.store.types import MemoryFilter

CARD_CORE_LIMIT = 60
CARD_TODO_LIMIT = 20
NEWEST_SAID = 20  # the newest memories whose words decide the language when the card's say nothing

# The card's words by shown language; the Chinese headings are those of User.md and Persona.md.
CARD_WORDS: dict[str, dict[str, str]] = {
    "en": {
        "title": "User card", "who": "Who", "core": "Core memories", "todos": "Open todos", "persona": "Persona",
        "id": "id: {}", "temporary": "Temporary mode", "off": "Memories are off: nothing is recalled or stored.",
    },
    "zh": {
        "title": "用户卡", "who": "身份", "core": "核心记忆", "todos": "待办", "persona": "人设",
        "id": "用户 id：{}", "temporary": "临时模式", "off": "记忆已关闭：不会回忆，也不会记下任何内容。",
    },
}


def temporary_card(lang: str) -> str:
    words = CARD_WORDS[lang]
    return user_card(words["title"], [CardSection(words["temporary"], [words["off"]])])


def who_lines(user_id: str, identity: Mapping[str, object], lang: str, display_name: str | None = None) -> list[str]:
    """The identity the user confirmed (称呼、职业背景、技术偏好、协作习惯); a display name stands in for a missing
    name, and the bare id shows only when there is nothing else."""
    values = {k: str(v) for k, v in identity.items() if v}
    if display_name and not values.get("name"):
        values["name"] = display_name
    return profile_summary("identity", values, lang) or [CARD_WORDS[lang]["id"].format(user_id)]


def _card_said(identity: Mapping[str, object], core: Sequence[Memory], todos: Sequence[Memory]) -> str:
    return "\n".join([*map(str, identity.values()), *(m.content for m in core), *(t.content for t in todos)])


async def _language_of(reader: StoreReader, user_id: str, card_said: str) -> str:
    """The language of the user's content: the card's words when they have one of their own, else the newest
    memories'."""
    if (lang := own_language(card_said)) is not None:
        return lang
    newest, _ = await reader.list_memories(user_id, MemoryFilter(limit=NEWEST_SAID))
    return guess_language("\n".join(m.content for m in newest))


async def content_language(store: Transactions, user_id: str, now: datetime) -> str:
    """The language of the user's own content (the card's words, else the newest memories'): what `auto` speaks
    when the message says nothing of its own (core/text.shown_language)."""
    async with store.read() as reader:
        identity = (await reader.get_profile(user_id)).get("identity", {})
        core = await reader.core_memories(user_id, CARD_CORE_LIMIT)
        todos = await reader.open_todos(user_id, now, CARD_TODO_LIMIT)
        return await _language_of(reader, user_id, _card_said(identity, core, todos))


async def user_language(store: Transactions, user_id: str, settings: Settings, message: str, now: datetime) -> str:
    """The language the model reads for `message` (core/text.shown_language): POCKETMEM_LOCALE, or with `auto`
    the message's own, else the user's content's; the store is read only in that last case."""
    return stated_language(settings.locale, message) or await content_language(store, user_id, now)


async def render_user_card(
    store: Transactions, user_id: str, settings: Settings, now: datetime, lang: str | None = None
) -> str:
    """The card in `lang`; without one (the resource, the Markdown export), in the locale or the language of the
    user's content (`content_language`, from what the card reads)."""
    async with store.read() as reader:
        user = await reader.get_user(user_id)
        identity = (await reader.get_profile(user_id)).get("identity", {})
        core = await reader.core_memories(user_id, CARD_CORE_LIMIT)
        todos = await reader.open_todos(user_id, now, CARD_TODO_LIMIT)
        core_total = await reader.count_core(user_id) if len(core) == CARD_CORE_LIMIT else len(core)
        todo_total = await reader.count_open_todos(user_id, now) if len(todos) == CARD_TODO_LIMIT else len(todos)
        if lang is None:
            lang = stated_language(settings.locale, "") or await _language_of(
                reader, user_id, _card_said(identity, core, todos)
            )
    words = CARD_WORDS[lang]
    open_todos = []
    for todo in sorted(todos, key=lambda t: (t.due_at is None, t.due_at or t.created_at)):
        if todo.due_at is None:
            open_todos.append(todo.content)
            continue
        label = due_label(todo.due_at, now, settings.zone, lang)
        open_todos.append(f"{todo.content}（{label}）" if lang == "zh" else f"{todo.content} ({label})")
    return user_card(
        words["title"],
        [
            CardSection(words["who"], who_lines(user_id, identity, lang, user.get("display_name") if user else None)),
            CardSection(words["core"], [m.content for m in core], core_total),
            CardSection(words["todos"], open_todos, todo_total),
        ],
    )
