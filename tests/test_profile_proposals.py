"""Proposed profile changes (docs/profile.md, "Later changes wait for the user") and patches that change nothing,
through the SDK's own client on both backends: the proposal speaks POCKETMEM_LOCALE and says what it clears, the
same proposal is one pending item, a rejected one is not asked again (update_profile and remember_conversation
alike), pending profile changes are no memories of a category, and a patch with the text a core memory already
has writes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.mcp.server import build_server

from .asgi import Browser, make_browser
from .helpers import call

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"
PROFILE = {"identity": {"name": "小王", "tech": "Python"}, "persona": {"tone": "轻松"}, "confirmed": True}


@pytest.fixture(params=["auto", "legacy"])
async def zh_client(request, tmp_path, clock, make_settings) -> AsyncIterator[Client]:
    """A confirmed profile, POCKETMEM_LOCALE=zh."""
    settings = make_settings(tmp_path, locale="zh")
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app),
                                                                mode=request.param) as client:
        await call(client, "update_profile", PROFILE)
        yield client


async def asked(client: Client) -> dict[str, str]:
    """pending_id -> content of what the next recall asks the user."""
    recalled = await call(client, "recall_memories", {"query": "帮我看看这段 Go 代码"})
    return {p["pending_id"]: p["content"] for p in recalled["pending_confirmations"]}


async def test_a_proposal_speaks_the_locale_and_says_what_it_clears(zh_client):
    tech = await call(zh_client, "update_profile", {"identity": {"tech": "Go, Rust"}})
    tone = await call(zh_client, "update_profile", {"persona": {"tone": ""}})
    blanks = [await call(zh_client, "update_profile", {"identity": {"name": blank}}) for blank in ("   ", "\u200b")]
    assert blanks[0]["status"] == blanks[1]["status"] == "pending"
    assert blanks[0]["pending_id"] == blanks[1]["pending_id"]  # the same change after cleaning: one item
    assert await asked(zh_client) == {
        tech["pending_id"]: "更新个人资料：技术偏好：Go, Rust",
        tone["pending_id"]: "更新个人资料：语气：（清空）",
        blanks[0]["pending_id"]: "更新个人资料：称呼：（清空）",
    }
    # Only the fields that change are proposed: the name it already has is not asked about.
    both = await call(zh_client, "update_profile", {"identity": {"name": "小王", "tech": "Go, Rust"}})
    assert both["pending_id"] == tech["pending_id"] and both["changed"] == ["identity.tech"]

    await call(zh_client, "confirm_pending", {"pending_id": blanks[0]["pending_id"], "action": "confirm"})
    card = (await zh_client.read_resource("memory://user-card")).contents[0].text
    assert "称呼" not in card and "技术偏好：Python" in card


async def test_without_a_locale_the_values_choose_the_language(client, app):
    await call(client, "update_profile", PROFILE)
    english = await call(client, "update_profile", {"identity": {"tech": "Go, Rust"}, "persona": {"tone": ""}})
    chinese = await call(client, "update_profile", {"identity": {"background": "后端工程师"}})
    assert await asked(client) == {
        english["pending_id"]: "Profile update: Tone: (cleared); Tech preferences: Go, Rust",
        chinese["pending_id"]: "更新个人资料：职业背景：后端工程师",
    }


async def test_a_rejected_profile_change_is_not_asked_again(tmp_path, clock, make_settings):
    from .fake_openai import FakeOpenAI
    from .scripted_llm import ops

    with FakeOpenAI() as fake:
        settings = make_settings(tmp_path, locale="zh", llm_base_url=fake.base_url, llm_model="m",
                                 llm_api_key="sk-test")
        async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
            await call(client, "update_profile", PROFILE)
            first = await call(client, "update_profile", {"identity": {"name": "李总"}})
            await call(client, "confirm_pending", {"pending_id": first["pending_id"], "action": "reject"})

            again = await call(client, "update_profile", {"identity": {"name": "  李总 "}})
            assert again["status"] == "rejected" and again["pending_id"] == first["pending_id"]
            assert "rejected" in again["message"] and again["profile"]["identity"]["name"] == "小王"
            fake.script_chat(ops({"op": "PROFILE", "identity": {"name": "李总"}, "confidence": 0.9}))
            messages = [{"role": "user", "content": "以后叫我李总"}, {"role": "assistant", "content": "好的"}]
            item = (await call(client, "remember_conversation", {"messages": messages}))["items"][0]
            assert item["op"] == "PROFILE" and item["status"] == "discarded" and "rejected" in item["message"]
            assert await asked(client) == {}
            pending = await call(client, "list_memories", {"status": "pending"})
            assert pending["total"] == 0

            other = await call(client, "update_profile", {"identity": {"name": "老王"}})  # another change is asked
            assert other["status"] == "pending" and other["pending_id"] != first["pending_id"]


async def test_a_person_may_make_a_change_they_rejected_on_the_web_page(app, client):
    await call(client, "update_profile", PROFILE)
    async with make_browser(app) as raw:
        browser = Browser(raw)
        first = await browser.post("/profile", {"identity.name": "李总"})
        assert first.headers["location"].endswith("msg=profile_pending")
        (item,) = (await call(client, "list_memories", {"status": "pending"}))["items"]
        await browser.post(f"/pending/{item['pending_id']}", {"action": "reject"})
        agent = await call(client, "update_profile", {"identity": {"name": "李总"}})
        assert agent["status"] == "rejected"  # the agent does not ask again
        again = await browser.post("/profile", {"identity.name": "李总"})  # the person asks for it themselves
        assert again.headers["location"].endswith("msg=profile_pending")
        (filed,) = (await call(client, "list_memories", {"status": "pending"}))["items"]
        assert filed["pending_id"] != item["pending_id"] and filed["kind"] == "profile"


async def test_pending_profile_changes_are_no_memories_of_a_category(client):
    await call(client, "update_profile", PROFILE)
    change = await call(client, "update_profile", {"identity": {"name": "王哥"}})
    memory = await call(client, "add_memory", {"content": "用户可能喜欢爵士乐", "confidence": 0.7})
    listed = await call(client, "list_memories", {"status": "pending"})
    assert listed["total"] == 2 and listed["counts"] == {"fact": 1}
    kinds = {i["pending_id"]: (i["kind"], i["category"]) for i in listed["items"]}
    assert kinds == {change["pending_id"]: ("profile", None), memory["pending_id"]: ("memory", "fact")}
    facts = await call(client, "list_memories", {"status": "pending", "category": "fact"})
    assert [i["pending_id"] for i in facts["items"]] == [memory["pending_id"]] and facts["total"] == 1
    recalled = await call(client, "recall_memories", {"query": "叫我什么"})
    shown = {p["pending_id"]: p["category"] for p in recalled["pending_confirmations"]}
    assert shown[change["pending_id"]] is None


async def test_a_patch_with_the_text_it_has_writes_nothing(client):
    core = await call(client, "add_memory", {"content": "你很爱吃辣。", "category": "preference",
                                              "scores": {"persistence": 1}})
    memory_id = core["memory_id"]
    patched = await call(client, "patch_core_memory", {"memory_id": memory_id, "patch": "你不吃辣了。",
                                                       "mode": "replace"})
    assert patched["status"] == "patched" and patched["revision_id"]
    same = await call(client, "patch_core_memory", {"memory_id": memory_id, "patch": " 你不吃辣了。 ",
                                                    "mode": "replace"})
    assert same["status"] == "unchanged" and same["revision_id"] is None
    assert same["memory"]["content"] == "你不吃辣了。" and same["previous_content"] == "你不吃辣了。"
    stored = json.loads((await client.read_resource(f"memory://memories/{memory_id}")).contents[0].text)
    assert len(stored["revisions"]) == 1 and stored["content"] == "你不吃辣了。"
