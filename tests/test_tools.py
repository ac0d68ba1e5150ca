"""The contract surface through the SDK's own client, in process, on both protocol eras."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.models import Category
from pocketmem.core.rubric import server_rubric
from pocketmem.mcp.server import build_server

from .helpers import call, error

pytestmark = [pytest.mark.anyio]

CONTRACT_TOOLS = {
    "recall_memories",
    "add_memory",
    "patch_core_memory",
    "confirm_pending",
    "list_trash",
    "restore",
    "forget_memory",
    "list_memories",
    "remember_conversation",  # server-side extraction (beside the 8 tools of the design)
}
ADDED_TOOLS = {"mark_memory", "update_profile"}  # beyond the contract: todos and review decisions, the profile
READ_ONLY = {"list_trash", "list_memories"}  # recall counts uses and takes `used` feedback: it writes
# The argument names are the contract (design.md): outside checks call them.
ARGUMENTS = {
    "recall_memories": {"query", "context", "keywords", "top_k", "categories", "include_history", "explain", "used",
                        "temporary"},
    "add_memory": {"content", "category", "keywords", "scores", "confidence", "supersedes", "created_at",
                   "valid_from", "due_at", "remind_at", "expires_at", "source", "source_ref", "operation_id",
                   "temporary"},
    "patch_core_memory": {"memory_id", "patch", "mode", "reason"},
    "confirm_pending": {"pending_id", "action", "snooze_hours"},
    "list_trash": {"limit", "offset"},
    "restore": {"memory_id"},
    "forget_memory": {"memory_id", "reason"},
    "list_memories": {"category", "status", "text", "limit", "offset", "since", "until"},
    "mark_memory": {"memory_id", "action", "reason"},
    "remember_conversation": {"messages", "hints"},
    "update_profile": {"persona", "identity", "confirmed"},
}


async def state(client: Client) -> dict:
    """What rejected calls must not change: every list, and the stats."""
    out = {}
    for status in ("active", "superseded", "pending", "trashed"):
        listed = await call(client, "list_memories", {"status": status, "limit": 500})
        out[status] = sorted(json.dumps(i, sort_keys=True) for i in listed["items"])
    stats = json.loads((await client.read_resource("memory://stats")).contents[0].text)
    out["stats"] = {k: v for k, v in stats.items() if k != "events"}
    return out


async def test_the_tool_set_is_the_contract(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == CONTRACT_TOOLS | ADDED_TOOLS
    for name, tool in tools.items():
        assert tool.description and len(tool.description) > 40, name
        assert tool.output_schema is not None, name
        assert tool.annotations is not None and tool.annotations.read_only_hint == (name in READ_ONLY), name
        assert set(tool.input_schema["properties"]) == ARGUMENTS[name], name


async def test_the_tool_definitions_fit_in_8000_bytes(client):
    """Hosts send names, descriptions and input schemas with every model request (bench/tool_sizes.py)."""
    tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in (await client.list_tools()).tools]
    lean = [{key: tool[key] for key in ("name", "description", "inputSchema")} for tool in tools]
    assert len(json.dumps(lean, ensure_ascii=False, separators=(",", ":")).encode()) <= 8000


# The keywords of JSON Schema 2020-12 (core, applicator, validation, meta-data, format annotation, content): a
# validator or a host (Gemini-backed ones answer 400 "Unknown name") knows no other.
JSON_SCHEMA_KEYWORDS = {
    "$schema", "$id", "$ref", "$defs", "$anchor", "$dynamicRef", "$dynamicAnchor", "$comment", "$vocabulary",
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "prefixItems", "items", "contains",
    "properties", "patternProperties", "additionalProperties", "propertyNames", "unevaluatedItems",
    "unevaluatedProperties", "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains",
    "minContains", "maxProperties", "minProperties", "required", "dependentRequired", "title", "description",
    "default", "deprecated", "readOnly", "writeOnly", "examples", "format", "contentEncoding", "contentMediaType",
    "contentSchema",
}
NAMED = {"properties", "$defs", "patternProperties", "dependentSchemas"}  # their keys are names, not keywords


def unknown_keywords(schema: object, where: str) -> list[str]:
    if isinstance(schema, list):
        return [found for i, item in enumerate(schema) for found in unknown_keywords(item, f"{where}[{i}]")]
    if not isinstance(schema, dict):
        return []
    found = [f"{where}.{key}" for key in schema if key not in JSON_SCHEMA_KEYWORDS]
    for key, value in schema.items():
        if key in NAMED and isinstance(value, dict):
            found += [f for name, sub in value.items() for f in unknown_keywords(sub, f"{where}.{key}.{name}")]
        elif key not in ("enum", "const", "default", "examples", "required"):
            found += unknown_keywords(value, f"{where}.{key}")
    return found


async def test_every_input_schema_speaks_json_schema_only(client):
    """Bounds are `minimum`/`maximum`, never pydantic's `ge`/`le`, which validators ignore and some hosts refuse."""
    tools = (await client.list_tools()).tools
    assert [found for tool in tools for found in unknown_keywords(tool.input_schema, tool.name)] == []
    schemas = {tool.name: tool.input_schema["properties"] for tool in tools}
    assert {k: v for k, v in schemas["recall_memories"]["top_k"].items() if k != "description"} == {
        "minimum": 1, "maximum": 50, "type": "integer"
    }
    assert schemas["confirm_pending"]["snooze_hours"]["exclusiveMinimum"] == 0
    assert schemas["add_memory"]["scores"]["properties"]["persistence"]["maximum"] == 1
    # a date alone is accepted, so no `format: date-time`; the description says what is taken
    for tool, name in (("add_memory", "due_at"), ("add_memory", "created_at"), ("list_memories", "since")):
        assert schemas[tool][name] == {"type": "string"}, (tool, name)
    assert "ISO 8601 date or date-time" in next(t.description for t in tools if t.name == "add_memory")
    assert (await error(client, "recall_memories", {"query": "x", "top_k": True})).startswith(
        "invalid arguments: top_k must be a number, not true or false"
    )


