"""Faults: bad input and secrets. One screening function for every text a store keeps (after NFKC and with
invisible characters removed); import held to add_memory's rules; export -o only to a regular file; the
pending listing filtered before paging; the extract_memories prompt bounded."""

from __future__ import annotations

import io
import json
import os
import sqlite3

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from pocketmem.app import PocketMem
from pocketmem.base.errors import InvalidInput
from pocketmem.base.files import atomic_write, check_target
from pocketmem.core import privacy
from pocketmem.mcp.server import build_server
from pocketmem.service.writing.add_request import AddRequest

from .scripted_llm import ScriptedSampler, ops

pytestmark = [pytest.mark.anyio]
USER = "global"

# (text as a user might send it, the secret that must not be stored)
SECRETS = [
    ("我的密碼是Qwe98765!ab，别告诉别人", "Qwe98765!ab"),
    ("家里的WiFi密码 Sunshine2024x 记一下", "Sunshine2024x"),
    ("work laptop pw: Hunter22secret", "Hunter22secret"),
    ("用户的银行卡PIN码是 4455", "4455"),
    ("the key is sk-proj-abcdefghij\u200bklmnopqrstuvwxyz0123", "klmnopqrstuvwxyz0123"),
    ("the key is sk-proj-abcdefghij\u00adklmnopqrstuvwxyz0123", "klmnopqrstuvwxyz0123"),
    ("the key is sk-proj-abcdefghij\u2060klmnopqrstuvwxyz0123", "klmnopqrstuvwxyz0123"),
    ("用户的 key 是 ｓｋ－ｐｒｏｊ－ａｂｃｄｅｆｇｈｉｊｋｌｍｎｏｐｑｒｓｔ", "ｋｌｍｎｏｐｑｒｓｔ"),
]
INNOCENT = ["我忘了密码，得去重置", "用户用密码管理器", "the password manager is great", "用户喜欢香菜，（真的）"]


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_each_listed_secret_is_found_after_normalising(text, secret):
    screened = privacy.screen(text)
    assert screened.findings, text
    assert secret not in screened.text and "sk-proj" not in screened.text
    assert "ｓｋ－ｐｒｏｊ" not in screened.text


@pytest.mark.parametrize("text", INNOCENT)
def test_talk_about_secrets_is_left_alone(text):
    assert privacy.screen(text).text == text


def every_stored_text(app: PocketMem) -> str:
    """Every row of every table, as text: what an attacker with the file would read."""
    with sqlite3.connect(app.settings.db_path) as db:
        tables = [r[0] for r in db.execute("select name from sqlite_master where type = 'table'")]
        out = []
        for table in tables:
            try:
                out += [repr(row) for row in db.execute(f'select * from "{table}"')]
            except sqlite3.OperationalError:
                continue
    return "\n".join(out)


@pytest.mark.parametrize(("text", "secret"), SECRETS)
async def test_add_memory_stores_and_shows_the_redacted_text(app, settings, text, secret):
    async with Client(build_server(settings, app=app)) as client:
        result = await client.call_tool("add_memory", {"content": text})
        assert not result.is_error, result.content[0].text
        assert result.structured_content["redacted"], result.structured_content
        listed = await client.call_tool("list_memories", {})
    shown = json.dumps(listed.structured_content, ensure_ascii=False)
    assert secret not in shown
    assert secret not in every_stored_text(app)


async def test_side_texts_are_screened_source_ref_operation_id_and_every_reason(app, settings):
    key = "sk-proj-" + "Z9" * 14
    async with Client(build_server(settings, app=app)) as client:
        added = await client.call_tool("add_memory", {
            "content": "用户喜欢香菜", "source": f"chat {key}", "source_ref": "pw: Hunter22secret",
            "operation_id": f"op-{key}", "scores": {"persistence": 1.0},
        })
        assert not added.is_error, added.content[0].text
        core = added.structured_content["memory_id"]
        patched = await client.call_tool("patch_core_memory", {
            "memory_id": core, "patch": "也喜欢芫荽", "reason": "用户说的，WiFi密码 Sunshine2024x",
        })
        assert not patched.is_error, patched.content[0].text
        todo = await client.call_tool("add_memory", {"content": "用户要交房租", "category": "todo"})
        done = await client.call_tool("mark_memory", {
            "memory_id": todo.structured_content["memory_id"], "action": "complete", "reason": f"paid, token={key}",
        })
        assert not done.is_error, done.content[0].text
        other = await client.call_tool("add_memory", {"content": "用户住在上海"})
        forgot = await client.call_tool("forget_memory", {
            "memory_id": other.structured_content["memory_id"], "reason": "我的密碼是Qwe98765!ab",
        })
        assert not forgot.is_error, forgot.content[0].text
        replay = await client.call_tool("add_memory", {
            "content": "用户喜欢香菜", "source": f"chat {key}", "source_ref": "pw: Hunter22secret",
            "operation_id": f"op-{key}", "scores": {"persistence": 1.0},
        })
        assert replay.structured_content["memory_id"] == core  # idempotency still holds on the redacted id
    stored = every_stored_text(app)
    for secret in (key, "Z9Z9Z9Z9", "Hunter22secret", "Sunshine2024x", "Qwe98765!ab"):
        assert secret not in stored, secret
    out = io.StringIO()
    await app.exporter.export(out, None, events=True)
    assert key not in out.getvalue() and "Hunter22secret" not in out.getvalue()


