"""What the page's edits do, and what it says they did: an edit that stores nothing says so and why, in the
page's language; a new version keeps what the old one was (a done todo stays done); a rescore follows the rule of
what may be core that review follows; refusals carry their facts in Chinese too; addresses the page does not have
answer with its own error page.

The page through its ASGI app in process (tests/asgi.py), the store read back through the services, on both
backends."""

from __future__ import annotations

import html
import io
import json
import re

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.errors import Conflict
from pocketmem.base.models import Category
from pocketmem.service.writing.add_request import AddRequest

from .asgi import Browser, make_browser

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"
ZH = {"Accept-Language": "zh-CN"}
EN = {"Accept-Language": "en"}


@pytest.fixture
async def browser(app: PocketMem):
    async with make_browser(app) as client:
        yield Browser(client)


async def add(app: PocketMem, content: str, user: str = USER, **kw) -> str:
    result = await app.writing.add(user, AddRequest(content=content, **kw))
    assert result.status == "stored", result
    return result.memory_id or ""


def said(page) -> str:  # type: ignore[no-untyped-def]
    """The page's message or error, as text."""
    found = re.search(r'<div class="(?:msg|error)"[^>]*>(.*?)</div>', page.text, re.S)
    assert found, page.text[-800:]
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1)))


async def kinds_of(app: PocketMem, memory_id: str) -> list[str]:
    return [e.kind.value for e in (await app.browse.detail(USER, memory_id)).events]


async def test_an_edit_that_stores_nothing_says_so_and_why(app, browser):
    tea = await add(app, "用户喜欢喝乌龙茶", category=Category.preference)
    for headers, secret_said in ((ZH, "没有保存：内容里有密码"), (EN, "Not saved: the text contains a password")):
        refused = await browser.post(f"/memories/{tea}/revise", {"content": "my password is Tr0ub4dor&3x"},
                                     headers=headers)
        assert refused.status_code == 400 and said(refused).startswith(secret_said), said(refused)
        assert "Tr0ub4dor" not in refused.text  # the secret is not put back in the form
        assert refused.headers["HX-Push-Url"] == "false"  # the form's address is not one to come back to
    assert (await app.get_memory(USER, tea))["status"] == "active"

    for headers, unchanged in ((ZH, "没有需要保存的"), (EN, "Nothing to save")):
        same = await browser.post(f"/memories/{tea}/revise", {"content": "用户喜欢喝乌龙茶。"}, headers=headers)
        assert same.status_code == 303 and same.headers["location"].endswith(f"/{tea}?msg=edit_unchanged")
        assert said(await browser.get(same.headers["location"][3:], headers=headers)).startswith(unchanged)
    assert await kinds_of(app, tea) == ["created"]  # a person's unchanged save is not the user saying it again

    long_text = "我的长笔记" + "长" * 2500
    for headers, limit in ((ZH, "“内容”有 2,505 个字符，超过了 2,000 个字符的上限"),
                           (EN, "content: is 2,505 characters; the limit is 2,000")):
        refused = await browser.post(f"/memories/{tea}/revise", {"content": long_text}, headers=headers)
        assert refused.status_code == 400 and said(refused) == limit
        assert f"data-user>{long_text}</textarea>" in refused.text  # the person's text is still in the form

    green = await add(app, "用户喜欢喝绿茶", category=Category.preference)
    merged = await browser.post(f"/memories/{tea}/revise", {"content": "用户喜欢喝绿茶"}, headers=ZH)
    assert merged.status_code == 303 and merged.headers["location"].endswith(f"/{green}?msg=edit_duplicate")
    assert (await app.get_memory(USER, tea))["status"] == "superseded"

    saved = await browser.post(f"/memories/{green}/revise", {"content": "用户喜欢喝明前龙井"}, headers=ZH)
    assert saved.status_code == 303 and saved.headers["location"].endswith("msg=saved")

    name = await add(app, "用户叫李雷", category=Category.fact, scores={"persistence": 1.0})
    refused = await browser.post(f"/memories/{name}/patch", {"patch": "my password is Tr0ub4dor&3x", "mode": "append"},
                                 headers=ZH)
    assert refused.status_code == 400 and said(refused) == "“修补内容”里有密码；机密信息从不保存"
    assert "Tr0ub4dor" not in refused.text and (await app.get_memory(USER, name))["content"] == "用户叫李雷"


