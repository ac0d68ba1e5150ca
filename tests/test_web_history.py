"""What the page says happened to a memory, and why it refused a request, in both languages: each version of a
fact says what happened to it (and links the other), a purge date shows only while the memory is in the trash
from that move, and a refused confirmation gives its real reason in Chinese too.

The page through its ASGI app in process (tests/asgi.py), the writes through the MCP client or the services, on
both backends."""

from __future__ import annotations

import html
import re
from datetime import datetime

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.models import Category
from pocketmem.mcp.server import build_server
from pocketmem.service.writing.add_request import AddRequest

from .asgi import Browser, make_browser
from .helpers import SHANGHAI, call

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"
ZH = {"Accept-Language": "zh-CN"}
EN = {"Accept-Language": "en"}


async def history(browser: Browser, memory_id: str, headers: dict[str, str]) -> list[tuple[str, str]]:
    """The memory's events as the page lists them, newest first: (kind, the sentence as text)."""
    page = await browser.get(f"/memories/{memory_id}", headers=headers)
    assert page.status_code == 200
    table = page.text[page.text.index('<table id="events">') :]
    rows = re.findall(r'<tr data-kind="(\w+)"><td class="num">.*?</td><td>(.*?)</td></tr>', table)
    return [(kind, html.unescape(re.sub(r"<[^>]+>", "", sentence))) for kind, sentence in rows]


async def kinds(browser: Browser, memory_id: str) -> list[str]:
    return [kind for kind, _ in await history(browser, memory_id, EN)]


async def add(app: PocketMem, content: str, **kw) -> str:
    return (await app.writing.add(USER, AddRequest(content=content, category=Category.fact, **kw))).memory_id or ""


@pytest.fixture
async def browser(app: PocketMem):
    async with make_browser(app) as client:
        yield Browser(client)


async def test_each_version_of_a_fact_says_what_happened_to_it(app, settings, browser, clock):
    old = await add(app, "用户住在北京朝阳区。")
    clock.advance(days=1)
    async with Client(build_server(settings, app=app)) as client:
        new = (await call(client, "add_memory", {
            "content": "用户搬到了杭州西湖区。", "category": "fact", "supersedes": old,
        }))["memory_id"]
    assert await history(browser, new, ZH) == [
        ("updated", "取代了一条较早的记忆（用户住在北京朝阳区。）。"), ("created", "记下了这条记忆。"),
    ]
    assert await history(browser, old, ZH) == [
        ("superseded", "被一条更新的记忆取代（用户搬到了杭州西湖区。）。"), ("created", "记下了这条记忆。"),
    ]
    assert await history(browser, old, EN) == [
        ("superseded", "A newer memory replaced it (用户搬到了杭州西湖区。)."), ("created", "Remembered."),
    ]
    page = await browser.get(f"/memories/{old}")
    assert f'<a href="/ui/memories/{new}" data-user>用户搬到了杭州西湖区。</a>' in page.text

    clock.advance(days=1)
    await app.trash.forget(USER, new, None)  # `pocketmem forget`: the original fact is current again
    assert (await app.get_memory(USER, old))["status"] == "active"
    assert await kinds(browser, old) == ["current_again", "superseded", "created"]
    assert (await history(browser, old, ZH))[0][1] == (
        "重新成为当前版本：取代它的新版本（用户搬到了杭州西湖区。）被遗忘了。"
    )
    assert (await history(browser, old, EN))[0][1] == (
        "Current again: the newer version that replaced it (用户搬到了杭州西湖区。) was forgotten."
    )
    assert ("updated", "It replaced an older memory (用户住在北京朝阳区。).") in await history(browser, new, EN)


async def test_a_current_again_event_logged_before_it_had_its_own_kind_reads_as_one(app, settings, browser, clock):
    """A store written before: the version made current again was logged as `updated` with `current_again` in its
    payload. Opening it again gives those events their own kind, and the page says what happened."""
    old = await add(app, "用户在上海工作")
    new = await add(app, "用户换到了苏州工作", supersedes=old)
    await app.trash.forget(USER, new, None)
    async with app.store.write() as tx:  # as the release before wrote it
        await tx.execute(
            "update memory_events set kind = 'updated', payload = '{\"current_again\": true, \"after\": \"" + new
            + "\"}' where kind = 'current_again'"
        )
        await tx.execute("delete from schema_migrations where name in ('m012_chain_events', 'pg008_chain_events')")
    await app.close()
    async with PocketMem(settings, clock=clock) as reopened, make_browser(reopened) as client:
        events = await history(Browser(client), old, EN)
    assert events[0] == (
        "current_again", "Current again: the newer version that replaced it (用户换到了苏州工作) was forgotten."
    )


