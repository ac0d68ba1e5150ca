"""End to end in a real browser: `pocketmem ui` as a process, driven by Playwright through Debian's chromium.

CI installs chromium and fonts-noto-cjk with apt-get (.ci/run); Playwright's own browser download is
not used. Elsewhere the test is skipped when chromium is missing. Screenshots of the main views are
written to tests/screenshots/ (git-ignored).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.config import Settings
from pocketmem.base.models import Category
from pocketmem.service.manage.tokens import TokenService
from pocketmem.service.writing.add_request import AddRequest

pytestmark = [pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = Path(__file__).parent / "screenshots"
_ANNOUNCE = re.compile(r"memory management page at (http://\S+)")

if CHROMIUM is None and not os.environ.get("CI"):
    pytest.skip(
        "chromium is not installed (apt-get install -y chromium fonts-noto-cjk; .ci/run does this)",
        allow_module_level=True,
    )


def settings_for(home: Path) -> Settings:
    return Settings(home=home, tz="Asia/Shanghai", maintain_interval=0, embedder="hash")  # type: ignore[call-arg]


async def seed(home: Path) -> dict[str, str]:
    async with PocketMem(settings_for(home)) as pm:
        ids: dict[str, str] = {}

        async def add(key: str, user: str, content: str, **kw: object) -> None:
            result = await pm.writing.add(user, AddRequest(content=content, **kw))  # type: ignore[arg-type]
            ids[key] = result.memory_id or result.pending_id or ""

        await add("cilantro", "alice", "用户不喜欢香菜，吃到会很反感", category=Category.preference)
        await add("name", "alice", "用户叫李雷", category=Category.fact, scores={"persistence": 1.0})
        await add("jazz", "alice", "User listens to jazz while coding", category=Category.preference)
        await add("rent", "alice", "周五前交房租", category=Category.todo)
        await add("hiking", "alice", "用户可能喜欢爬山", confidence=0.7)
        await add("bob", "bob", "bob 的秘密计划", category=Category.goal)
        tokens = TokenService(pm.store, pm.clock)
        ids["alice_token"] = (await tokens.create("alice")).token
        ids["bob_token"] = (await tokens.create("bob")).token
    return ids


async def add_later(home: Path, content: str, confidence: float = 1.0) -> None:
    async with PocketMem(settings_for(home)) as pm:
        await pm.writing.add("alice", AddRequest(content=content, category=Category.fact, confidence=confidence))


@pytest.fixture
def ui_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    home = tmp_path / "home"
    home.mkdir()
    log_path = tmp_path / "ui.log"
    env = {"PATH": os.environ.get("PATH", ""), "POCKETMEM_HOME": str(home), "POCKETMEM_TZ": "Asia/Shanghai",
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pocketmem", "ui", "--no-browser"], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=log,
        )
    try:
        deadline = time.monotonic() + 60
        while not (found := _ANNOUNCE.search(log_path.read_text(errors="replace"))):
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        yield found.group(1).rsplit("/memories", 1)[0], home
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_a_person_fixes_and_undoes_without_an_agent(ui_server: tuple[str, Path]) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, home = ui_server
    ids = asyncio.run(seed(home))
    SHOTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(locale="zh-CN", viewport={"width": 1100, "height": 800})
        page = context.new_page()
        third_party: list[str] = []
        page.on("request", lambda r: None if r.url.startswith(base.rsplit("/ui", 1)[0]) else third_party.append(r.url))

        # Tokens exist, so the page asks for one.
        page.goto(f"{base}/memories")
        expect(page).to_have_url(re.compile(r"/ui/login$"))
        page.fill("input[name=token]", ids["alice_token"])
        page.click("button[type=submit]")
        expect(page.locator("#user")).to_have_text("alice")
        expect(page.locator("tr.memory")).to_have_count(4)  # the pending one is not a memory yet
        expect(page.locator("nav")).to_contain_text("回收站")  # Chinese, by the browser's language
        page.screenshot(path=str(SHOTS / "memories.png"), full_page=True)

        # Search, open, forget.
        page.fill("input[name=q]", "香菜")
        page.click("form.filters button[type=submit]")
        expect(page.locator("tr.memory")).to_have_count(1)
        page.click(f"a[href$='/memories/{ids['cilantro']}']")
        expect(page.locator("#content")).to_have_text("用户不喜欢香菜，吃到会很反感")
        page.screenshot(path=str(SHOTS / "memory.png"), full_page=True)
        page.click("#forget-form button")
        expect(page.locator(".msg")).to_contain_text("回收站")

        # Restore it from the trash.
        page.click("nav a[href$='/trash']")
        expect(page.locator(f"tr[data-id='{ids['cilantro']}']")).to_have_count(1)
        page.screenshot(path=str(SHOTS / "trash.png"), full_page=True)
        page.click(f"tr[data-id='{ids['cilantro']}'] button")
        expect(page.locator(".msg")).to_have_text("已恢复。")
        expect(page.locator("tr.trashed")).to_have_count(0)

        # Confirm the pending memory.
        page.click("nav a[href$='/pending']")
        expect(page.locator(f"tr[data-id='{ids['hiking']}']")).to_have_count(1)
        page.screenshot(path=str(SHOTS / "pending.png"), full_page=True)
        page.click(f"tr[data-id='{ids['hiking']}'] button:has-text('确认')")
        expect(page.locator("tr.pending")).to_have_count(0)
        with ThreadPoolExecutor(1) as pool:  # the agent proposes another one meanwhile
            pool.submit(asyncio.run, add_later(home, "用户可能喜欢游泳", 0.7)).result()
        expect(page.locator("tr.pending")).to_have_count(1, timeout=15_000)
        page.click("nav a[href$='/memories']")
        expect(page.locator("tr.memory")).to_have_count(5)
        expect(page.locator("table")).to_contain_text("用户可能喜欢爬山")

        # The open list picks up what an agent writes from another process.
        with ThreadPoolExecutor(1) as pool:  # another writer, outside Playwright's event loop
            pool.submit(asyncio.run, add_later(home, "用户刚换了新工作")).result()
        expect(page.locator("table")).to_contain_text("用户刚换了新工作", timeout=15_000)

        # Patch the core memory.
        page.goto(f"{base}/memories/{ids['name']}")
        page.fill("#patch-form textarea", "英文名 Leo")
        page.click("#patch-form button")
        expect(page.locator("#content")).to_contain_text("英文名 Leo")
        expect(page.locator("#revisions")).to_contain_text("用户叫李雷")

        page.goto(f"{base}/insights")
        expect(page.locator("svg.chart")).to_have_count(4)
        page.screenshot(path=str(SHOTS / "insights.png"), full_page=True)

        # Without JavaScript the page still works: plain links and forms.
        nojs = browser.new_context(java_script_enabled=False, locale="en-US")
        plain = nojs.new_page()
        plain.goto(f"{base}/login")
        plain.fill("input[name=token]", ids["alice_token"])
        plain.click("button[type=submit]")
        plain.goto(f"{base}/memories/{ids['jazz']}")
        plain.click("#forget-form button")
        expect(plain.locator(".msg")).to_contain_text("Moved to the trash")
        nojs.close()

        # Bob sees none of it.
        page.click("header form button")
        expect(page).to_have_url(re.compile(r"/ui/login$"))
        page.fill("input[name=token]", ids["bob_token"])
        page.click("button[type=submit]")
        expect(page.locator("#user")).to_have_text("bob")
        expect(page.locator("tr.memory")).to_have_count(1)
        expect(page.locator("main")).not_to_contain_text("香菜")
        response = page.goto(f"{base}/memories/{ids['name']}")
        assert response is not None and response.status == 404
        page.goto(f"{base}/trash")
        expect(page.locator("tr.trashed")).to_have_count(0)
        browser.close()
    assert third_party == []


async def seed_every_view(home: Path) -> dict[str, str]:
    """The local user's store with something on every view: categories, a forgotten and an evicted memory, a
    pending one, a todo with a due time, recalls, a profile."""
    from datetime import timedelta

    from pocketmem.service.recall.retrieval import RecallRequest

    async with PocketMem(settings_for(home)) as pm:
        user = pm.settings.user
        ids: dict[str, str] = {}

        async def add(key: str, content: str, **kw: object) -> None:
            result = await pm.writing.add(user, AddRequest(content=content, **kw))  # type: ignore[arg-type]
            ids[key] = result.memory_id or result.pending_id or ""

        now = pm.clock.now()
        await add("cilantro", "用户不喜欢香菜，吃到会很反感", category=Category.preference,
                  created_at=now - timedelta(days=3))
        await add("name", "用户叫李雷", category=Category.fact, scores={"persistence": 1.0},
                  created_at=now - timedelta(days=40))
        await add("jazz", "User listens to jazz while coding", category=Category.preference,
                  created_at=now - timedelta(hours=5))
        await add("rent", "周五前交房租", category=Category.todo, due_at=now + timedelta(days=2))
        await add("lesson", "迁移前先备份数据库", category=Category.lesson, created_at=now - timedelta(days=12))
        await add("trip", "下个月去成都出差", category=Category.event, created_at=now - timedelta(minutes=20))
        await add("hiking", "用户可能喜欢爬山", confidence=0.7)
        await add("old", "用户住在北京", category=Category.fact)
        await pm.trash.forget(user, ids["old"], "搬家了")
        await pm.retrieval.recall(user, RecallRequest(query="晚饭放香菜吗", used=[ids["cilantro"]]))
        await pm.profile.update(user, {"role": "编程搭档", "tone": "简洁直接"}, {"name": "李雷"}, confirmed=True)
    return ids


_PAGE_TEXT = """() => {
  const root = document.documentElement.cloneNode(true);
  root.querySelectorAll('[data-user], code, script, style, head').forEach((e) => e.remove());
  const attrs = [...root.querySelectorAll('[placeholder], [title], [aria-label]')].flatMap(
    (e) => ['placeholder', 'title', 'aria-label'].map((name) => e.getAttribute(name) || ''));
  return root.textContent + ' ' + attrs.join(' ');
}"""
# Names, not English: the product, file formats and file names, the size unit.
_NAMES = {"pocketmem", "JSONL", "Markdown", "MB", "Project", "Insights", "md"}


def english_words(page) -> set[str]:  # type: ignore[no-untyped-def]
    """Latin words on the page outside user content (memory text, keywords, ids, commands)."""
    return set(re.findall(r"[A-Za-z]{2,}", page.evaluate(_PAGE_TEXT))) - _NAMES


def every_view(ids: dict[str, str]) -> dict[str, str]:
    """Each view of the page over seed_every_view's store, and its error pages."""
    return {
        "memories": "/memories", "memory": f"/memories/{ids['cilantro']}", "trashed": f"/memories/{ids['old']}",
        "core": f"/memories/{ids['name']}", "todo": f"/memories/{ids['rent']}", "pending": "/pending",
        "review": "/review", "todos": "/todos", "trash": "/trash", "insights": "/insights",
        "health": "/insights/health", "profile": "/profile", "transfer": "/transfer",
        "not_found": "/memories/nosuchid", "invalid": "/memories?sort=sideways", "no_page": "/nosuch",
        "login": "/login",
    }


