"""Tool errors in plain words, message grammar, and the one log line per tool call (in process, both eras)."""

from __future__ import annotations

import logging

import pytest
from mcp import Client

from pocketmem.mcp.server import build_server

pytestmark = pytest.mark.anyio

SECRET_TEXT = "我的狗叫旺财, it hides under the piano"


async def error_text(client: Client, name: str, args: dict) -> str:
    result = await client.call_tool(name, args)
    assert result.is_error, result.structured_content
    text = result.content[0].text
    assert "pydantic" not in text and "http" not in text, text
    return text


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("add_memory", {"content": "x", "category": "hobby"},
         "category must be one of: preference, fact, lesson, goal, person, todo, event, episode, context"),
        ("add_memory", {"content": ""}, "content must not be empty"),
        ("add_memory", {"content": "x", "confidence": 2}, "confidence must be at most 1"),
        ("add_memory", {"content": "x", "due_at": "next week"}, "due_at must be an ISO 8601 date or time"),
        ("add_memory", {"content": "x", "scores": {"persistence": -1}}, "scores.persistence must be at least 0"),
        ("add_memory", {}, "content is required"),
        ("recall_memories", {"query": "x", "top_k": 0}, "top_k must be at least 1"),
        ("recall_memories", {"query": "x", "context": ["a", "b", "c", "d"]}, "context takes at most 3 items"),
        ("confirm_pending", {"pending_id": "p", "action": "maybe"}, "action must be one of: confirm, reject, snooze"),
        ("list_memories", {"status": "gone"}, "status must be one of: active, superseded, pending, trashed"),
        ("list_trash", {"limit": "many"}, "limit must be a whole number"),
        # true and false are not numbers (pydantic alone reads true as 1)
        ("recall_memories", {"query": "x", "top_k": True}, "top_k must be a number, not true or false"),
        ("list_memories", {"limit": True}, "limit must be a number, not true or false"),
        ("add_memory", {"content": "x", "confidence": True}, "confidence must be a number, not true or false"),
        ("add_memory", {"content": "x", "scores": {"persistence": True}},
         "scores.persistence must be a number, not true or false"),
        ("confirm_pending", {"pending_id": "p", "action": "snooze", "snooze_hours": False},
         "snooze_hours must be a number, not true or false"),
        # an empty keyword is refused by recall as by add_memory
        ("recall_memories", {"query": "x", "keywords": ["香菜", " "]}, "keywords[1]: must not be empty"),
        ("add_memory", {"content": "x", "keywords": [""]}, "keywords[0]: must not be empty"),
        # a filter with nothing left after cleaning would list everything
        ("list_memories", {"text": "\x00"}, "text: must not be empty"),
        ("list_memories", {"text": "\u200b "}, "text: must not be empty"),
        # stored, it would never be recalled
        ("add_memory", {"content": "用户要交房租", "expires_at": "2020-01-01"}, "expires_at: is not in the future"),
        ("add_memory", {"content": "x", "expires_at": "2026-11-26T10:00+08:00"}, "expires_at: is not in the future"),
        # kept, it would never remind anyone: only a todo is reminded
        ("add_memory", {"content": "周一要体检，不能吃早饭", "category": "event", "due_at": "2026-11-30T08:00"},
         'due_at: only a todo has a due time and is reminded; add what the user should be reminded of (an '
         'appointment, an interview, a check-up) as category "todo" with due_at, or leave due_at out'),
        ("add_memory", {"content": "给房东打电话", "category": "fact", "remind_at": "2026-11-28T09:00"},
         'remind_at: only a todo has a due time and is reminded'),
        ("add_memory", {"content": "用户的护照下个月到期", "due_at": "2026-12-25"}, "due_at: only a todo"),
    ],
)
async def test_argument_errors_name_the_field_and_the_rule(client, name, args, expected):
    before = (await client.call_tool("list_memories", {})).structured_content
    text = await error_text(client, name, args)
    assert expected in text
    assert (await client.call_tool("list_memories", {})).structured_content == before


async def test_stored_message_uses_the_right_article(client):
    event = await client.call_tool("add_memory", {"content": "周五去看牙医", "category": "event"})
    assert event.structured_content["message"].startswith("Stored as an event memory"), event.structured_content
    fact = await client.call_tool("add_memory", {"content": "用户住在杭州", "category": "fact"})
    assert fact.structured_content["message"].startswith("Stored as a fact memory")


async def test_one_info_line_per_tool_call_without_memory_text(client, caplog):
    caplog.set_level(logging.DEBUG, logger="pocketmem")
    await client.call_tool("add_memory", {"content": SECRET_TEXT, "category": "fact"})
    await client.call_tool("recall_memories", {"query": "旺财"})
    await client.call_tool("add_memory", {"content": "x", "category": "hobby"})
    lines = [r.getMessage() for r in caplog.records if r.name == "pocketmem.calls" and r.levelno == logging.INFO]
    assert len(lines) == 3, lines
    assert lines[0].startswith("tool add_memory user=global outcome=ok ms=")
    assert lines[1].startswith("tool recall_memories user=global outcome=ok ms=")
    assert lines[2].startswith("tool add_memory user=global outcome=invalid ms=")
    everything = "\n".join(r.getMessage() for r in caplog.records)
    assert "旺财" not in everything and "piano" not in everything


async def test_log_content_setting_logs_the_arguments(tmp_path, app, caplog, make_settings):
    settings = make_settings(tmp_path, log_content=True)
    caplog.set_level(logging.DEBUG, logger="pocketmem")
    async with Client(build_server(settings, app=app)) as client:
        await client.call_tool("add_memory", {"content": SECRET_TEXT})
    assert any("piano" in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)


async def test_ready_line_names_database_embedder_user_and_transport(settings, app, caplog):
    caplog.set_level(logging.INFO, logger="pocketmem")
    async with Client(build_server(settings, app=app)) as client:
        await client.list_tools()
    ready = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ready:")]
    assert ready and settings.database_label in ready[0]
    assert f"embedder {app.embedder.tag}" in ready[0] and "user global" in ready[0] and "stdio" in ready[0]
