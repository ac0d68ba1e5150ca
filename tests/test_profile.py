"""The profile layer (docs/profile.md) through the MCP client: onboarding once, update_profile, the Markdown files a
person edits by hand, the profile resources, the confirm-everything switch, and listing by time range."""

from __future__ import annotations

import json
import warnings
from datetime import timedelta
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.models import Category, EventKind
from pocketmem.mcp.server import build_server
from pocketmem.service.shared.folder_owner import folder_name
from pocketmem.service.writing.add_request import AddRequest

from .helpers import START, call, error

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"

PROFILE = {
    "persona": {"role": "编程搭档", "tone": "简洁、直接", "boundaries": "改文件前先问", "taboos": "不编造结果",
                "priorities": "先跑测试"},
    "identity": {"name": "小王", "background": "后端工程师", "tech": "Python、PostgreSQL", "collaboration": "先给结论"},
}


async def read(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text


async def prompt(client: Client, message: str) -> str:
    return (await client.get_prompt("memory_context", {"message": message})).messages[0].content.text


@pytest.fixture
def files_settings(tmp_path, make_settings):
    """Files on for both backends (PostgreSQL's default is off)."""
    return make_settings(tmp_path, profile_files="on")


@pytest.fixture
async def files_app(files_settings, clock):
    app = PocketMem(files_settings, clock=clock)
    await app.open()
    try:
        yield app
    finally:
        await app.close()


@pytest.fixture
async def files_client(files_app, files_settings):
    async with Client(build_server(files_settings, app=files_app)) as client:
        yield client


def user_dir(settings) -> Path:
    return settings.home / folder_name(USER)


# -- onboarding ---------------------------------------------------------------------------------
async def test_a_new_user_is_onboarded_once(client, app):
    recalled = await call(client, "recall_memories", {"query": "你好，今天帮我看看代码"})
    note = recalled["onboarding"]
    assert note and "update_profile" in note and "称呼" in note and "身份定位" in note
    english = await call(client, "recall_memories", {"query": "hi, can you review my code?"})
    assert "update_profile" in english["onboarding"] and "Name" not in english["onboarding"].split("about")[0]
    assert "首次引导" in await prompt(client, "你好")

    draft = await call(client, "update_profile", {"identity": {"name": "小王"}})
    assert draft["status"] == "saved" and draft["profile"]["identity_confirmed"] is False
    assert (await call(client, "recall_memories", {"query": "你好"}))["onboarding"]  # not confirmed yet

    saved = await call(client, "update_profile", {**PROFILE, "confirmed": True})
    assert saved["status"] == "saved" and saved["profile"]["identity_confirmed"] is True
    assert saved["profile"]["persona"]["tone"] == "简洁、直接"

    for query in ("你好", "hello there", "还记得上次的事吗"):
        assert (await call(client, "recall_memories", {"query": query}))["onboarding"] is None
    text = await prompt(client, "帮我写个脚本")
    assert "首次引导" not in text and "称呼：小王" in text and "语气：简洁、直接" in text
    card = await read(client, "memory://user-card")
    assert "称呼：小王" in card and "职业背景：后端工程师" in card and "id: global" not in card
    assert "简洁、直接" in await read(client, "memory://persona")

    # Later changes from the agent wait for the user.
    proposed = await call(client, "update_profile", {"identity": {"tech": "Rust"}})
    assert proposed["status"] == "pending" and proposed["profile"]["identity"]["tech"] == "Python、PostgreSQL"
    waiting = await call(client, "recall_memories", {"query": "最近在学什么"})
    assert proposed["pending_id"] in [p["pending_id"] for p in waiting["pending_confirmations"]]
    done = await call(client, "confirm_pending", {"pending_id": proposed["pending_id"], "action": "confirm"})
    assert done["status"] == "confirmed"
    assert "技术偏好：Rust" in await read(client, "memory://user-card")
    again = await call(client, "update_profile", {"identity": {"tech": "Rust"}})
    assert again["status"] == "unchanged"

    async with app.store.read() as reader:
        revisions = await reader.list_profile_revisions(USER, 10)
        events = await reader.list_events(USER, 50, kinds=[EventKind.profile_updated])
    assert revisions[0].previous["tech"] == "Python、PostgreSQL" and revisions[0].new["tech"] == "Rust"
    assert revisions[0].source == "confirmed"
    assert len(events) >= 3


async def test_onboarding_can_be_switched_off_and_is_absent_in_temporary_mode(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, onboarding=False)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        assert (await call(client, "recall_memories", {"query": "你好"}))["onboarding"] is None
        temp = await call(client, "recall_memories", {"query": "你好", "temporary": True})
        assert temp["onboarding"] is None and temp["temporary"] is True


async def test_profile_values_are_screened_for_secrets(client, app, tmp_path, clock, make_settings):
    saved = await call(
        client, "update_profile", {"identity": {"background": "后端运维工程师，服务器密码是 hunter2hunter2"}}
    )
    assert saved["redacted"] == ["password"] and "hunter2" not in json.dumps(saved, ensure_ascii=False)
    bad = await error(client, "update_profile", {"identity": {"nickname": "x"}})
    assert "nickname" in bad
    too_long = await error(client, "update_profile", {"persona": {"tone": "啊" * 301}})
    assert "tone" in too_long

    settings = make_settings(tmp_path, secrets="refuse", db=tmp_path / "other.db")
    async with PocketMem(settings, clock=clock) as strict, Client(build_server(settings, app=strict)) as c2:
        refused = await error(c2, "update_profile", {"identity": {"tech": "key sk-abcdefghijklmnopqrstuvwxyz123456"}})
        assert "identity.tech" in refused and "api key" in refused.lower()
        assert (await strict.profile.view(USER)).identity == {}


# -- the Markdown files ---------------------------------------------------------------------------
async def test_a_person_edits_user_md_and_project_md(files_client, files_app, files_settings):
    await call(files_client, "update_profile", {**PROFILE, "confirmed": True})
    core = await call(files_client, "add_memory", {"content": "用户不吃香菜", "scores": {"persistence": 1},
                                                   "keywords": ["香菜"]})
    step = await call(files_client, "add_memory", {"content": "pocketmem 项目：完成了 SQLite 存储层",
                                                   "category": "project"})
    folder = user_dir(files_settings)
    user_md = (folder / "User.md").read_text(encoding="utf-8")
    assert "- 称呼 (name): 小王" in user_md and f"- 用户不吃香菜 <!-- {core['memory_id']} -->" in user_md
    project_md = (folder / "Project.md").read_text(encoding="utf-8")
    assert step["memory_id"] in project_md
    assert {p.name for p in folder.iterdir()} == {"Persona.md", "User.md", "Project.md", "Insights.md",
                                                  ".pocketmem-store"}

    # A person edits both files by hand.
    user_md = user_md.replace("- 称呼 (name): 小王", "- 称呼 (name): 王工")
    user_md = user_md.replace("- 用户不吃香菜", "- 用户不吃香菜和芹菜")
    assert "add a line at the end: it becomes a core memory" in user_md.splitlines()[1]
    assert user_md.index("## Open todos") < user_md.index("## Core memories")  # read-only sections first
    user_md += "- 用户对花生过敏\n"  # a line added at the end: a new core memory
    (folder / "User.md").write_text(user_md, encoding="utf-8")
    project_md = project_md.replace("完成了 SQLite 存储层", "完成了 SQLite 和 PostgreSQL 存储层")
    project_md += "- pocketmem 项目：下一步写 profile 层\n"
    (folder / "Project.md").write_text(project_md, encoding="utf-8")

    recalled = await call(files_client, "recall_memories", {"query": "晚饭能放芹菜吗", "keywords": ["芹菜"]})
    assert any("芹菜" in m["content"] for m in recalled["memories"])
    card = await read(files_client, "memory://user-card")
    assert "称呼：王工" in card and "用户不吃香菜和芹菜" in card and "用户对花生过敏" in card
    project = await read(files_client, "memory://project")
    assert "完成了 SQLite 和 PostgreSQL 存储层" in project and "下一步写 profile 层" in project
    assert "完成了 SQLite 存储层" not in project  # superseded: kept as history, not current state
    history = await call(files_client, "list_memories", {"status": "superseded", "category": "project"})
    assert history["total"] == 1 and history["items"][0]["id"] == step["memory_id"]
    one = json.loads(await read(files_client, f"memory://memories/{core['memory_id']}"))
    assert one["content"] == "用户不吃香菜和芹菜" and one["revisions"][0]["previous_content"] == "用户不吃香菜"

    # The files were written again from the store, with ids on the new lines.
    rewritten = (folder / "User.md").read_text(encoding="utf-8")
    assert "- 用户对花生过敏 <!--" in rewritten
    assert not list(folder.glob("*.rejected-*"))


async def test_both_sides_changed_and_bad_edits_are_kept(files_client, files_app, files_settings):
    await call(files_client, "update_profile", {**PROFILE, "confirmed": True})
    folder = user_dir(files_settings)
    persona_md = (folder / "Persona.md").read_text(encoding="utf-8")
    # The store changes (a confirmed proposal) while the person edits an older copy of the file.
    proposed = await call(files_client, "update_profile", {"persona": {"role": "技术顾问", "priorities": "先读代码"}})
    await call(files_client, "confirm_pending", {"pending_id": proposed["pending_id"], "action": "confirm"})
    edited = persona_md.replace("- 身份定位 (role): 编程搭档", "- 身份定位 (role): 结对程序员")
    edited = edited.replace("- 语气 (tone): 简洁、直接", "- 语气 (tone): 轻松一点")
    edited += "- 心情 (mood): 好\n这一行不属于任何字段\n"
    (folder / "Persona.md").write_text(edited, encoding="utf-8")

    persona = await read(files_client, "memory://persona")
    assert "结对程序员" in persona  # the person touched role: the person wins
    assert "轻松一点" in persona  # only the person changed tone
    assert "先读代码" in persona  # the person did not touch priorities: the store's newer value stays
    kept = list(folder.glob("Persona.rejected-*.md"))
    assert len(kept) == 1 and kept[0].read_text(encoding="utf-8") == edited
    async with files_app.store.read() as reader:
        [event] = await reader.list_events(USER, 10, kinds=[EventKind.profile_file_rejected])
    assert event.payload["file"] == "Persona.md" and len(event.payload["problems"]) == 2
    assert "心情" not in (folder / "Persona.md").read_text(encoding="utf-8")

    # A line deleted from User.md goes to the trash (restorable); a deleted file is written again.
    core = await call(files_client, "add_memory", {"content": "用户住在杭州", "scores": {"persistence": 1}})
    user_md = (folder / "User.md").read_text(encoding="utf-8")
    (folder / "User.md").write_text(user_md.replace(f"- 用户住在杭州 <!-- {core['memory_id']} -->\n", ""), "utf-8")
    assert "用户住在杭州" not in await read(files_client, "memory://user-card")
    trash = await call(files_client, "list_trash", {})
    assert [i["id"] for i in trash["items"]] == [core["memory_id"]]
    (folder / "User.md").unlink()
    await call(files_client, "add_memory", {"content": "用户喜欢爬山"})
    assert (folder / "User.md").exists()


async def test_a_stale_save_keeps_what_was_written_after_the_person_opened_the_file(files_client, files_settings):
    """An editor left open across pocketmem's writes: the person's save takes in what they changed and deletes
    nothing pocketmem wrote after they opened the file; a line deleted from the file as it is now is deleted."""
    folder = user_dir(files_settings)
    coriander = await call(files_client, "add_memory", {"content": "用户不吃香菜", "scores": {"persistence": 1}})
    step = await call(files_client, "add_memory", {"content": "pocketmem 项目：完成了存储层", "category": "project"})
    user_md = (folder / "User.md").read_text(encoding="utf-8")  # a person opens both files in an editor
    project_md = (folder / "Project.md").read_text(encoding="utf-8")
    peanut = await call(files_client, "add_memory", {"content": "用户对花生过敏", "scores": {"persistence": 1}})
    later = await call(files_client, "add_memory", {"content": "pocketmem 项目：完成了 profile 层",
                                                    "category": "project"})
    assert peanut["memory_id"] in (folder / "User.md").read_text(encoding="utf-8")
    # The person saves their copies: only the name changed, one line added.
    (folder / "User.md").write_text(user_md.replace("- 称呼 (name):", "- 称呼 (name): 王工"), encoding="utf-8")
    (folder / "Project.md").write_text(project_md + "- pocketmem 项目：下一步写文档\n", encoding="utf-8")

    recalled = await call(files_client, "recall_memories", {"query": "晚饭有花生吗", "keywords": ["花生"]})
    assert "用户对花生过敏" in [m["content"] for m in recalled["memories"]]
    assert (await call(files_client, "list_trash", {}))["items"] == []
    card = await read(files_client, "memory://user-card")
    assert "称呼：王工" in card and "用户不吃香菜" in card and "用户对花生过敏" in card
    project = await read(files_client, "memory://project")
    assert "完成了存储层" in project and "完成了 profile 层" in project and "下一步写文档" in project
    assert peanut["memory_id"] in (folder / "User.md").read_text(encoding="utf-8")  # written again, with it
    assert later["memory_id"] in (folder / "Project.md").read_text(encoding="utf-8")

    # Lines deleted from the files as they are now go to the trash: an older line, and the line just added
    # (which leaves a file identical to a version written before it).
    user_md = (folder / "User.md").read_text(encoding="utf-8")
    (folder / "User.md").write_text(user_md.replace(f"- 用户不吃香菜 <!-- {coriander['memory_id']} -->\n", ""),
                                    encoding="utf-8")
    project_md = (folder / "Project.md").read_text(encoding="utf-8")
    step_line = f"- pocketmem 项目：完成了存储层 <!-- {step['memory_id']} -->\n"
    (folder / "Project.md").write_text(project_md.replace(step_line, ""), encoding="utf-8")
    await call(files_client, "recall_memories", {"query": "你好"})
    mango = await call(files_client, "add_memory", {"content": "用户爱吃芒果", "scores": {"persistence": 1}})
    user_md = (folder / "User.md").read_text(encoding="utf-8")
    (folder / "User.md").write_text(user_md.replace(f"- 用户爱吃芒果 <!-- {mango['memory_id']} -->\n", ""),
                                    encoding="utf-8")
    card = await read(files_client, "memory://user-card")
    assert "用户不吃香菜" not in card and "用户爱吃芒果" not in card and "用户对花生过敏" in card
    trash = await call(files_client, "list_trash", {})
    assert {i["id"] for i in trash["items"]} == {coriander["memory_id"], step["memory_id"], mango["memory_id"]}
    active = await call(files_client, "list_memories", {"limit": 50})
    assert peanut["memory_id"] in [m["id"] for m in active["items"]]
    assert later["memory_id"] in [m["id"] for m in active["items"]]

    # A save that drops the line just added and changes the name too reads as an edit of the copy before it:
    # the name is taken in and the line stays; deleting it again from the rewritten file removes it.
    durian = await call(files_client, "add_memory", {"content": "用户讨厌榴莲", "scores": {"persistence": 1}})
    line = f"- 用户讨厌榴莲 <!-- {durian['memory_id']} -->\n"
    user_md = (folder / "User.md").read_text(encoding="utf-8")
    (folder / "User.md").write_text(user_md.replace(line, "").replace("王工", "老王"), encoding="utf-8")
    card = await read(files_client, "memory://user-card")
    assert "称呼：老王" in card and "用户讨厌榴莲" in card
    user_md = (folder / "User.md").read_text(encoding="utf-8")
    assert line in user_md
    (folder / "User.md").write_text(user_md.replace(line, ""), encoding="utf-8")
    assert "用户讨厌榴莲" not in await read(files_client, "memory://user-card")
    assert durian["memory_id"] in [i["id"] for i in (await call(files_client, "list_trash", {}))["items"]]


async def test_a_second_store_over_the_same_home_leaves_the_folder_alone(files_app, files_settings, clock,
                                                                         tmp_path, make_settings):
    await files_app.profile.update(USER, None, {"name": "小王"}, confirmed=True)
    other_settings = make_settings(tmp_path, profile_files="on", db=tmp_path / "second.db")
    async with PocketMem(other_settings, clock=clock) as other:
        await other.profile.update(USER, None, {"name": "别人"}, confirmed=True)
        assert (await other.profile.view(USER)).identity == {"name": "别人"}
    text = (user_dir(files_settings) / "User.md").read_text(encoding="utf-8")
    assert "小王" in text and "别人" not in text
    await files_app.profile_files.sync(USER)
    assert (await files_app.profile.view(USER)).identity == {"name": "小王"}


async def test_edits_are_taken_in_by_maintenance(files_app, files_settings):
    await files_app.profile_files.sync(USER)
    folder = user_dir(files_settings)
    text = (folder / "User.md").read_text(encoding="utf-8").replace("- 称呼 (name):", "- 称呼 (name): 阿杰")
    (folder / "User.md").write_text(text, encoding="utf-8")
    reports = await files_app.profile_files.sync_all()
    assert any(r.taken_in == ["User.md: identity.name"] for r in reports)
    assert (await files_app.profile.view(USER)).identity == {"name": "阿杰"}


async def test_project_md_rolls_older_entries_into_the_database(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, profile_files="on", project_lines=5)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        for day in range(8):
            clock.advance(hours=1)
            await call(client, "add_memory", {"content": f"项目进展第{day}步", "category": "project"})
        project = (user_dir(settings) / "Project.md").read_text(encoding="utf-8")
        assert "项目进展第7步" in project and "项目进展第3步" in project and "项目进展第2步" not in project
        assert "3 earlier entries are archived in the database" in project
        older = await call(client, "list_memories", {"category": "project", "limit": 500})
        assert older["total"] == 8


async def test_project_md_summarises_older_entries_with_the_llm(tmp_path, clock, make_settings):
    from .fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        settings = make_settings(tmp_path, profile_files="on", project_lines=3, llm_base_url=fake.base_url,
                                 llm_model="m", llm_api_key="sk-test")
        async with PocketMem(settings, clock=clock) as app:
            for step in range(5):
                clock.advance(hours=1)
                await app.writing.add(USER, AddRequest(content=f"里程碑{step}", category=Category.project))
            fake.script_chat("- 完成了里程碑0和1")
            await app.profile_files.sync_all()
            sent = fake.requests[-1].json["messages"][-1]["content"]
            assert sent == "- 里程碑0\n- 里程碑1"  # the two entries Project.md no longer shows, oldest first
            project = (user_dir(settings) / "Project.md").read_text(encoding="utf-8")
            assert "- 完成了里程碑0和1" in project and "2 earlier entries are archived" in project
            assert project.index("完成了里程碑0和1") < project.index("里程碑4")
            calls = len(fake.requests)
            await app.profile_files.sync_all()  # nothing new to summarise: the LLM is not asked again
            assert len(fake.requests) == calls


async def test_files_are_off_on_postgresql_by_default(app, settings, client, backend, make_settings):
    await call(client, "update_profile", {**PROFILE, "confirmed": True})
    written = user_dir(settings).exists()
    assert written is (backend.name == "sqlite")
    assert not make_settings(settings.home.parent, profile_files="off").files_on


# -- resources and notifications --------------------------------------------------------------------
async def test_profile_resources_and_their_notifications(app, settings):
    uris: list[str] = []
    both_updated = anyio.Event()

    async def inbox(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            uris.append(message.params.uri)
            if len(uris) >= 2:
                both_updated.set()

    async with Client(build_server(settings, app=app), mode="legacy", message_handler=inbox) as client:
        # The resources speak the user's language, decided by their content: some is there before the test.
        await call(client, "add_memory", {"content": "用户喜欢喝茶"})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            await client.subscribe_resource("memory://persona")
            await client.subscribe_resource("memory://insights")
        await call(client, "update_profile", {"persona": {"tone": "温和"}})
        lesson = await call(client, "add_memory", {"content": "部署前先跑迁移脚本", "category": "lesson",
                                                   "keywords": ["部署", "迁移"]})
        await call(client, "add_memory", {"content": "用户喜欢爬山"})  # changes neither
        with anyio.fail_after(5):
            await both_updated.wait()
        await anyio.sleep(0.1)
        assert uris == ["memory://persona", "memory://insights"]
        assert "- 语气：温和" in await read(client, "memory://persona")
        insights = await read(client, "memory://insights")
        assert "部署前先跑迁移脚本" in insights and lesson["memory_id"] not in insights  # no ids in resources


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_the_resources_speak_the_users_language_and_the_files_stay_bilingual(
    tmp_path, clock, make_settings, lang
):
    """What the model reads (memory://persona, memory://project, memory://insights, as memory://user-card) is in
    one language, the card's: here the user's own content decides it. The files a person edits keep their
    bilingual headings, so a saved file is read back the same way whatever the locale."""
    settings = make_settings(tmp_path, profile_files="on", project_lines=1)
    zh = lang == "zh"
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        persona = {"role": "编程搭档", "tone": "简洁"} if zh else {"role": "coding partner", "tone": "brief"}
        await call(client, "update_profile", {"persona": persona, "identity": {"name": "小王" if zh else "Wang"}})
        for step in (("完成了存储层", "完成了 profile 层") if zh else ("Storage layer done", "Profile layer done")):
            await call(client, "add_memory", {"content": step, "category": "project"})
        lesson = "改配置前先备份" if zh else "Back up the config before changing it"
        await call(client, "add_memory", {"content": lesson, "category": "lesson"})
        await call(client, "recall_memories", {"query": lesson})
        texts = {uri: await read(client, f"memory://{uri}") for uri in ("user-card", "persona", "project", "insights")}
        folder = settings.home / folder_name(USER)
        files = {name: (folder / name).read_text(encoding="utf-8") for name in ("Persona.md", "Project.md")}
    if zh:
        assert texts["user-card"].startswith("# 用户卡")
        assert texts["persona"] == "# 人设\n\n- 身份定位：编程搭档\n- 语气：简洁\n"
        assert texts["project"].startswith("# 项目\n\n## 更早\n- 1 条更早的记录已归档在数据库中：list_memories(")
        assert texts["project"].endswith("\n\n## 当前进展\n- 完成了 profile 层\n")
        assert texts["insights"] == f"# 经验\n\n## 常用经验\n- {lesson}\n"
    else:
        assert texts["user-card"].startswith("# User card")
        assert texts["persona"] == "# Persona\n\n- Role: coding partner\n- Tone: brief\n"
        assert texts["project"] == (
            '# Project\n\n## Earlier\n- 1 earlier entries are archived in the database: '
            'list_memories(category="project")\n\n## Current state\n- Profile layer done\n'
        )
        assert texts["insights"] == f"# Insights\n\n## Hot lessons\n- {lesson}\n"
    assert "## Persona 人设\n- 身份定位 (role): " in files["Persona.md"]
    assert "## Earlier 更早\n" in files["Project.md"] and "## Current state 当前进展\n" in files["Project.md"]


# -- confirm everything, listing by time --------------------------------------------------------------
async def test_confirm_everything_makes_every_agent_write_pending(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, confirm_all=True, store_threshold=1.0)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        result = await call(client, "add_memory", {"content": "用户喜欢爵士乐", "confidence": 1.0})
        assert result["status"] == "pending" and "POCKETMEM_CONFIRM_ALL" in result["message"]
        assert (await call(client, "list_memories", {}))["total"] == 0
        low = await call(client, "add_memory", {"content": "用户也许喜欢摇滚", "confidence": 0.3})
        assert low["status"] == "discarded"
        done = await call(client, "confirm_pending", {"pending_id": result["pending_id"], "action": "confirm"})
        assert done["status"] == "confirmed"
        assert (await call(client, "list_memories", {}))["total"] == 1


async def test_list_memories_by_time_range_with_counts(client, clock):
    clock.set(START - timedelta(days=40))  # last month
    for content in ("交水电费", "给猫打疫苗", "买打印纸"):
        await call(client, "add_memory", {"content": content, "category": "todo"})
    await call(client, "add_memory", {"content": "用户开始学吉他", "category": "goal"})
    clock.set(START)
    await call(client, "add_memory", {"content": "周五交报告", "category": "todo"})
    month = {"since": "2026-10-01", "until": "2026-11-01"}
    todos = await call(client, "list_memories", {"category": "todo", **month})
    assert todos["total"] == 3 and todos["counts"] == {"todo": 3, "goal": 1}
    everything = await call(client, "list_memories", {})
    assert everything["total"] == 5 and everything["counts"] == {"todo": 4, "goal": 1}
    recent = await call(client, "list_memories", {"since": "2026-11-20T00:00:00+08:00"})
    assert [i["content"] for i in recent["items"]] == ["周五交报告"]
    bad = await error(client, "list_memories", {"since": "2026-11-01", "until": "2026-10-01"})
    assert "until" in bad


async def test_the_profile_travels_in_exports(app, client, tmp_path, clock, make_settings):
    import io

    await call(client, "update_profile", {**PROFILE, "confirmed": True})
    proposed = await call(client, "update_profile", {"identity": {"tech": "Go"}})
    await call(client, "confirm_pending", {"pending_id": proposed["pending_id"], "action": "confirm"})
    buffer = io.StringIO()
    counts = await app.exporter.export(buffer)
    assert counts.profile == 2 and counts.profile_revision == 3
    settings = make_settings(tmp_path, db=tmp_path / "copy.db")
    async with PocketMem(settings, clock=clock) as copy:
        report = await copy.exporter.import_lines(buffer.getvalue().splitlines())
        assert report.imported.profile == 2 and report.imported.profile_revision == 3
        view = await copy.profile.view(USER)
        assert view.identity_confirmed and view.identity["tech"] == "Go" and view.persona == PROFILE["persona"]
        again = await copy.exporter.import_lines(buffer.getvalue().splitlines())
        assert again.imported.total == 0


async def test_remember_conversation_proposes_profile_changes(tmp_path, clock, make_settings):
    from .fake_openai import FakeOpenAI
    from .scripted_llm import ops

    with FakeOpenAI() as fake:
        settings = make_settings(tmp_path, llm_base_url=fake.base_url, llm_model="m", llm_api_key="sk-test")
        async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
            await call(client, "update_profile", {**PROFILE, "confirmed": True})
            fake.script_chat(ops(
                {"op": "PROFILE", "identity": {"tech": "Rust"}, "confidence": 0.9, "reason": "换了技术栈"},
                {"op": "PROFILE", "identity": {"age": "30"}, "confidence": 0.9},
            ))
            messages = [{"role": "user", "content": "我现在主要写 Rust 了"}, {"role": "assistant", "content": "好的"}]
            out = await call(client, "remember_conversation", {"messages": messages})
            good, bad = out["items"]
            assert good["op"] == "PROFILE" and good["status"] == "pending" and good["pending_id"]
            assert bad["status"] == "discarded" and "identity.age" in bad["message"]
            assert (await app.profile.view(USER)).identity["tech"] == "Python、PostgreSQL"  # waits for the user
            await call(client, "confirm_pending", {"pending_id": good["pending_id"], "action": "confirm"})
            assert (await app.profile.view(USER)).identity["tech"] == "Rust"
            rubric = fake.requests_to("/chat/completions")[0].json["messages"][0]["content"]
            assert '"op": "PROFILE"' in rubric


async def test_user_md_counts_the_open_todos_it_does_not_list(files_app, files_settings):
    """User.md lists the first 20 open todos, as the user card does, and says how many more there are."""
    await files_app.writing.add_many(
        USER, [AddRequest(content=f"待办事项{i}：记得处理", category=Category.todo) for i in range(23)]
    )
    await files_app.profile_files.sync_all()
    user_md = (user_dir(files_settings) / "User.md").read_text(encoding="utf-8")
    todos = user_md[user_md.index("## Open todos"):user_md.index("## Core memories")]
    assert todos.count("- 待办事项") == 20 and "- … +3\n" in todos
    report = await files_app.profile_files.sync(USER)  # the file as written reads back as no edit
    assert not report.problems and not report.taken_in and not report.failed