def test_the_chinese_page_speaks_chinese_everywhere(ui_server: tuple[str, Path]) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, home = ui_server
    ids = asyncio.run(seed_every_view(home))
    views = every_view(ids)
    SHOTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        for locale in ("zh-CN", "en-US"):
            lang = locale[:2]
            context = browser.new_context(locale=locale, viewport={"width": 1100, "height": 800})
            page = context.new_page()
            for view, path in views.items():
                page.goto(f"{base}{path}")
                words = english_words(page)
                assert (words == set()) if lang == "zh" else bool(words), (view, words)  # the probe sees English
                if view in ("memories", "memory", "trash", "insights", "transfer", "not_found"):
                    page.screenshot(path=str(SHOTS / f"{lang}-{view}.png"), full_page=True)
            page.goto(f"{base}/memories")
            first = page.locator(f"tr[data-id='{ids['cilantro']}'] td.num time")
            expect(first).to_have_attribute("title", re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d \+08:00$"))
            expect(first).to_have_text("3天前" if lang == "zh" else "3 days ago")
            context.close()
        browser.close()


async def seed_long_text(home: Path) -> dict[str, str]:
    """Memories no window is wide enough for: a 330-character token, a long URL (trashed with a long reason), long
    Chinese text, a pending one, and a profile whose values are long tokens."""
    token = "Supercalifragilisticexpialidocious_very_long_token_without_spaces_" * 5
    async with PocketMem(settings_for(home)) as pm:
        user = pm.settings.user
        ids: dict[str, str] = {}
        for key, content, category in [
            ("token", token, Category.context), ("url", "https://example.com/" + "a1b2c3d4" * 40, Category.fact),
            ("chinese", "用户的女儿叫朵朵，今年五岁，在海淀区的一所幼儿园上中班，每周三下午有舞蹈课，喜欢画画" * 4,
             Category.person), ("todo", "交物业费" + token, Category.todo),
        ]:
            ids[key] = (await pm.writing.add(user, AddRequest(content=content, category=category))).memory_id or ""
        await pm.writing.add(user, AddRequest(content="maybe " + token, confidence=0.7))
        await pm.trash.forget(user, ids["url"], token)
        await pm.profile.update(user, {"role": token[:290]}, {"name": token[:290]}, confirmed=True)
    return ids


_OVERFLOW = """() => ({
  width: document.documentElement.scrollWidth,
  wrapped: [...document.querySelectorAll('th, .tag, td.num, time, button')].filter((e) => {
    const range = document.createRange();
    range.selectNodeContents(e);
    return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size > 1;
  }).map((e) => e.textContent.trim()),
})"""


def test_long_text_never_widens_the_page(ui_server: tuple[str, Path]) -> None:
    """A long unbroken token or URL breaks inside its cell: no view grows past the window, and labels, numbers and
    category badges stay on one line (使用次数, 人物)."""
    from playwright.sync_api import sync_playwright

    base, home = ui_server
    ids = asyncio.run(seed_long_text(home))
    paths = ["/memories", "/memories?q=Supercalifragilisticexpialidocious&mode=recall", "/todos", "/trash",
             "/pending", "/insights", "/profile", *(f"/memories/{i}" for i in ids.values())]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        fits(browser, base, paths, (1280, 360))
        browser.close()


def fits(browser, base: str, paths: list[str], widths: tuple[int, ...]) -> None:  # type: ignore[no-untyped-def]
    """At each window width, in both languages: no view is wider than the window, and no column heading, number,
    time, category badge or button wraps."""
    for width in widths:
        for locale in ("zh-CN", "en-US"):
            context = browser.new_context(locale=locale, viewport={"width": width, "height": 900})
            page = context.new_page()
            for path in paths:
                page.goto(f"{base}{path}")
                seen = page.evaluate(_OVERFLOW)
                assert seen == {"width": width, "wrapped": []}, (width, locale, path, seen)
            context.close()


def test_every_view_fits_a_phone(ui_server: tuple[str, Path]) -> None:
    """At 360 px (a phone), in both languages, every view and error page fits the window: a table of memories
    shows each row as a card, and times (2026-11-28 06:23 +08:00), figures and headings stay on one line."""
    from playwright.sync_api import sync_playwright

    base, home = ui_server
    views = every_view(asyncio.run(seed_every_view(home)))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        fits(browser, base, list(views.values()), (360,))
        browser.close()


async def seed_forms(home: Path) -> dict[str, str]:
    async with PocketMem(settings_for(home)) as pm:
        user = pm.settings.user
        tea = await pm.writing.add(user, AddRequest(content="用户喜欢喝乌龙茶", category=Category.preference,
                                                    scores={"emotion": 0.33, "persistence": 0.71}))
        return {"tea": tea.memory_id or ""}


def test_the_memory_forms_keep_what_a_person_typed(ui_server: tuple[str, Path]) -> None:
    """With JavaScript (htmx boosting the forms): an edit refused for its length shows why on the memory's page with
    the typed text still in the form, at the memory's address (reloading it is the memory, not the form's address
    answering 405); and the scores form sends any score from 0 to 1 (0.33, 0.71), not only steps of 0.05."""
    from playwright.sync_api import expect, sync_playwright

    base, home = ui_server
    tea = asyncio.run(seed_forms(home))["tea"]
    typed = "我的长笔记" + "长" * 2500
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_context(locale="zh-CN").new_page()
        page.goto(f"{base}/memories/{tea}")
        page.wait_for_function("() => window.htmx !== undefined")
        page.fill("#revise-form textarea", typed)
        page.click("#revise-form button")
        expect(page.locator("#error")).to_have_text("“内容”有 2,505 个字符，超过了 2,000 个字符的上限")
        expect(page.locator("#revise-form textarea")).to_have_value(typed)
        assert page.url == f"{base}/memories/{tea}"
        response = page.reload()
        assert response is not None and response.status == 200
        expect(page.locator("#content")).to_have_text("用户喜欢喝乌龙茶")

        page.select_option("#rescore-form select[name=category]", "fact")
        page.click("#rescore-form button")
        expect(page.locator(".msg")).to_have_text("已保存。")
        expect(page.locator("h1 .tag").first).to_have_text("事实")
        browser.close()