async def test_remember_conversation_shows_what_was_stored_redacted(app, settings):
    answer = ops(
        {"op": "ADD", "content": "用户家的WiFi密码 Sunshine2024x，路由器在客厅", "category": "fact",
         "confidence": 0.95, "reason": "用户说 pw: Hunter22secret"},
    )
    sampler = ScriptedSampler([answer])
    async with Client(build_server(settings, app=app), sampling_callback=sampler) as client:
        result = await client.call_tool("remember_conversation", {"messages": [
            {"role": "user", "content": "记一下，路由器在客厅"}, {"role": "assistant", "content": "好的"},
        ]})
    assert not result.is_error, result.content[0].text
    shown = json.dumps(result.structured_content, ensure_ascii=False)
    assert "Sunshine2024x" not in shown and "Hunter22secret" not in shown
    assert "路由器在客厅" in shown
    assert "Sunshine2024x" not in every_stored_text(app)


# -- import --------------------------------------------------------------------------------------
def export_lines(rows: list[dict]) -> list[str]:
    header = {"type": "header", "format": "pocketmem-export", "version": 1}
    return [json.dumps(header)] + [json.dumps(r, ensure_ascii=False) for r in rows]


def memory_row(memory_id: str, content: str, user: str = USER, **extra) -> dict:
    row = {
        "type": "memory", "id": memory_id, "user_id": user, "content": content, "category": "fact",
        "keywords": [], "scores": {"emotion": 0.3, "info": 0.8, "persistence": 0.7, "judge": 0.8},
        "info_importance": 0.68, "time_coef": 1.0, "importance": 0.68, "confidence": 1.0,
        "created_at": "2026-11-20T01:00:00.000Z", "updated_at": "2026-11-20T01:00:00.000Z",
        "valid_from": "2026-11-20T01:00:00.000Z", "use_count": 0, "status": "active",
        "content_hash": "x" * 32, "embed_model": "hash:v1-512",
    }
    row.update(extra)
    return row


async def test_import_holds_each_record_to_add_memorys_rules_and_reports_refusals(app):
    rows = [
        memory_row("a" * 32, "用户喜欢香菜"),
        memory_row("b" * 32, "用户的名字" * 10_000),
        memory_row("c" * 32, "用户住在上海", user="../../etc/passwd"),
        memory_row("d" * 32, "用户要交房租", expires_at="1000-01-01T00:00:00+01:00"),
        memory_row("e" * 32, "用户要交水费", due_at=-1),
        memory_row("f" * 32, "sk-proj-" + "Q7" * 14),
        memory_row(
            "1" * 32, "用户家WiFi密码 Sunshine2024x，贴在冰箱上", source="pw: Hunter22secret",
            keywords=["香菜", "sk-ant-" + "K5" * 12],
        ),
    ]
    report = await app.exporter.import_lines(export_lines(rows))
    refused = {(r.id, r.field) for r in report.refused}
    assert refused == {
        ("b" * 32, "content"), ("c" * 32, "user_id"), ("d" * 32, "expires_at"), ("e" * 32, "due_at"),
        ("f" * 32, "content"),
    }, report.refused
    assert all(r.line >= 2 and r.why for r in report.refused)
    assert report.imported.memory == 2
    async with app.store.read() as reader:
        kept = await reader.get_memory(USER, "1" * 32)
        assert await reader.get_memory(USER, "a" * 32) is not None
        assert await reader.get_memory("../../etc/passwd", "c" * 32) is None
    assert "Sunshine2024x" not in kept.content and "Hunter22secret" not in (kept.source or "")
    assert kept.keywords == ["香菜"]
    assert "Sunshine2024x" not in every_stored_text(app) and "Q7Q7Q7" not in every_stored_text(app)


