"""One clock (issue 24 item 3): every time a person sees is in POCKETMEM_TZ, with its offset where it is absolute.
A memory written at 2026-11-26 17:17 UTC is 2026-11-27 01:17 in Asia/Shanghai: each surface must say the 27th.
What the model reads too: every instant a tool or resource returns is ISO 8601 in the zone, to the second."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import anyio
import httpx2
import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock, from_iso
from pocketmem.base.models import Category
from pocketmem.core.shown_time import absolute, relative
from pocketmem.mcp.server import build_server
from pocketmem.service.profile.profile_files import folder_name
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.web.server import standalone

from .servers import run_cli

SHANGHAI = ZoneInfo("Asia/Shanghai")
LATE_UTC = datetime(2026, 11, 26, 17, 17, tzinfo=UTC)  # already the 27th in Shanghai
USER = "global"


def test_the_helper_speaks_the_zone():
    assert absolute(LATE_UTC, SHANGHAI) == "2026-11-27 01:17 +08:00"
    assert absolute("2026-11-26T17:17:00.000Z", ZoneInfo("Asia/Kolkata")) == "2026-11-26 22:47 +05:30"
    assert absolute(LATE_UTC, UTC) == "2026-11-26 17:17 +00:00"
    now = LATE_UTC + timedelta(days=3, hours=2)
    assert relative(LATE_UTC, now, SHANGHAI, "zh") == "3天前"
    assert relative(LATE_UTC, now, SHANGHAI, "en") == "3 days ago"
    assert relative(now - timedelta(minutes=5), now, SHANGHAI, "zh") == "5分钟前"
    assert relative(now - timedelta(hours=1), now, SHANGHAI, "en") == "1 hour ago"
    assert relative(now + timedelta(days=7), now, SHANGHAI, "zh") == "7天后"
    assert relative(now, now, SHANGHAI, "en") == "just now"


def test_the_cli_shows_times_in_the_zone_with_their_offset(tmp_path, capsys):
    home = tmp_path / "home"  # run_cli sets POCKETMEM_TZ=Asia/Shanghai
    added = json.loads(run_cli(capsys, home, "add", "用户住在杭州", "--json").stdout)
    memory = json.loads(run_cli(capsys, home, "show", added["memory_id"], "--json").stdout)
    created = absolute(memory["created_at"], SHANGHAI)
    assert created.endswith("+08:00")
    assert created in run_cli(capsys, home, "list").stdout
    assert created in run_cli(capsys, home, "show", added["memory_id"]).stdout
    forgot = run_cli(capsys, home, "forget", added["memory_id"])
    trashed = json.loads(run_cli(capsys, home, "trash", "--json").stdout)["items"][0]
    purge = absolute(trashed["purge_at"], SHANGHAI)
    assert f"brings it back until {purge}" in forgot.stderr
    table = run_cli(capsys, home, "trash").stdout
    assert purge in table and absolute(trashed["deleted_at"], SHANGHAI) in table


@pytest.fixture
async def late_app(tmp_path, make_settings):
    settings = make_settings(tmp_path, profile_files="on")
    async with PocketMem(settings, clock=FixedClock(LATE_UTC)) as app:
        yield app


async def _page(app: PocketMem, path: str, lang: str = "zh") -> str:
    asgi, _ = await standalone(app, "127.0.0.1")
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=asgi), base_url="http://127.0.0.1:8000") as http:
        page = await http.get(path, headers={"Accept-Language": lang})
        assert page.status_code == 200, page.text
        return page.text


@pytest.mark.anyio
async def test_the_page_its_trash_and_the_forget_message_agree_on_the_day(late_app):
    added = await late_app.writing.add(USER, AddRequest(content="用户住在杭州", category=Category.fact))
    memory_id = added.memory_id or ""
    listed = await _page(late_app, "/ui/memories")
    assert 'title="2026-11-27 01:17 +08:00">刚刚</time>' in listed
    detail = await _page(late_app, f"/ui/memories/{memory_id}", "en")
    assert "2026-11-27 01:17 +08:00" in detail and "2026-11-26 17:17" not in detail
    forgot = await late_app.trash.forget(USER, memory_id, "test")
    assert forgot.message.endswith("until 2026-12-04 01:17 +08:00.")
    trash = await _page(late_app, "/ui/trash")
    assert 'title="2026-12-04 01:17 +08:00">7天后</time>' in trash


@pytest.mark.anyio
async def test_a_snoozed_confirmation_comes_back_at_a_time_in_the_zone(late_app):
    pending = await late_app.writing.add(USER, AddRequest(content="用户可能喜欢爵士乐", confidence=0.7))
    snoozed = await late_app.pending.confirm_pending(USER, pending.pending_id or "", "snooze", 24)
    assert snoozed.message.endswith("after 2026-11-28 01:17 +08:00."), snoozed.message


@pytest.mark.anyio
@pytest.mark.backends
async def test_insights_charts_end_on_the_day_in_the_zone(late_app):
    await late_app.writing.add(USER, AddRequest(content="用户住在杭州", category=Category.fact))
    insights = await late_app.browse.insights(USER)
    assert insights.today.isoformat() == "2026-11-27"
    assert [(c.day, c.key, c.count) for c in insights.created] == [("2026-11-27", "fact", 1)]
    page = await _page(late_app, "/ui/insights", "en")
    assert "<title>2026-11-27 · fact: 1</title>" in page
    days = re.findall(r'text-anchor="end">(\d{4}-\d\d-\d\d)</text>', page)
    assert days and set(days) == {"2026-11-27"}  # both day charts end on the 27th


@pytest.mark.anyio
async def test_markdown_files_show_due_times_in_the_zone(late_app):
    due = from_iso("2026-11-28T01:00:00Z")  # 09:00 in Shanghai
    await late_app.writing.add(USER, AddRequest(content="交周报", category=Category.todo, due_at=due))
    await late_app.profile_files.sync(USER)
    path = late_app.settings.home / folder_name(USER) / "User.md"
    text = await anyio.Path(path).read_text(encoding="utf-8")
    assert "- 交周报 — due 2026-11-28 09:00 +08:00" in text


def test_the_cli_token_list_and_maintenance_speak_the_zone(tmp_path, capsys):
    home = tmp_path / "home"
    assert run_cli(capsys, home, "token", "create", "--user", "alice").returncode == 0
    listed = run_cli(capsys, home, "token", "list")
    created = json.loads(run_cli(capsys, home, "token", "list", "--json").stdout)[0]["created_at"]
    assert absolute(created, SHANGHAI) in listed.stdout
    dry = run_cli(capsys, home, "maintain", "--dry-run", "--now", "2026-11-27T01:17:00+08:00")
    assert "maintenance at 2026-11-27 01:17 +08:00 would purge nothing" in dry.stderr, dry.stderr


# -- what the model reads: every instant a tool or resource returns is on the user's clock ------------------------
SHOWN = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+08:00$")  # the zone's offset, whole seconds
TIME_KEYS = ("_at", "_until", "valid_from", "oldest", "newest")


def _instants(value: object, path: str = "") -> dict[str, str]:
    """Every time a result carries, by where it is: {"memories[0].created_at": "2026-…", …}."""
    found: dict[str, str] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str) and key.endswith(TIME_KEYS):
                found[f"{path}{key}"] = item
            found.update(_instants(item, f"{path}{key}."))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.update(_instants(item, f"{path[:-1]}[{i}]."))
    return found


@pytest.mark.anyio
@pytest.mark.backends
async def test_every_instant_the_model_reads_is_in_the_zone_to_the_second(tmp_path, make_settings):
    settings = make_settings(tmp_path)
    clock = FixedClock(LATE_UTC + timedelta(milliseconds=125))  # 2026-11-27 01:17:00.125 in Shanghai
    seen: dict[str, str] = {}

    async def tool(name: str, args: dict) -> dict:
        result = await client.call_tool(name, args)
        assert not result.is_error, result.content[0].text
        assert json.loads(result.content[0].text) == result.structured_content  # the text block hosts inject
        seen.update({f"{name}:{k}": v for k, v in _instants(result.structured_content).items()})
        return result.structured_content

    async def resource(uri: str) -> dict:
        shown = json.loads((await client.read_resource(uri)).contents[0].text)
        seen.update({f"{uri}:{k}": v for k, v in _instants(shown).items()})
        return shown

    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        todo = await tool("add_memory", {"content": "给朵朵交学费", "category": "todo",
                                         "due_at": "2026-11-27T00:30:00+08:00"})  # 2026-11-26T16:30Z
        said = await tool("add_memory", {"content": "用户说今晚去看了演唱会", "category": "episode",
                                         "created_at": "2026-11-26T21:00"})  # wall-clock time in the zone
        core = await tool("add_memory", {"content": "用户对花生过敏", "scores": {"persistence": 1}})
        pending = await tool("add_memory", {"content": "用户可能喜欢爵士乐", "confidence": 0.7})
        recalled = await tool("recall_memories", {"query": "学费交了吗", "keywords": ["学费"]})
        await tool("list_memories", {})
        await tool("list_memories", {"status": "pending"})
        await tool("confirm_pending", {"pending_id": pending["pending_id"], "action": "snooze"})
        await tool("patch_core_memory", {"memory_id": core["memory_id"], "patch": "坚果也不行"})
        await tool("mark_memory", {"memory_id": todo["memory_id"], "action": "complete"})
        await tool("forget_memory", {"memory_id": said["memory_id"]})
        await tool("list_trash", {})
        restored = await tool("restore", {"memory_id": said["memory_id"]})
        for uri in ("memory://memories", f"memory://memories/{core['memory_id']}", "memory://review",
                    "memory://stats"):
            await resource(uri)

    reminder = recalled["reminders"][0]
    assert reminder["label"] == "已逾期：截止 2026-11-27 00:30"
    assert reminder["due_at"] == "2026-11-27T00:30:00+08:00"  # the label's day, not 2026-11-26T16:30Z
    assert recalled["memories"][0]["due_at"] == reminder["due_at"]
    assert restored["memory"]["created_at"] == "2026-11-26T21:00:00+08:00"  # as it was said, not 13:00Z
    assert {"memory://stats:oldest", "memory://stats:newest", "confirm_pending:cooldown_until",
            "mark_memory:memory.completed_at", "forget_memory:item.purge_at", "list_trash:items[0].deleted_at",
            f"memory://memories/{core['memory_id']}:revisions[0].created_at"} <= set(seen)
    assert {where: when for where, when in seen.items() if not SHOWN.match(when)} == {}
