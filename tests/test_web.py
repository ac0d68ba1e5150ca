"""The memory management page through its ASGI app in process (httpx over ASGI), on both backends.

Every view and action is exercised against a real store; the assertions read the page a person would
see and then the store through the services, so a page that says "done" without doing it fails.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import AsyncIterator
from datetime import timedelta

import anyio
import httpx2
import pytest

from pocketmem.app import PocketMem
from pocketmem.base.models import Category, EventKind, Status
from pocketmem.service.manage.tokens import Anonymous, TokenService
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.upkeep.review import PROMOTE_AFTER_USES
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.web.server import mount_page

from .asgi import BASE, Browser, make_browser
from .helpers import START

pytestmark = [pytest.mark.anyio]
USER = "global"
@pytest.fixture
async def browser(app: PocketMem) -> AsyncIterator[Browser]:
    async with make_browser(app) as client:
        yield Browser(client)


async def add(app: PocketMem, content: str, user: str = USER, **kw) -> str:
    result = await app.writing.add(user, AddRequest(content=content, **kw))
    assert result.status in ("stored", "pending"), result
    return result.memory_id or result.pending_id or ""


def ids_on(page: httpx2.Response) -> list[str]:
    return re.findall(r'<tr class="\w+" data-id="([0-9a-f]+)"', page.text)


# -- the list -------------------------------------------------------------------------------------------
@pytest.mark.backends
async def test_list_filters_sorts_and_pages(app, browser, clock):
    cilantro = await add(app, "用户不喜欢香菜", category=Category.preference, source="chat")
    clock.advance(days=1)
    name = await add(app, "User's name is Li Lei", category=Category.fact,
                     scores={"emotion": 1.0, "info": 1.0, "persistence": 1.0, "judge": 1.0})
    clock.advance(days=1)
    jazz = await add(app, "User listens to jazz while coding", category=Category.preference,
                     scores={"emotion": 0.2, "info": 0.3, "persistence": 0.3, "judge": 0.3})
    await app.retrieval.recall(USER, RecallRequest(query="jazz coding music"))

    page = await browser.get("/memories")
    assert page.status_code == 200
    assert ids_on(page) == [jazz, name, cilantro]  # newest first
    assert ids_on(await browser.get("/memories?sort=oldest")) == [cilantro, name, jazz]
    assert ids_on(await browser.get("/memories?sort=importance"))[0] == name
    assert ids_on(await browser.get("/memories?sort=uses"))[0] == jazz
    assert ids_on(await browser.get("/memories?category=preference")) == [jazz, cilantro]
    assert ids_on(await browser.get("/memories?core=true")) == [name]
    assert ids_on(await browser.get("/memories?core=false")) == [jazz, cilantro]
    assert ids_on(await browser.get("/memories?source=chat")) == [cilantro]
    day = (START + timedelta(days=1)).date().isoformat()
    assert ids_on(await browser.get(f"/memories?since={day}&until={day}")) == [name]
    assert ids_on(await browser.get(f"/memories?since={day}")) == [jazz, name]

    first = await browser.get("/memories?per_page=2")
    assert ids_on(first) == [jazz, name] and 'rel="next"' in first.text
    second = await browser.get("/memories?per_page=2&page=2")
    assert ids_on(second) == [cilantro] and 'rel="prev"' in second.text

    assert ids_on(await browser.get("/memories?q=香菜")) == [cilantro]
    recalled = await browser.get("/memories?q=我不吃香菜&mode=recall")
    assert ids_on(recalled)[0] == cilantro
    assert ids_on(await browser.get("/memories?q=jazz&mode=recall&core=true")) == []
    # Searching the page does not count as the agent using a memory.
    assert (await app.get_memory(USER, cilantro))["use_count"] == 0


@pytest.mark.backends
async def test_bad_list_parameters_are_refused_with_the_field_and_rule(app, browser):
    for query, field in (("sort=bogus", "sort"), ("page=0", "page"), ("per_page=5000", "per_page"),
                         ("category=nonsense", "category"), ("since=yesterday", "since"),
                         ("since=2026-11-27&until=2026-11-20", "until"),
                         # outside the years a store keeps, as list_memories refuses them (checked in UTC)
                         ("since=0999-01-01", "since"), ("until=9999-12-31", "until"), ("until=0001-01-01", "until"),
                         ("since=1000-01-01", "since")):
        page = await browser.get(f"/memories?{query}")
        assert page.status_code == 400, query
        assert re.search(rf'id="error">{field}: ', page.text), (query, page.text[-600:])


# -- one memory and its changes ---------------------------------------------------------------------------
@pytest.mark.backends
async def test_a_memory_shows_its_facts_history_and_events(app, browser, clock):
    old = await add(app, "用户住在北京", category=Category.fact)
    clock.advance(days=3)
    page = await browser.get(f"/memories/{old}")
    assert "用户住在北京" in page.text and "3 days" in page.text
    assert "= 0.6" in page.text or "Importance" in page.text
    assert 'data-kind="created"' in page.text and "Remembered." in page.text

    revised = await browser.post(f"/memories/{old}/revise", {"content": "用户搬到了上海"})
    assert revised.status_code == 303 and revised.headers["location"].endswith("msg=saved")
    new_id = revised.headers["location"].split("/memories/")[1].split("?")[0]
    assert new_id != old
    newer = await app.get_memory(USER, new_id)
    assert newer["content"] == "用户搬到了上海" and newer["supersedes"] == old and newer["source"] == "ui"
    assert (await app.get_memory(USER, old))["status"] == "superseded"
    page = await browser.get(f"/memories/{new_id}")
    assert 'id="older"' in page.text and "用户住在北京" in page.text
    page = await browser.get(f"/memories/{old}")
    assert "用户搬到了上海" in page.text and "Replaced by" in page.text


@pytest.mark.backends
async def test_patch_a_core_memory_and_refuse_patching_others(app, browser):
    core = await add(app, "用户叫李雷", category=Category.fact, scores={"persistence": 1.0})
    other = await add(app, "用户喜欢爵士乐", category=Category.preference)
    page = await browser.get(f"/memories/{core}")
    assert 'id="patch-form"' in page.text and 'id="revise-form"' not in page.text
    done = await browser.post(f"/memories/{core}/patch", {"patch": "英文名 Leo", "mode": "append"})
    assert done.status_code == 303
    patched = await app.get_memory(USER, core)
    assert patched["content"].startswith("用户叫李雷（") and "英文名 Leo" in patched["content"]
    assert len(patched["revisions"]) == 1
    page = await browser.get(f"/memories/{core}")
    assert 'id="revisions"' in page.text and "<del>用户叫李雷</del>" in page.text
    same = await browser.post(f"/memories/{core}/patch", {"patch": patched["content"], "mode": "replace"})
    assert same.status_code == 303 and same.headers["location"].endswith("msg=patch_unchanged")
    assert len((await app.get_memory(USER, core))["revisions"]) == 1
    refused = await browser.post(f"/memories/{other}/patch", {"patch": "x", "mode": "append"})
    assert refused.status_code == 409 and "not a core memory" in refused.text
    bad_mode = await browser.post(f"/memories/{core}/patch", {"patch": "x", "mode": "insert"})
    assert bad_mode.status_code == 400 and "mode: must be append or replace" in bad_mode.text


@pytest.mark.backends
async def test_rescore_changes_category_and_scores_with_an_event(app, browser):
    memory_id = await add(app, "用户打算明年考研", category=Category.fact)
    before = await app.get_memory(USER, memory_id)
    done = await browser.post(
        f"/memories/{memory_id}/rescore",
        {"category": "goal", "emotion": "0.9", "info": "0.9", "persistence": "1", "judge": "0.9"},
    )
    assert done.status_code == 303
    after = await app.get_memory(USER, memory_id)
    assert after["category"] == "goal" and after["core"] is True
    assert after["importance"] > before["importance"]
    page = await browser.get(f"/memories/{memory_id}")
    assert 'data-kind="rescored"' in page.text
    refused = await browser.post(f"/memories/{memory_id}/rescore", {"info": "1.5"})
    assert refused.status_code == 400 and "scores.info: must be between 0 and 1" in refused.text
    assert (await app.get_memory(USER, memory_id))["scores"]["info"] == 0.9


@pytest.mark.backends
async def test_complete_and_reopen_a_todo(app, browser, clock):
    rent = await add(app, "交房租", category=Category.todo, due_at=START + timedelta(hours=2))
    clock.advance(hours=3)
    todos = await browser.get("/todos")
    assert rent in ids_on(todos) and "overdue" in todos.text
    done = await browser.post(f"/memories/{rent}/todo", {"done": "1", "back": "todos"})
    assert done.status_code == 303 and "/todos" in done.headers["location"]
    assert (await app.get_memory(USER, rent))["completed_at"] is not None
    assert rent not in ids_on(await browser.get("/todos"))
    await browser.post(f"/memories/{rent}/todo", {"done": "0"})
    assert (await app.get_memory(USER, rent))["completed_at"] is None
    twice = await browser.post(f"/memories/{rent}/todo", {"done": "0"})
    assert twice.status_code == 409


@pytest.mark.backends
async def test_forget_then_restore_from_the_trash(app, browser, clock):
    memory_id = await add(app, "用户养了一只猫叫团子", category=Category.fact)
    gone = await browser.post(f"/memories/{memory_id}/forget", {"reason": "wrong"})
    assert gone.status_code == 303 and gone.headers["location"].endswith("msg=forgotten")
    assert (await app.get_memory(USER, memory_id))["status"] == "trashed"
    assert memory_id not in ids_on(await browser.get("/memories"))
    trash = await browser.get("/trash")
    assert ids_on(trash) == [memory_id]
    purge = (START + timedelta(days=app.settings.trash_days)).date().isoformat()
    assert purge in trash.text and "user_delete" in trash.text
    back = await browser.post(f"/trash/{memory_id}/restore")
    assert back.status_code == 303
    assert (await app.get_memory(USER, memory_id))["status"] == "active"
    assert ids_on(await browser.get("/trash")) == []
    again = await browser.post(f"/trash/{memory_id}/restore")
    assert again.status_code == 409 and "not in the trash" in again.text


@pytest.mark.backends
async def test_pending_confirm_reject_and_snooze(app, browser):
    keep = await add(app, "用户可能喜欢爬山", confidence=0.7)
    drop = await add(app, "用户可能讨厌下雨", confidence=0.7)
    later = await add(app, "用户可能在学日语", confidence=0.7)
    page = await browser.get("/pending")
    assert set(ids_on(page)) == {keep, drop, later}
    await browser.post(f"/pending/{keep}", {"action": "confirm"})
    await browser.post(f"/pending/{drop}", {"action": "reject"})
    snoozed = await browser.post(f"/pending/{later}", {"action": "snooze"})
    assert snoozed.headers["location"].endswith("msg=snoozed")
    listed = await app.listing.list_memories(USER, category=None, status="active", text="爬山", limit=5, offset=0)
    assert [m.content for m in listed.items] == ["用户可能喜欢爬山"]
    page = await browser.get("/pending")
    assert ids_on(page) == [later] and "snoozed" in page.text
    refused = await browser.post(f"/pending/{drop}", {"action": "confirm"})
    assert refused.status_code == 409 and "already rejected" in refused.text
    bad = await browser.post(f"/pending/{later}", {"action": "maybe"})
    assert bad.status_code == 400 and "action: must be" in bad.text


@pytest.mark.backends
async def test_a_pending_profile_change_shows_as_a_profile_change(app, browser):
    await app.profile.update(USER, {"role": "编程搭档"}, {"name": "李雷"}, confirmed=True)
    proposed = await app.profile.update(USER, {"tone": "简洁"}, None)  # after confirmation: waits for the user
    assert proposed.pending_id is not None
    page = await browser.get("/pending?lang=zh")
    start = page.text.index(f'data-id="{proposed.pending_id}"')
    row = page.text[start : page.text.index("</tr>", start)]
    assert "资料修改" in row and "事实" not in row and "100%" not in row


@pytest.mark.backends
async def test_review_queue_promote_keep_and_forget(app, browser, clock):
    name = await add(app, "用户喜欢别人叫他小林", category=Category.preference)
    chatter = await add(app, "用户最近常聊足球", category=Category.fact)
    for _ in range(PROMOTE_AFTER_USES):
        clock.advance(hours=1)
        await app.retrieval.recall(USER, RecallRequest(query="你好", used=[name, chatter]))
    page = await browser.get("/review")
    assert set(ids_on(page)) == {name, chatter}
    await browser.post(f"/review/{name}", {"decision": "promote"})
    await browser.post(f"/review/{chatter}", {"decision": "keep"})
    assert (await app.get_memory(USER, name))["core"] is True
    assert ids_on(await browser.get("/review")) == []
    trip = await add(app, "用户下个月想去成都玩", category=Category.event,
                     scores={"emotion": 0.6, "info": 0.5, "persistence": 0.2, "judge": 0.7})
    clock.advance(days=3)
    assert ids_on(await browser.get("/review")) == [trip]
    await browser.post(f"/review/{trip}", {"decision": "forget"})
    assert (await app.get_memory(USER, trip))["status"] == "trashed"


# -- pictures, profile, export / import, live updates, languages -----------------------------------------
@pytest.mark.backends
async def test_insights_draw_the_store(app, browser, clock):
    for i in range(6):
        await add(app, f"fact number {i} about the user's work", category=Category.fact,
                  scores={"emotion": 0.1 * i, "info": 0.1 * i, "persistence": 0.1, "judge": 0.1 * i})
    await add(app, "用户叫李雷", category=Category.fact, scores={"persistence": 1.0})
    await app.retrieval.recall(USER, RecallRequest(query="fact number 3 about the work"))
    page = await browser.get("/insights")
    assert page.status_code == 200
    assert page.text.count("<svg") == 4
    assert re.search(r"<title>\d{4}-\d\d-\d\d · fact: 7</title>", page.text)
    assert re.search(r"<title>\d{4}-\d\d-\d\d · recalled: 1</title>", page.text)
    assert "6 of 800 places used; 1 core memories do not count" in page.text
    evicted = re.search(r'<ol id="next-evicted">(.*?)</ol>', page.text, re.DOTALL)
    assert evicted is not None
    assert re.findall(r"fact number (\d)", evicted.group(1)) == ["0", "1", "2", "3", "4"]  # least important first
    health = await browser.get("/insights/health")
    assert health.status_code == 200 and "healthy" in health.text


def shown(page: httpx2.Response, field: str) -> str:
    """The value the profile tab shows for `section.key`."""
    found = re.search(rf'<dd data-field="{re.escape(field)}">(.*?)</dd>', page.text, re.DOTALL)
    assert found is not None, field
    return found.group(1)


@pytest.mark.backends
async def test_profile_tab_shows_the_saved_profile_card_project_and_insights(app, browser):
    await app.profile.update(
        USER, {"role": "编程搭档", "tone": "简洁直接", "boundaries": "改代码前先问", "taboos": "不要用表情",
               "priorities": "先给结论"},
        {"name": "李雷", "background": "后端工程师", "tech": "Python, PostgreSQL", "collaboration": "先给方案再动手"},
        confirmed=True,
    )
    await add(app, "用户叫李雷", category=Category.fact, scores={"persistence": 1.0})
    await add(app, "pocketmem 的网页管理界面正在补画像页", category=Category.project)
    lesson = await add(app, "迁移前先备份数据库", category=Category.lesson)
    await app.retrieval.recall(USER, RecallRequest(query="备份数据库", used=[lesson]))
    page = await browser.get("/profile")
    assert page.status_code == 200
    assert shown(page, "persona.role") == "编程搭档" and shown(page, "persona.taboos") == "不要用表情"
    assert shown(page, "identity.name") == "李雷" and shown(page, "identity.tech") == "Python, PostgreSQL"
    assert 'data-confirmed="yes"' in page.text
    assert 'name="persona.tone" value="简洁直接"' in page.text and 'name="confirm"' not in page.text
    card = re.search(r'<pre id="user-card"[^>]*>(.*?)</pre>', page.text, re.DOTALL)
    assert card is not None and "李雷" in card.group(1)
    project = re.search(r'<pre id="project-md"[^>]*>(.*?)</pre>', page.text, re.DOTALL)
    assert project is not None and "正在补画像页" in project.group(1)
    insights = re.search(r'<pre id="insights-md"[^>]*>(.*?)</pre>', page.text, re.DOTALL)
    assert insights is not None and "迁移前先备份数据库" in insights.group(1)
    assert html.unescape(project.group(1)) == await app.profile.render_project(USER)  # as memory://project
    assert html.unescape(insights.group(1)) == await app.profile.render_insights(USER)  # as memory://insights
    zh = await browser.get("/profile", headers={"Accept-Language": "zh-CN"})
    assert "身份定位" in zh.text and "协作习惯" in zh.text and "已由你确认" in zh.text


@pytest.mark.backends
async def test_the_profile_form_saves_then_asks_for_confirmation_once_confirmed(app, browser):
    page = await browser.get("/profile")
    assert 'data-confirmed="no"' in page.text and 'name="confirm" value="1" checked' in page.text
    form = {"persona.role": "编程搭档", "persona.tone": "简洁", "identity.name": "小林", "identity.tech": "Rust"}
    draft = await browser.post("/profile", form)  # the box left unticked: a draft, still unconfirmed
    assert draft.status_code == 303 and draft.headers["location"].endswith("/profile?msg=saved")
    view = await app.profile.view(USER)
    assert view.persona == {"role": "编程搭档", "tone": "简洁"} and view.identity == {"name": "小林", "tech": "Rust"}
    assert view.identity_confirmed is False

    done = await browser.post("/profile", {**form, "identity.tech": "Rust, Go", "confirm": "1"})
    assert done.headers["location"].endswith("msg=profile_confirmed")
    view = await app.profile.view(USER)
    assert view.identity["tech"] == "Rust, Go" and view.identity_confirmed is True
    page = await browser.get("/profile?msg=profile_confirmed")
    assert "your profile is confirmed" in page.text and shown(page, "identity.tech") == "Rust, Go"

    same = await browser.post("/profile", {**form, "identity.tech": "Rust, Go"})
    assert same.headers["location"].endswith("msg=unchanged")
    # Confirmed: the change (an emptied tone is removed) waits on the Pending tab, where the person confirms it.
    change = await browser.post("/profile", {**form, "identity.tech": "Rust, Go", "identity.name": "林",
                                             "persona.tone": ""})
    assert change.headers["location"].endswith("msg=profile_pending")
    assert (await app.profile.view(USER)).identity["name"] == "小林"
    page = await browser.get("/profile?msg=profile_pending")
    assert "waits on the Pending tab" in page.text and 'href="/ui/pending"' in page.text
    waiting = ids_on(await browser.get("/pending"))
    assert len(waiting) == 1
    confirmed = await browser.post(f"/pending/{waiting[0]}", {"action": "confirm"})
    assert confirmed.status_code == 303
    view = await app.profile.view(USER)
    assert view.identity == {"name": "林", "tech": "Rust, Go"} and view.persona == {"role": "编程搭档"}
    listed = await app.listing.list_memories(USER, category=None, status="active", text=None, limit=5, offset=0)
    assert listed.total == 0  # the proposal changed the profile; it was not stored as a memory

    too_long = await browser.post("/profile", {"identity.name": "名" * 301})
    assert too_long.status_code == 400 and "identity.name" in too_long.text


@pytest.mark.backends
async def test_a_profile_change_without_the_csrf_token_changes_nothing(app, browser):
    await app.profile.update(USER, {"role": "编程搭档"}, {"name": "李雷"})
    await browser.get("/profile")
    missing = await browser.client.post("/ui/profile", data={"identity.name": "mallory", "confirm": "1"})
    assert missing.status_code == 403 and "expired" in missing.text
    wrong = await browser.client.post("/ui/profile", data={"csrf": "0" * 64, "identity.name": "mallory"})
    assert wrong.status_code == 403
    foreign = await browser.post("/profile", {"identity.name": "mallory"}, headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 403
    view = await app.profile.view(USER)
    assert view.identity == {"name": "李雷"} and view.identity_confirmed is False


@pytest.mark.backends
async def test_another_users_token_sees_and_edits_only_their_own_profile(app):
    await app.profile.update(USER, {"role": "本机用户的搭档"}, {"name": "本机用户"}, confirmed=True)
    await app.profile.update("bob", {"role": "bob 的老师"}, {"name": "Bob"}, confirmed=True)
    await add(app, "bob 在做一个秘密项目", user="bob", category=Category.project)
    tokens = TokenService(app.store, app.clock)
    alice = (await tokens.create("alice")).token
    async with make_browser(app) as client:
        assert (await client.post("/ui/login", data={"token": alice})).status_code == 303
        browser = Browser(client)
        page = await browser.get("/profile")
        assert page.status_code == 200 and 'id="user">alice<' in page.text
        for other in ("本机用户", "bob 的老师", "Bob", "秘密项目"):
            assert other not in page.text, other
        assert 'data-confirmed="no"' in page.text
        saved = await browser.post("/profile", {"identity.name": "Alice", "confirm": "1"})
        assert saved.headers["location"].endswith("msg=profile_confirmed")
    assert (await app.profile.view("alice")).identity == {"name": "Alice"}
    assert (await app.profile.view("bob")).identity == {"name": "Bob"}
    assert (await app.profile.view(USER)).identity == {"name": "本机用户"}


@pytest.mark.backends
async def test_export_and_import_only_the_users_own_rows(app, browser, settings):
    mine = await add(app, "用户不喜欢香菜", category=Category.preference, scores={"persistence": 1.0})
    await add(app, "bob likes tea", user="bob")
    exported = await browser.get("/export.jsonl")
    assert exported.status_code == 200 and "attachment" in exported.headers["content-disposition"]
    rows = [json.loads(line) for line in exported.text.splitlines()]
    contents = [r.get("content") for r in rows if r.get("type") == "memory" or "content" in r]
    assert any("香菜" in json.dumps(r, ensure_ascii=False) for r in rows)
    assert not any("bob likes tea" in json.dumps(r) for r in rows), contents
    markdown = await browser.get("/export.md")
    assert markdown.status_code == 200 and "香菜" in markdown.text

    await app.trash.forget(USER, mine, None)
    for _ in range(1):  # purge the memory for good is maintenance's job; re-importing an existing row is skipped
        done = await browser.post("/import", files={"file": ("x.jsonl", exported.content, "application/x-ndjson")})
    assert done.status_code == 200 and 'id="import-report"' in done.text

    bob_export = json.dumps({"type": "memory", **(await app.get_memory("bob", (await app.listing.list_memories(
        "bob", category=None, status="active", text=None, limit=1, offset=0)).items[0].id))})
    header = exported.text.splitlines()[0]
    upload = ("b.jsonl", f"{header}\n{bob_export}\n".encode(), "text/plain")
    refused = await browser.post("/import", files={"file": upload})
    assert refused.status_code == 400, refused.text[-500:]
    empty = await browser.post("/import", files={"file": ("e.jsonl", b"", "text/plain")})
    assert empty.status_code == 400 and "file: " in empty.text
    wide = await browser.post("/import", files={"file": ("w.jsonl", exported.text.encode("utf-16"), "text/plain")})
    assert wide.status_code == 400 and "file: is UTF-16 or UTF-32 text" in wide.text  # as `pocketmem import` says


@pytest.mark.backends
async def test_an_open_list_learns_of_new_writes(app, browser):
    page = await browser.get("/memories")
    latest = int(re.search(r"/live\?after=(\d+)", page.text).group(1))
    quiet = await browser.get(f"/live?after={latest}")
    assert quiet.status_code == 200 and "HX-Trigger" not in quiet.headers
    new_id = await add(app, "用户刚刚说他换了工作", category=Category.fact)
    moved = await browser.get(f"/live?after={latest}")
    assert moved.headers["HX-Trigger"] == "pm-changed"
    after = int(re.search(r"/live\?after=(\d+)", moved.text).group(1))
    assert after > latest
    rows = await browser.get("/memories", headers={"HX-Request": "true", "HX-Target": "rows"})
    assert rows.text.lstrip().startswith('<div id="rows">') and new_id in rows.text


@pytest.mark.backends
async def test_the_page_speaks_the_browsers_language(app, browser):
    zh = await browser.get("/memories", headers={"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"})
    assert "回收站" in zh.text and 'lang="zh-CN"' in zh.text
    en = await browser.get("/memories", headers={"Accept-Language": "en-GB,en;q=0.9,zh;q=0.5"})
    assert "Trash" in en.text and "回收站" not in en.text
    forced = await browser.get("/memories?lang=zh", headers={"Accept-Language": "en"})
    assert "回收站" in forced.text


@pytest.mark.backends
async def test_unknown_memory_is_a_404_page(app, browser):
    page = await browser.get("/memories/0123456789abcdef")
    assert page.status_code == 404 and "Not found: it does not exist, or it belongs to another user." in page.text


# -- access -------------------------------------------------------------------------------------------------
@pytest.mark.backends
async def test_tokens_sign_in_and_see_only_their_user(app, clock):
    mine = await add(app, "alice 喜欢猫", user="alice")
    theirs = await add(app, "bob 喜欢狗", user="bob")
    local = await add(app, "本机用户的记忆")
    tokens = TokenService(app.store, app.clock)
    alice = (await tokens.create("alice")).token
    await tokens.create("bob")
    async with make_browser(app) as client:
        browser = Browser(client)
        page = await browser.get("/memories")
        assert page.status_code == 303 and page.headers["location"] == "/ui/login"
        polled = await browser.get("/live?after=0", headers={"HX-Request": "true"})
        assert polled.headers["HX-Redirect"] == "/ui/login"
        assert (await client.post(f"/ui/memories/{local}/forget", data={"csrf": "x"})).status_code == 401
        wrong = await client.post("/ui/login", data={"token": alice[:-2] + "xx"})
        assert wrong.status_code == 401 and "not valid" in wrong.text
        signed = await client.post("/ui/login", data={"token": alice})
        assert signed.status_code == 303
        cookie = signed.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and alice not in cookie
        page = await browser.get("/memories")
        assert ids_on(page) == [mine] and 'id="user">alice<' in page.text
        assert (await browser.get(f"/memories/{theirs}")).status_code == 404
        assert (await browser.post(f"/memories/{theirs}/forget")).status_code == 404
        assert (await app.get_memory("bob", theirs))["status"] == "active"
        assert "bob" not in (await browser.get("/export.jsonl")).text

        record = (await tokens.list("alice"))[0]
        await tokens.revoke(record.id)
        assert (await browser.get("/memories")).status_code == 303  # the session ended with its token


@pytest.mark.backends
async def test_changes_need_the_csrf_token_and_a_same_origin(app, browser):
    memory_id = await add(app, "用户喜欢喝绿茶", category=Category.preference)
    await browser.get("/memories")
    missing = await browser.client.post(f"/ui/memories/{memory_id}/forget", data={})
    assert missing.status_code == 403
    foreign = await browser.post(f"/memories/{memory_id}/forget", headers={"Origin": "https://evil.example"})
    assert foreign.status_code == 403
    assert (await app.get_memory(USER, memory_id))["status"] == "active"
    same = await browser.post(f"/memories/{memory_id}/forget", headers={"Origin": BASE})
    assert same.status_code == 303
    assert (await app.get_memory(USER, memory_id))["status"] == "trashed"


async def test_a_foreign_host_name_is_refused(app, browser):
    page = await browser.client.get("/ui/memories", headers={"Host": "attacker.example"})
    assert page.status_code == 421


@pytest.mark.parametrize(("accept", "host", "sign_in"), [
    ("zh-CN,zh;q=0.9", "pocketmem：本服务器不响应这个主机名", "pocketmem：请先登录"),
    ("en-US,en;q=0.9", "pocketmem: this server does not answer to that host name", "pocketmem: sign in first"),
])
async def test_refusals_before_any_page_speak_the_page_language(app, accept, host, sign_in):
    local = await add(app, "本机用户的记忆")
    await TokenService(app.store, app.clock).create("alice")  # tokens exist: the local user signs in too
    async with make_browser(app) as client:
        lang = {"Accept-Language": accept}
        for path in ("/ui/memories", "/ui/login"):
            foreign = await client.get(path, headers={**lang, "Host": "attacker.example"})
            assert (foreign.status_code, foreign.text) == (421, host)
            assert foreign.headers["content-type"].startswith("text/plain; charset=utf-8")
        posted = await client.post(f"/ui/memories/{local}/forget", data={"csrf": "x"}, headers=lang)
        assert (posted.status_code, posted.text) == (401, sign_in)
        chosen = await client.post(f"/ui/memories/{local}/forget?lang=zh", data={"csrf": "x"})
        assert (chosen.status_code, chosen.text) == (401, "pocketmem：请先登录")
    assert (await app.get_memory(USER, local))["status"] == "active"


@pytest.mark.backends
async def test_never_anonymous_asks_for_a_sign_in_even_without_tokens(app):
    async with make_browser(app, Anonymous.never) as client:
        assert (await client.get("/ui/memories")).status_code == 303


@pytest.mark.backends
async def test_http_transport_serves_the_page_under_ui(app, settings):
    from pocketmem.mcp.http import NetworkOptions, build_app

    asgi = build_app(settings, app, NetworkOptions(transport="http", mount=mount_page), Anonymous.until_first_token)
    memory_id = await add(app, "用户喜欢跑步", category=Category.preference)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=asgi), base_url=BASE) as client:
        page = await client.get("/ui/memories")
        assert page.status_code == 200 and memory_id in page.text
        assert 'href="/ui/static/style.css"' in page.text
        assert (await client.get("/ui/static/htmx.min.js")).status_code == 200
    events = await app.browse.detail(USER, memory_id)
    assert [e.kind for e in events.events] == [EventKind.created]
    assert events.memory.status == Status.active


@pytest.mark.backends
async def test_plain_text_search_uses_the_keyword_index_and_falls_back_to_a_scan(app, browser, clock, monkeypatch):
    from pocketmem.service.manage import browse

    tea = []
    for n in range(3):
        clock.advance(minutes=1)
        tea.append(await add(app, f"用户第{n}次说喜欢喝绿茶", category=Category.preference))
    sure = await add(app, "User is 100% sure about the move", category=Category.fact)
    assert set(ids_on(await browser.get("/memories?q=绿茶"))) == set(tea)
    assert ids_on(await browser.get("/memories?q=绿茶&sort=oldest")) == tea
    assert ids_on(await browser.get("/memories?q=绿茶&per_page=2&page=2")) == [tea[0]]
    assert ids_on(await browser.get("/memories?q=%25")) == [sure]  # no index terms: a substring scan
    monkeypatch.setattr(browse, "TEXT_CANDIDATES", 2)  # too many matches for the index path: a scan
    assert set(ids_on(await browser.get("/memories?q=绿茶"))) == set(tea)


@pytest.mark.backends
async def test_an_oversized_form_is_refused_before_it_is_read(app, browser):
    memory_id = await add(app, "用户喜欢喝绿茶", category=Category.preference)
    await browser.get("/memories")
    big = await browser.post(f"/memories/{memory_id}/revise", {"content": "茶" * 400_000})
    assert big.status_code == 413 and "form: is larger than" in big.text
    assert (await app.get_memory(USER, memory_id))["status"] == "active"
    for language, said in (("en", "form: is larger than"), ("zh-CN", "字节的上限")):  # before signing in too
        sign_in = await browser.client.post("/ui/login", data={"token": "x" * 1_100_000},
                                            headers={"Accept-Language": language})
        assert sign_in.status_code == 413 and said in sign_in.text and "pocketmem_ui" not in sign_in.cookies


@pytest.mark.backends
async def test_a_session_holds_across_workers_and_restarts_and_cannot_be_forged(app, clock):
    await add(app, "alice 喜欢猫", user="alice")
    tokens = TokenService(app.store, app.clock)
    alice = (await tokens.create("alice")).token
    async with make_browser(app) as first:
        signed = await first.post("/ui/login", data={"token": alice})
        cookie = signed.cookies["pocketmem_ui"]
    assert alice not in cookie
    async with make_browser(app) as second:  # another worker, or the page after a restart
        page = await second.get("/ui/memories", headers={"Cookie": f"pocketmem_ui={cookie}"})
        assert page.status_code == 200 and 'id="user">alice<' in page.text
        token_id, expires, signature = cookie.split(".")
        for forged in (f"{token_id}.{int(expires) + 86400}.{signature}", f"{token_id}.{expires}.{'0' * 64}", "x"):
            assert (await second.get("/ui/memories", headers={"Cookie": f"pocketmem_ui={forged}"})).status_code == 303
        clock.advance(days=8)
        assert (await second.get("/ui/memories", headers={"Cookie": f"pocketmem_ui={cookie}"})).status_code == 303


@pytest.mark.backends
async def test_pending_trash_and_todos_pages_refresh_themselves(app, browser):
    for path in ("/pending", "/trash", "/todos"):
        page = await browser.get(path)
        assert 'hx-trigger="pm-changed from:body" hx-target="#view"' in page.text, path
        assert re.search(r"/live\?after=\d+", page.text), path
    assert 'hx-target="#view"' not in (await browser.get("/memories")).text  # the list refreshes its rows only


@pytest.mark.backends
async def test_the_chinese_page_names_categories_reasons_events_and_errors(app, browser):
    memory_id = await add(app, "用户住在北京", category=Category.fact)
    await app.trash.forget(USER, memory_id, "搬家了")
    zh = {"Accept-Language": "zh-CN"}
    trash = await browser.get("/trash", headers=zh)
    assert "<span class=\"tag\">事实</span>" in trash.text and ">由你遗忘</td>" in trash.text
    detail = await browser.get(f"/memories/{memory_id}", headers=zh)
    assert "记下了这条记忆。" in detail.text and "移入回收站（由你遗忘）。" in detail.text
    assert "<q data-user>搬家了</q>" in detail.text and "reason=" not in detail.text
    missing = await browser.get("/memories/nosuchid", headers=zh)
    assert missing.status_code == 404 and "找不到" in missing.text and "no memory with id" not in missing.text
    bad = await browser.get("/memories?sort=sideways", headers=zh)
    assert bad.status_code == 400 and "“排序”只能是其中之一：<code data-user>" in bad.text
    assert "Input should be" not in bad.text
    refused = await browser.post("/import", files={"file": ("x.jsonl", b"\xff\xfe{}")}, headers=zh)
    assert refused.status_code == 400 and "“文件”的值不对" in refused.text and "UTF-8" not in refused.text
    english = await browser.get("/memories?sort=sideways", headers={"Accept-Language": "en"})
    assert "sort: must be one of <code data-user>newest</code>, <code data-user>oldest</code>" in english.text


@pytest.mark.backends
async def test_every_chart_has_a_legend_in_the_pages_language(app, browser):
    await add(app, "用户住在北京", category=Category.fact)
    await app.retrieval.recall(USER, RecallRequest(query="住在哪里"))
    page = await browser.get("/insights", headers={"Accept-Language": "zh-CN"})
    assert page.text.count("<svg") == 4 and page.text.count('<ul class="legend">') == 4
    for words in ("事实", "被召回", "已用位置", "空余位置", "达到上限时先被淘汰"):
        assert words in page.text, words


@pytest.mark.backends
async def test_concurrent_first_sign_ins_agree_on_one_session_key(app):
    """Several workers (each its own access object) sign their first visitors in at once: every session they hand
    out holds everywhere, because the signing key is created once and never overwritten."""
    from pocketmem.web.access import SECRET_META

    alice = (await TokenService(app.store, app.clock).create("alice")).token
    workers = [make_browser(app) for _ in range(6)]

    cookies: list[str] = []

    async def sign_in(worker: httpx2.AsyncClient) -> None:
        signed = await worker.post("/ui/login", data={"token": alice})
        assert signed.status_code == 303
        cookies.append(signed.cookies["pocketmem_ui"])

    async with anyio.create_task_group() as tasks:
        for worker in workers * 2:
            tasks.start_soon(sign_in, worker)
    key = await app.store.get_meta(SECRET_META)
    assert await app.store.claim_meta(SECRET_META, "00" * 32) == key  # kept, not overwritten
    for worker in workers:
        for cookie in cookies:
            page = await worker.get("/ui/memories", headers={"Cookie": f"pocketmem_ui={cookie}"})
            assert page.status_code == 200 and 'id="user">alice<' in page.text
        await worker.aclose()