async def test_import_screens_revisions_pending_events_and_profile_text(app):
    secret = "pw: Hunter22secret"
    rows = [
        {"type": "user", "user_id": USER, "display_name": None, "identity_confirmed": False,
         "persona": f"你是助手。{secret}",
         "created_at": "2026-11-20T01:00:00.000Z", "updated_at": "2026-11-20T01:00:00.000Z"},
        memory_row("a" * 32, "用户喜欢香菜"),
        {"type": "revision", "id": "r1", "memory_id": "a" * 32, "user_id": USER, "previous_content": f"旧的 {secret}",
         "new_content": "用户喜欢香菜", "mode": "replace", "reason": secret, "created_at": "2026-11-20T01:00:00.000Z"},
        {"type": "pending", "id": "p1", "user_id": USER, "candidate": {"content": f"用户的网银 {secret}，下周要改"},
         "confidence": 0.7, "status": "pending", "created_at": "2026-11-20T01:00:00.000Z",
         "updated_at": "2026-11-20T01:00:00.000Z"},
        {"type": "event", "id": 7, "user_id": USER, "kind": "discarded", "memory_id": None, "operation_id": None,
         "payload": {"content": f"没存：{secret}"}, "created_at": "2026-11-20T01:00:00.000Z"},
    ]
    report = await app.exporter.import_lines(export_lines(rows))
    assert report.refused == []
    assert "Hunter22secret" not in every_stored_text(app)


# -- export -o -----------------------------------------------------------------------------------
def test_export_writes_only_to_a_new_path_or_a_regular_file(tmp_path):
    atomic_write(tmp_path / "new" / "out.jsonl", "x\n")
    atomic_write(tmp_path / "new" / "out.jsonl", "y\n")  # an existing regular file is replaced
    assert (tmp_path / "new" / "out.jsonl").read_text() == "y\n"
    os.symlink(tmp_path / "new" / "out.jsonl", tmp_path / "link")
    os.mkfifo(tmp_path / "fifo")
    for target, kind in (("/dev/null", "device"), (tmp_path, "directory"), (tmp_path / "link", "symbolic link"),
                         (tmp_path / "fifo", "pipe")):
        with pytest.raises(InvalidInput, match=f"is a {kind}"):
            check_target(target if not isinstance(target, str) else __import__("pathlib").Path(target))
    assert os.path.exists("/dev/null") and (tmp_path / "new" / "out.jsonl").read_text() == "y\n"


@pytest.mark.slow
def test_export_o_refuses_a_device_from_the_command_line(tmp_path, backend):
    from .servers import cli

    home = tmp_path / "home"
    assert cli(backend, home, "stats").returncode == 0
    result = cli(backend, home, "export", "-o", "/dev/null")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "pocketmem: -o: /dev/null is a device; give a new file name or an existing regular file"
    ]


def test_export_markdown_refuses_links_and_files_as_o_does(tmp_path, capsys):
    from .servers import run_cli

    home = tmp_path / "home"
    dangling = tmp_path / "cards"
    dangling.symlink_to(tmp_path / "nowhere")
    (tmp_path / "elsewhere").mkdir()
    linked = tmp_path / "linked"
    linked.symlink_to(tmp_path / "elsewhere")
    plain = tmp_path / "plain.txt"
    plain.write_text("keep me", encoding="utf-8")
    for target, kind in ((dangling, "symbolic link"), (linked, "symbolic link"), (plain, "file")):
        result = run_cli(capsys, home, "export", "--markdown", str(target))
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip().splitlines() == [
            f"pocketmem: --markdown: {target} is a {kind}; give a new folder name or an existing folder"
        ]
    assert not (tmp_path / "nowhere").exists() and list((tmp_path / "elsewhere").iterdir()) == []
    assert plain.read_text(encoding="utf-8") == "keep me"
    written = run_cli(capsys, home, "export", "--markdown", str(tmp_path / "new"))
    assert written.returncode == 0 and (tmp_path / "new" / "User.md").is_file()