async def test_a_new_version_of_a_done_todo_stays_done(app, browser):
    rent = await add(app, "周五前交房租", category=Category.todo)
    await app.todos.set_done(USER, rent, True)
    done_at = (await app.get_memory(USER, rent))["completed_at"]
    revised = await browser.post(f"/memories/{rent}/revise", {"content": "周五前交房租 3000 元"})
    new = revised.headers["location"].split("/memories/")[1].split("?")[0]
    assert new != rent and (await app.get_memory(USER, new))["completed_at"] == done_at
    assert new not in (await browser.get("/todos")).text
    assert all(m.id != new for m in (await app.browse.todos(USER)).todos)


async def test_a_rescore_follows_the_core_rule_review_follows(app, browser):
    rent = await add(app, "周五前交房租", category=Category.todo)
    refused = await browser.post(f"/memories/{rent}/rescore", {"persistence": "1"}, headers=ZH)
    assert refused.status_code == 409 and said(refused).startswith("待办是短期的，不会成为核心记忆"), said(refused)
    assert (await app.get_memory(USER, rent))["core"] is False
    with pytest.raises(Conflict, match="never promoted"):  # the rule review applies, from the same place
        await app.review.decide(USER, rent, "promote", None)

    name = await add(app, "用户叫李雷", category=Category.fact, scores={"persistence": 1.0})
    refused = await browser.post(f"/memories/{name}/rescore", {"category": "episode"}, headers=EN)
    assert refused.status_code == 409 and "conversation summary is short-lived" in said(refused)
    assert (await app.get_memory(USER, name))["category"] == "fact"
    moved = await browser.post(f"/memories/{name}/rescore", {"category": "episode", "persistence": "0.33"})
    assert moved.status_code == 303
    after = await app.get_memory(USER, name)
    assert after["category"] == "episode" and after["core"] is False and after["scores"]["persistence"] == 0.33


async def test_refusals_carry_their_facts_in_chinese(app, browser):
    await add(app, "bob likes tea", user="bob")
    out = io.StringIO()
    await app.exporter.export(out, ["bob"])
    header, *rows = out.getvalue().splitlines()
    bob_row = next(json.loads(row) for row in rows if json.loads(row)["type"] == "memory")
    upload = ("b.jsonl", f"{header}\n{json.dumps(bob_row)}\n".encode(), "text/plain")
    other = await browser.post("/import", files={"file": upload}, headers=ZH)
    assert other.status_code == 400 and said(other) == f"这个文件里有用户 bob 的记录；这里只能导入 {USER} 的记录"

    broken = {k: v for k, v in bob_row.items() if k != "user_id"}
    upload = ("c.jsonl", f"{header}\n{json.dumps(broken)}\n".encode(), "text/plain")
    line = await browser.post("/import", files={"file": upload}, headers=ZH)
    assert line.status_code == 400 and said(line) == "第 2 行：缺少“memory.user_id”", said(line)
    assert '<code data-user>memory.user_id</code>' in line.text

    mine = {**bob_row, "user_id": USER, "id": "a" * 32, "content": "长" * 2500}
    fine = {**bob_row, "user_id": USER, "id": "b" * 32, "content": "用户喜欢喝红茶"}
    rows = f"{header}\n{json.dumps(fine)}\n{json.dumps(mine)}\n".encode()
    for headers, reason in ((ZH, "第 3 行：“content”有 2,500 个字符，超过了 2,000 个字符的上限"),
                            (EN, "line 3: content: is 2,500 characters; the limit is 2,000")):
        report = await browser.post("/import", files={"file": ("d.jsonl", rows, "text/plain")}, headers=headers)
        assert report.status_code == 200
        listed = re.search(r'<ul id="import-refused"><li>(.*?)</li>', report.text)
        assert listed and html.unescape(re.sub(r"<[^>]+>", "", listed.group(1))) == reason

    # bob's export re-targeted to this user keeps bob's ids: each such line refused with its cause and its fix
    taken = f"{header}\n{json.dumps(fine)}\n{json.dumps({**bob_row, 'user_id': USER})}\n".encode()
    for headers, reason in (
        (ZH, f"第 3 行：“id”是这个存储里另一位用户的记忆的编号，所以不能作为 {USER} 的记忆导入："
             "编号在所有用户之间是唯一的。要把记忆复制给另一位用户，"
             "请在文件里给每一条换一个新编号（32 位十六进制数字），再导入一次"),
        (EN, f"line 3: id: is the id of another user's memory in this store, so it cannot be imported for {USER}: ids "
             "are unique across users. To copy memories to another user, give each a new id (32 hex digits) in the "
             "file and import it again"),
    ):
        report = await browser.post("/import", files={"file": ("e.jsonl", taken, "text/plain")}, headers=headers)
        listed = re.search(r'<ul id="import-refused"><li>(.*?)</li>', report.text)
        assert listed and html.unescape(re.sub(r"<[^>]+>", "", listed.group(1))) == reason
        assert f"<code data-user>{USER}</code>" in listed.group(1)

    # the values a field takes, each as written, joined in the page's words
    for query, field, values in (("sort=bogus", "排序", ["newest", "oldest", "importance", "uses"]),
                                 ("status=x", "状态", ["active", "superseded", "trashed", "all"])):
        page = await browser.get(f"/memories?{query}", headers=ZH)
        joined = "、".join(values[:-1]) + " 或 " + values[-1]
        assert page.status_code == 400 and said(page) == f"“{field}”只能是其中之一：{joined}", said(page)
        assert "<code data-user>newest</code>、" in page.text or "<code data-user>active</code>、" in page.text
        assert " or " not in said(page) and "'" not in said(page)
        english = await browser.get(f"/memories?{query}", headers=EN)
        assert said(english).endswith(", ".join(values[:-1]) + " or " + values[-1]), said(english)

    for headers in (ZH, EN):  # a person is not sent to an agent's tools
        for path in ("/memories/0123456789abcdef", "/pending/0123456789abcdef", "/trash/0123456789abcdef/restore"):
            page = await (browser.get(path, headers=headers) if path.startswith("/memories")
                          else browser.post(path, {"action": "confirm"}, headers=headers))
            assert page.status_code == 404, (path, page.status_code)
            assert not re.search(r"list_memories|list_trash|memory://", page.text), said(page)