async def test_what_a_model_reads_of_the_tools_prompts_and_resources_is_english_prose(client):
    """Descriptions are English, one paragraph each (Chinese words only as examples beside English)."""
    tools = (await client.list_tools()).tools
    prompts = (await client.list_prompts()).prompts
    resources = (await client.list_resources()).resources

    def described(node: object) -> list[str]:
        if isinstance(node, dict):
            own = [node["description"]] if isinstance(node.get("description"), str) else []
            return own + [text for value in node.values() for text in described(value)]
        return [text for item in node for text in described(item)] if isinstance(node, list) else []

    texts = [t.description for t in [*tools, *prompts, *resources]]
    texts += [text for tool in tools for text in described(tool.input_schema)]
    texts += [a.description for p in prompts for a in p.arguments or [] if a.description]
    for text in texts:
        assert text and re.search(r"[A-Za-z]{3}", text) and "\n" not in text and "  " not in text, repr(text)
    persona = next(r.description for r in resources if r.name == "persona")
    assert "(role, tone, boundaries, taboos, priorities)" in persona, persona


@pytest.mark.parametrize("language", ["zh", "en"])
async def test_the_rubric_files_memories_under_every_category_there_is(client, settings, language):
    """The extract_memories prompt and remember_conversation's model read the same list: every category."""
    prompt = (await client.get_prompt("extract_memories", {"language": language})).messages[0].content.text
    for rubric in (prompt, server_rubric(language, settings)):
        head = rubric.index("（category）：" if language == "zh" else "(category):")
        listed = re.findall(r"(?:^|  )- ([a-z]+) ", rubric[head:rubric.index("\n", rubric.index("- project", head))],
                            re.MULTILINE)
        assert listed == [category.value for category in Category]