# -- the pending listing ----------------------------------------------------------------------
@pytest.mark.backends
async def test_the_pending_listing_filters_before_paging(app):
    for i in range(12):
        await app.writing.add(USER, AddRequest(content=f"用户可能养了第{i}只猫", confidence=0.7))
        await app.writing.add(USER, AddRequest(content=f"用户可能要去第{i}个城市", category="goal", confidence=0.7))
    seen: list[str] = []
    for offset in range(0, 15, 5):
        page = await app.listing.list_memories(
            USER, category=None, status="pending", text="猫", limit=5, offset=offset
        )
        assert page.total == 12
        seen += [item.content for item in page.items]
    assert sorted(seen) == sorted(f"用户可能养了第{i}只猫" for i in range(12))
    goals = await app.listing.list_memories(USER, category="goal", status="pending", text=None, limit=5, offset=10)
    assert goals.total == 12 and len(goals.items) == 2 and all(i.category == "goal" for i in goals.items)


# -- the extract_memories prompt ----------------------------------------------------------------
async def test_the_extract_memories_prompt_has_a_length_limit(app, settings):
    async with Client(build_server(settings, app=app)) as client:
        ok = await client.get_prompt("extract_memories", {"conversation": "用户：我不吃香菜" * 100})
        assert "香菜" in ok.messages[0].content.text
        with pytest.raises(MCPError, match=r"invalid argument conversation: is 900000 characters; the limit is 40000"):
            await client.get_prompt("extract_memories", {"conversation": "a" * 900_000})


async def test_the_extract_memories_prompt_refuses_a_language_it_has_no_rubric_for(app, settings):
    async with Client(build_server(settings, app=app)) as client:
        with pytest.raises(MCPError, match=r"invalid argument language: must be one of: zh, en \(leave it out"):
            await client.get_prompt("extract_memories", {"conversation": "J'adore la coriandre.", "language": "fr"})
        english = await client.get_prompt("extract_memories", {"conversation": "用户：我不吃香菜", "language": "en"})
        assert "Conversation:" in english.messages[0].content.text


async def test_the_memory_context_prompt_without_its_message_is_invalid_params(app, settings, caplog):
    """A required argument left out is refused as the prompts refuse a bad one (-32602, naming it), not as the SDK's
    error code 0 with a traceback in the log."""
    async with Client(build_server(settings, app=app)) as client:
        with pytest.raises(MCPError) as refused:
            await client.get_prompt("memory_context", {})
        assert refused.value.error.code == INVALID_PARAMS
        assert refused.value.error.message == "invalid argument message: is required"
        listed = {p.name: p for p in (await client.list_prompts()).prompts}
        assert [(a.name, a.required) for a in listed["memory_context"].arguments] == [
            ("message", True), ("context", False)]
        assert (await client.get_prompt("memory_context", {"message": "你好"})).messages[0].content.text
    assert "Traceback" not in caplog.text and not [r for r in caplog.records if r.exc_info]


async def test_a_long_pasted_message_is_read_by_its_head_and_tail_and_a_huge_one_refused(app, settings):
    """A user pastes a log and asks about it: recall reads the message's start and end (the question is said
    before or after the paste) instead of refusing it; only a message past MAX_MESSAGE_CHARS is refused."""
    from pocketmem.service.recall.retrieval import MAX_MESSAGE_CHARS

    await app.writing.add(USER, AddRequest(content="用户的服务部署在 Kubernetes 上，用 Grafana 看监控。"))
    log = "2026-11-26 10:00:01 INFO request ok id=42 latency=12ms\n" * 400  # about 22,000 characters
    async with Client(build_server(settings, app=app)) as client:
        for message in (f"{log}Grafana 上这个面板怎么一直没数据？", f"Grafana 上这个面板怎么一直没数据？\n{log}"):
            result = await client.call_tool("recall_memories", {"query": message})
            assert not result.is_error, result.content[0].text
            assert [m["content"] for m in result.structured_content["memories"]][:1] == [
                "用户的服务部署在 Kubernetes 上，用 Grafana 看监控。"
            ]
        phrase = "why a Grafana dashboard panel shows no data at all"  # a keyword may be a phrase (over 40 chars)
        result = await client.call_tool("recall_memories", {"query": "面板没数据", "keywords": [phrase]})
        assert not result.is_error, result.content[0].text
        assert result.structured_content["memories"], "the phrase names Grafana"
        refused = await client.call_tool("recall_memories", {"query": "x" * (MAX_MESSAGE_CHARS + 1)})
        assert refused.is_error
        rule = f"query: is {MAX_MESSAGE_CHARS + 1} characters; the limit is {MAX_MESSAGE_CHARS}"
        assert rule in refused.content[0].text