async def test_addresses_the_page_does_not_have_answer_with_its_error_page(app, browser):
    for headers, lang, missing, method in ((ZH, "zh-CN", "这里没有这个页面。", "这个地址只接收表单提交"),
                                           (EN, "en", "There is no such page here.", "This address takes a form")):
        page = await browser.get("/nosuch", headers=headers)
        assert page.status_code == 404 and f'lang="{lang}"' in page.text and said(page) == missing
        assert page.headers["content-type"].startswith("text/html")
        page = await browser.get("/memories/0123456789abcdef/revise", headers=headers)
        assert page.status_code == 405 and said(page).startswith(method) and page.headers["allow"] == "POST"
        page = await browser.client.delete("/ui/memories", headers=headers)
        assert page.status_code == 405 and "DELETE" in said(page) and f'lang="{lang}"' in page.text


async def test_a_search_for_nothing_visible_is_refused_as_list_memories_refuses_it(app, browser):
    await add(app, "用户喜欢喝乌龙茶", category=Category.preference)
    for query in ("%00", "%E2%80%8B", "%20%20"):
        page = await browser.get(f"/memories?q={query}", headers=ZH)
        assert page.status_code == 400 and said(page) == "“搜索词”不能为空，也不能只有空白或看不见的字符", query
        assert 'data-id="' not in page.text
    assert len(re.findall(r'<tr class="memory"', (await browser.get("/memories?q=乌龙茶")).text)) == 1


async def test_a_form_from_a_stale_page_is_refused_in_the_pages_words(app, browser):
    """A page open since the memory changed sends a form that no longer fits it: the refusal says why in the
    page's words, in both languages, never as the tools' names (patch_core_memory, add_memory)."""
    name = await add(app, "用户叫李雷", category=Category.fact, scores={"persistence": 1.0})
    tea = await add(app, "用户喜欢喝乌龙茶", category=Category.preference)
    black = (await app.curation.revise(USER, tea, "用户喜欢喝红茶")).added.memory_id
    for headers, core, not_core, gone in (
        (ZH, "这是一条核心记忆：要用修补", "这不是核心记忆：请用编辑保存新版本",
         "这条记忆已被取代：只有有效的记忆才能修改。"),
        (EN, "This is a core memory: it is changed by a patch", "This is not a core memory: edit it",
         "This memory is superseded: only an active memory can be changed."),
    ):
        refused = await browser.post(f"/memories/{name}/revise", {"content": "用户叫韩梅梅"}, headers=headers)
        assert refused.status_code == 409 and said(refused).startswith(core), said(refused)
        refused = await browser.post(f"/memories/{black}/patch", {"patch": "x", "mode": "append"}, headers=headers)
        assert refused.status_code == 409 and said(refused).startswith(not_core), said(refused)
        refused = await browser.post(f"/memories/{tea}/rescore", {"info": "0.5"}, headers=headers)
        assert refused.status_code == 409 and said(refused) == gone
        assert not re.search(r"patch_core_memory|add_memory", refused.text)
    assert (await app.get_memory(USER, name))["content"] == "用户叫李雷"