async def test_a_results_text_is_its_structured_content_as_compact_json(client):
    """Hosts give the model the text block on every call: the same JSON, without indentation."""
    await call(client, "add_memory", {"content": "用户不喜欢香菜，吃到会很反感。", "keywords": ["香菜"]})
    for name, args in (("recall_memories", {"query": "晚饭吃火锅", "keywords": ["香菜"]}), ("list_memories", {})):
        result = await client.call_tool(name, args)
        [block] = result.content
        assert "香菜" in block.text, name  # non-ASCII as written, not escaped
        assert block.text == json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
    refused = await error(client, "recall_memories", {"query": "x", "top_k": 0})
    assert refused.startswith("invalid arguments: top_k")


async def test_an_argument_left_out_or_sent_as_null_is_the_same(client):
    """The lean schemas drop `anyOf [..., null]`; the server still takes null for an optional argument."""
    sent_null = await call(client, "recall_memories", {"query": "晚饭吃什么", "keywords": None, "top_k": None})
    left_out = await call(client, "recall_memories", {"query": "晚饭吃什么"})
    assert sent_null["memories"] == left_out["memories"] == []


async def test_tool_descriptions_follow_the_settings(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, episode_days=30, trash_days=10, store_threshold=0.9, pending_threshold=0.5)
    app = PocketMem(settings, clock=clock)
    await app.open()
    try:
        async with Client(build_server(settings, app=app)) as client:
            described = {t.name: t.description for t in (await client.list_tools()).tools}
    finally:
        await app.close()
    assert "30 days" in described["add_memory"] and ">= 0.9 stores, >= 0.5 waits" in described["add_memory"]
    for name in ("restore", "forget_memory"):
        assert "10 days" in described[name], name
    assert not any("14 days" in text or "7 days" in text or "0.85" in text for text in described.values())


async def test_the_extract_memories_prompt_follows_the_settings(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, episode_days=5, trash_days=3, store_threshold=0.95, pending_threshold=0.4)
    app = PocketMem(settings, clock=clock)
    await app.open()
    try:
        async with Client(build_server(settings, app=app)) as client:
            zh = (await client.get_prompt("extract_memories", {"language": "zh"})).messages[0].content.text
            en = (await client.get_prompt("extract_memories", {"language": "en"})).messages[0].content.text
            # what the rubric asks for a plain statement is stored, what it asks for an inference waits
            plain = await call(client, "add_memory", {"content": "用户喜欢爬山", "confidence": 0.95})
            inferred = await call(client, "add_memory", {"content": "用户可能喜欢露营", "confidence": 0.4})
    finally:
        await app.close()
    assert "（5 天后过期）" in zh and "3 天内可恢复" in zh
    assert "confidence：用户明确说的 ≥0.95；你推测的 ≥0.4 且 <0.95（会先请用户确认）；拿不准（<0.4）就别记。" in zh
    assert "expires in 5 days" in en and "restorable for 3 days" in en
    assert ("confidence: >= 0.95 when the user said it plainly; at least 0.4 and below 0.95 when you infer it "
            "(the user is asked first); below 0.4 don't save.") in en
    for text in (zh, en):
        assert not re.search(r"\b14\b|\b7 (天|days)|0\.6|0\.85|≥0\.9；|>= 0\.9 ", text), text
    assert (plain["status"], inferred["status"]) == ("stored", "pending")


async def test_the_add_description_says_every_memory_waits_when_all_are_confirmed(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, confirm_all=True)
    app = PocketMem(settings, clock=clock)
    await app.open()
    try:
        async with Client(build_server(settings, app=app)) as client:
            described = {t.name: t.description for t in (await client.list_tools()).tools}
            added = await call(client, "add_memory", {"content": "用户喜欢爬山", "confidence": 1.0})
    finally:
        await app.close()
    assert added["status"] == "pending"
    assert "stores" not in described["add_memory"]
    assert ">= 0.6 waits for the user's yes (every memory is confirmed first)" in described["add_memory"]