async def test_a_purge_date_shows_only_while_the_memory_is_in_the_trash(app, browser, clock):
    clock.set(datetime(2026, 5, 9, 10, 0, tzinfo=SHANGHAI))
    memory_id = await add(app, "用户的车牌是浙A12345")
    await app.trash.forget(USER, memory_id, None)  # purged on 5/16 unless restored
    clock.advance(days=2)
    assert (await history(browser, memory_id, ZH))[0] == ("deleted", "移入回收站（由你遗忘）。 将于5天后清除。")
    assert (await history(browser, memory_id, EN))[0] == (
        "deleted", "Moved to the trash (forgotten by you). It will be purged in 5 days."
    )
    clock.set(datetime(2026, 5, 15, 10, 0, tzinfo=SHANGHAI))
    await app.trash.restore(USER, memory_id)
    clock.set(datetime(2026, 5, 20, 10, 0, tzinfo=SHANGHAI))
    for headers, said in ((ZH, ("从回收站恢复。", "移入回收站（由你遗忘）。")),
                          (EN, ("Restored from the trash.", "Moved to the trash (forgotten by you)."))):
        events = await history(browser, memory_id, headers)
        assert [sentence for _, sentence in events[:2]] == list(said), events
        assert not [s for _, s in events if "清除" in s or "purged" in s], events

    await app.trash.forget(USER, memory_id, None)  # again: only this move says when it goes
    clock.advance(days=8)  # past its purge date, before maintenance has run
    events = await history(browser, memory_id, ZH)
    assert events[0] == ("deleted", "移入回收站（由你遗忘）。 1天前已到清除时间。")
    assert [s for _, s in events if "清除" in s] == [events[0][1]]


async def test_confirming_an_expired_episode_gives_its_reason_in_both_languages(app, browser, clock):
    clock.set(datetime(2026, 4, 29, 20, 0, tzinfo=SHANGHAI))
    pending = (await app.writing.add(USER, AddRequest(
        content="和用户聊了搬家的打算", category=Category.episode, confidence=0.7,
    ))).pending_id
    assert pending is not None
    clock.set(datetime(2026, 5, 20, 9, 0, tzinfo=SHANGHAI))
    zh = await browser.post(f"/pending/{pending}", {"action": "confirm"}, headers=ZH)
    assert zh.status_code == 409
    assert (
        "这条对话摘要说于 2026-04-29 20:00 +08:00，在确认之前已于 2026-05-13 20:00 +08:00 过期（14 天，"
        "POCKETMEM_EPISODE_DAYS），所以没有保存，仍在待确认中：可以拒绝它" in zh.text
    ), zh.text[-800:]
    assert "当前状态下不能这样做" not in zh.text
    en = await browser.post(f"/pending/{pending}", {"action": "confirm"}, headers=EN)
    assert en.status_code == 409 and "expired on 2026-05-13 20:00 +08:00 (14 days" in en.text
    await browser.post(f"/pending/{pending}", {"action": "reject"})
    again = await browser.post(f"/pending/{pending}", {"action": "confirm"}, headers=ZH)
    assert again.status_code == 409 and "这一条已经被拒绝，不会再问。" in again.text


async def test_restoring_a_forgotten_correction_says_so_on_both_versions(app, browser, clock):
    first = await add(app, "用户养了一只猫")
    second = await add(app, "用户把猫送给了姐姐", supersedes=first)
    clock.advance(hours=1)
    await app.trash.forget(USER, second, None)
    clock.advance(hours=1)
    await app.trash.restore(USER, second)  # the correction is current again, the original history again
    assert await kinds(browser, first) == ["superseded", "current_again", "superseded", "created"]
    assert await kinds(browser, second) == ["updated", "restored", "deleted", "updated", "created"]
    assert (await history(browser, first, ZH))[0] == ("superseded", "被一条更新的记忆取代（用户把猫送给了姐姐）。")


async def test_a_chain_event_says_when_the_other_memory_is_no_longer_kept(app, browser, clock):
    old = await add(app, "用户在学游泳")
    new = await add(app, "用户学会了游泳", supersedes=old)
    await app.trash.forget(USER, new, None)
    clock.advance(days=app.settings.trash_days + 1)
    await app.maintenance.run()  # the forgotten version is purged
    assert (await history(browser, old, ZH))[:2] == [
        ("current_again", "重新成为当前版本：取代它的新版本（已不再保存）被遗忘了。"),
        ("superseded", "被一条更新的记忆取代（已不再保存）。"),
    ]
    assert (await history(browser, old, EN))[1] == ("superseded", "A newer memory replaced it (no longer kept).")