async def test_resources_and_prompts_are_the_contract(client):
    assert {str(r.uri) for r in (await client.list_resources()).resources} == {
        "memory://user-card", "memory://stats", "memory://review", "memory://persona", "memory://project",
        "memory://insights", "memory://memories",
    }
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["memory://memories/{memory_id}"]
    assert {p.name for p in (await client.list_prompts()).prompts} == {"memory_context", "extract_memories"}


@pytest.mark.backends
async def test_a_day_with_the_memory_tools(client):
    core = await call(client, "add_memory", {
        "content": "你很爱吃辣。", "category": "preference", "scores": {"persistence": 1}, "keywords": ["辣", "spicy"],
    })
    assert core["status"] == "stored" and core["core"] is True
    cat = await call(client, "add_memory", {"content": "用户养了一只叫小白的猫", "category": "person",
                                              "keywords": ["猫", "宠物"]})
    recalled = await call(client, "recall_memories", {"query": "小白今天不吃饭", "keywords": ["小白", "猫", "宠物"]})
    assert recalled["memories"][0]["id"] == cat["memory_id"]
    assert recalled["injection"] == "今天的对话摘要“用户养了一只叫小白的猫”"

    patched = await call(client, "patch_core_memory", {"memory_id": core["memory_id"], "patch": "最近胃炎，暂时不吃辣"})
    assert patched["memory"]["content"] == "你很爱吃辣。（2026-11-26：最近胃炎，暂时不吃辣）"
    assert patched["revision_id"]

    pending = await call(client, "add_memory", {"content": "用户可能喜欢爵士乐", "confidence": 0.7})
    assert pending["status"] == "pending"
    confirmed = await call(client, "confirm_pending", {"pending_id": pending["pending_id"], "action": "confirm"})
    assert confirmed["status"] == "confirmed" and confirmed["memory_id"]

    forgotten = await call(client, "forget_memory", {"memory_id": cat["memory_id"], "reason": "user asked"})
    assert forgotten["item"]["reason"] == "user_delete"
    trash = await call(client, "list_trash", {})
    assert [i["id"] for i in trash["items"]] == [cat["memory_id"]]
    restored = await call(client, "restore", {"memory_id": cat["memory_id"]})
    assert restored["memory"]["status"] == "active"

    listed = await call(client, "list_memories", {"category": "preference"})
    assert listed["total"] == 1 and listed["items"][0]["id"] == core["memory_id"]
    one = json.loads((await client.read_resource(f"memory://memories/{core['memory_id']}")).contents[0].text)
    assert one["revisions"][0]["previous_content"] == "你很爱吃辣。"
    card = (await client.read_resource("memory://user-card")).contents[0].text
    assert "你很爱吃辣。（2026-11-26：最近胃炎，暂时不吃辣）" in card


@pytest.mark.backends
async def test_prompts_render(client):
    await call(client, "add_memory", {"content": "用户叫小林", "scores": {"persistence": 1}})
    await call(client, "add_memory", {"content": "用户不喜欢香菜", "keywords": ["香菜"]})
    block = await client.get_prompt("memory_context", {"message": "香菜能吃吗"})
    text = block.messages[0].content.text
    assert "今天的对话摘要“用户不喜欢香菜”" in text and "# 用户卡" in text and "\n- 用户叫小林\n" in text
    rubric = (await client.get_prompt("extract_memories", {})).messages[0].content.text
    assert "persistence" in rubric and "supersedes" in rubric and "keywords" in rubric
    english = (await client.get_prompt("extract_memories", {"conversation": "I hate cilantro."})).messages[0]
    assert "Conversation:" in english.content.text


BAD_CALLS = [
    ("add_memory", {"content": ""}, r"content"),
    ("add_memory", {"content": "   "}, r"content: must not be empty"),
    ("add_memory", {"content": "\u202e\u200b\ufeff"}, r"content: .* invisible characters"),
    ("add_memory", {"content": "ok", "keywords": ["\u200b"]}, r"keywords\[0\]: .* invisible characters"),
    ("add_memory", {"content": "x" * 2001}, r"content: is 2001 characters"),
    ("add_memory", {"content": "ok", "scores": {"info": 1.5}}, r"scores\.info"),
    ("add_memory", {"content": "ok", "temporay": True}, r"temporay is not an argument .*\(did you mean temporary\?\)"),
    ("add_memory", {"content": "ok", "category": "todo", "due": "2026-12-01T15:00"}, r"due is not an argument"),
    ("add_memory", {"content": "ok", "scores": {"persistance": 1}}, r"scores\.persistance is not an argument"),
    ("remember_conversation", {"messages": [{"role": "user", "content": "hi"}], "hints": {"keyword": ["x"]}},
     r"hints\.keyword is not an argument"),
    ("list_memories", {"catgory": "todo"}, r"catgory is not an argument of this tool \(did you mean category\?\)"),
    ("recall_memories", {"query": "x", "topk": 10}, r"topk is not an argument of this tool \(did you mean top_k\?\)"),
    ("add_memory", {"content": "ok", "scores": {"emotion": "NaN"}}, r"scores\.emotion"),
    ("add_memory", {"content": "ok", "confidence": 2}, r"confidence"),
    ("add_memory", {"content": "ok", "category": "gossip"}, r"category"),
    ("add_memory", {"content": "ok", "supersedes": "nope"}, r"supersedes: no memory"),
    ("add_memory", {"content": "ok", "created_at": "yesterday-ish"}, r"created_at"),
    ("recall_memories", {"query": ""}, r"query"),
    ("recall_memories", {"query": "x", "top_k": 0}, r"top_k"),
    ("recall_memories", {"query": "x", "top_k": 51}, r"top_k"),
    ("recall_memories", {"query": "x", "context": ["a", "b", "c", "d"]}, r"context"),
    ("list_memories", {"limit": -1}, r"limit"),
    ("list_memories", {"offset": -5}, r"offset"),
    ("list_memories", {"status": "deleted"}, r"status"),
    ("list_trash", {"limit": 501}, r"limit"),
    ("forget_memory", {"memory_id": "does-not-exist"}, r"no memory with id"),
    ("restore", {"memory_id": "does-not-exist"}, r"nothing with id"),
    ("patch_core_memory", {"memory_id": "does-not-exist", "patch": "x"}, r"no memory with id"),
    ("patch_core_memory", {"memory_id": "x", "patch": "y", "mode": "merge"}, r"mode"),
    ("confirm_pending", {"pending_id": "nope", "action": "confirm"}, r"no pending memory"),
    ("confirm_pending", {"pending_id": "nope", "action": "maybe"}, r"action"),
]


@pytest.mark.backends
@pytest.mark.parametrize(
    ("tool", "args", "pattern"), BAD_CALLS, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(BAD_CALLS)]
)
async def test_bad_input_is_a_clear_tool_error_and_changes_nothing(client, tool, args, pattern):
    await call(client, "add_memory", {"content": "已有的记忆", "keywords": ["已有"]})
    before = await state(client)
    message = await error(client, tool, args)
    assert re.search(pattern, message), message
    assert await state(client) == before


@pytest.mark.backends
async def test_unknown_resource_is_an_error(client):
    from mcp.shared.exceptions import MCPError

    with pytest.raises(MCPError, match="no memory with id"):
        await client.read_resource("memory://memories/nope")


def test_mcp_json_example_names_the_console_script():
    config = json.loads((Path(__file__).parents[1] / "mcp.json.example").read_text())
    servers = config["mcpServers"]
    assert servers, "mcp.json.example registers no server"
    assert all("pocketmem" in json.dumps(s) for s in servers.values())
