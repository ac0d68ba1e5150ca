"""Privacy: secrets are redacted or refused (never stored silently), and temporary mode stores and recalls nothing."""

from __future__ import annotations

import json

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.errors import InvalidInput
from pocketmem.base.models import EventKind
from pocketmem.core.privacy import cn_id_ok, find_secrets, luhn_ok, screen
from pocketmem.mcp.server import build_server
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest

pytestmark = [pytest.mark.anyio]
USER = "global"

SECRETS = [
    (
        "my OpenAI key is sk-proj-abcdefghijklmnopqrstuvwxyz123456",
        "api_key",
        "sk-proj-abcdefghijklmnopqrstuvwxyz123456",
    ),
    (
        "anthropic: sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123",
        "api_key",
        "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123",
    ),
    ("AWS key AKIAIOSFODNN7EXAMPLE for the backup bucket", "api_key", "AKIAIOSFODNN7EXAMPLE"),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "api_key",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    ("deploy token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "api_key", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "api_key",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    ),
    ("slack bot xoxb-123456789012-abcdefghijKL", "api_key", "xoxb-123456789012-abcdefghijKL"),
    ("password: hunter2", "password", "hunter2"),
    ("my password is Tr0ub4dor&3", "password", "Tr0ub4dor&3"),
    ("用户的服务器密码是Hunter2!记得改", "password", "Hunter2"),
    ("银行卡密码：886622", "password", "886622"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
     "private_key", "b3BlbnNzaC1rZXktdjEAAAAA"),
    ("卡号 4111 1111 1111 1111，有效期 12/28", "card_number", "4111 1111 1111 1111"),
    ("card 5500-0000-0000-0004 expires soon", "card_number", "5500-0000-0000-0004"),
    ("身份证号11010519491231002X", "id_number", "11010519491231002X"),
    ("SSN 123-45-6789", "id_number", "123-45-6789"),
]

NOT_SECRETS = [
    "I forgot my password again",
    "my password is in 1Password",
    "密码是生日",
    "用户不喜欢香菜，吃到会很反感。",
    "Docker 构建要用 proxy-env",
    "订单号 4111111111111112",  # fails the Luhn check
    "身份证 110105194912310021",  # wrong checksum
    "手机号 13800138000",
    "the meeting is on 2026-11-28 at 10:00",
    "My secret: chocolate",
    "I like shopping: books",
    "the API key lives in the vault",
]


@pytest.mark.parametrize(("text", "kind", "secret"), SECRETS)
def test_each_kind_of_secret_is_found_and_redacted(text, kind, secret):
    screened = screen(text)
    assert screened.kinds == [kind]
    assert secret not in screened.text
    assert ("【已隐去的" in screened.text) or ("[redacted " in screened.text)


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_talk_about_secrets_is_not_a_secret(text):
    assert find_secrets(text) == []
    assert screen(text).text == text


def test_checksums():
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")
    assert cn_id_ok("11010519491231002X") and not cn_id_ok("110105194912310021")
    assert not cn_id_ok("110105194913310029")  # month 13: checksum aside, not a birth date


async def _events(app: PocketMem) -> list:
    async with app.store.read() as r:
        return await r.list_events(USER, 1000)


@pytest.mark.backends
async def test_add_memory_redacts_and_says_so(app):
    result = await app.writing.add(
        USER, AddRequest(
            content="用户的服务器密码是Hunter2!，部署时要用", keywords=["服务器", "sk-abcdefghijklmnopqrstuvwx12"]
        )
    )
    assert result.status == "stored" and result.redacted == ["password", "api_key"]
    assert "password" in result.message and "API key" in result.message
    async with app.store.read() as r:
        memory = await r.get_memory(USER, result.memory_id)
    assert memory.content == "用户的服务器密码是【已隐去的密码】!，部署时要用"
    assert memory.keywords == ["服务器"]
    everything = json.dumps([e.model_dump(mode="json") for e in await _events(app)], ensure_ascii=False)
    assert "Hunter2" not in everything and "sk-abcdef" not in everything


@pytest.mark.backends
@pytest.mark.parametrize("content", ["password: hunter2", "密码：886622", "api_key=sk-abcdefghijklmnopqrstuvwx12"])
async def test_a_labelled_secret_alone_is_refused(app, content):
    result = await app.writing.add(USER, AddRequest(content=content))
    assert (result.status, result.reason) == ("discarded", "secret")


@pytest.mark.backends
async def test_a_memory_that_is_only_a_secret_is_refused(app):
    result = await app.writing.add(USER, AddRequest(content="sk-proj-abcdefghijklmnopqrstuvwxyz123456"))
    assert (result.status, result.reason, result.redacted) == ("discarded", "secret", ["api_key"])
    assert result.memory_id is None and "Never save secrets" in result.message
    assert "contains an API key" in result.message, result.message
    events = await _events(app)
    assert [(e.kind, e.payload) for e in events] == [(EventKind.discarded, {"reason": "secret", "kinds": ["api_key"]})]


@pytest.mark.backends
async def test_refuse_mode_refuses_instead_of_redacting(tmp_path, clock, make_settings):
    async with PocketMem(make_settings(tmp_path, secrets="refuse"), clock=clock) as app:
        result = await app.writing.add(USER, AddRequest(content="my password is Tr0ub4dor&3, remember it for me"))
        assert (result.status, result.reason) == ("discarded", "secret")
        assert (await app.stats(USER))["active"] == 0
        core = await app.writing.add(USER, AddRequest(content="用户叫小林", scores={"persistence": 1}))
        with pytest.raises(InvalidInput, match="patch: contains a password"):
            await app.patching.patch_core(USER, core.memory_id, "密码：hunter2", "append", None)


@pytest.mark.backends
async def test_patches_are_redacted_too(app):
    core = await app.writing.add(USER, AddRequest(content="用户在公司用一台 MacBook", scores={"persistence": 1}))
    patched = await app.patching.patch_core(USER, core.memory_id, "换了新电脑，开机密码是 Qwer1234!", "append", None)
    assert patched.redacted == ["password"]
    assert "Qwer1234" not in patched.memory.content and "【已隐去的密码】" in patched.memory.content


@pytest.mark.backends
async def test_temporary_setting_stores_and_recalls_nothing(tmp_path, clock, make_settings):
    path = tmp_path / "shared.db"
    async with PocketMem(make_settings(tmp_path, db=path), clock=clock) as normal:
        kept = await normal.writing.add(USER, AddRequest(content="用户不喜欢香菜", keywords=["香菜"]))
        assert kept.status == "stored"
    async with PocketMem(make_settings(tmp_path, db=path, temporary=True), clock=clock) as temp:
        result = await temp.writing.add(USER, AddRequest(content="用户今天心情很差"))
        assert (result.status, result.reason) == ("discarded", "temporary")
        recalled = await temp.retrieval.recall(USER, RecallRequest(query="晚饭能放香菜吗", keywords=["香菜"]))
        assert recalled.temporary and recalled.memories == [] and recalled.injection == ""
        assert "Temporary mode" in await temp.user_card(USER)
        stats = await temp.stats(USER)
        assert stats["active"] == 1
        async with temp.store.read() as r:
            memory = await r.get_memory(USER, kept.memory_id)
            assert memory.use_count == 0  # not even counted as recalled
            assert [e.kind for e in await r.list_events(USER)] == [EventKind.created]


@pytest.mark.backends
async def test_temporary_per_call_through_the_client(client: Client):
    stored = await client.call_tool("add_memory", {"content": "用户养了一只叫小白的猫", "keywords": ["猫"]})
    temp = await client.call_tool("add_memory", {"content": "用户刚和女朋友吵架了", "temporary": True})
    assert temp.structured_content["status"] == "discarded" and temp.structured_content["reason"] == "temporary"
    off = await client.call_tool("recall_memories", {"query": "小白今天不吃饭", "keywords": ["猫"], "temporary": True})
    assert off.structured_content["temporary"] is True and off.structured_content["memories"] == []
    on = await client.call_tool("recall_memories", {"query": "小白今天不吃饭", "keywords": ["猫"]})
    assert [m["id"] for m in on.structured_content["memories"]] == [stored.structured_content["memory_id"]]
    listed = await client.call_tool("list_memories", {})
    assert [i["content"] for i in listed.structured_content["items"]] == ["用户养了一只叫小白的猫"]


@pytest.mark.backends
async def test_secret_refusal_through_the_client(tmp_path, clock, make_settings):
    app = PocketMem(make_settings(tmp_path, secrets="refuse"), clock=clock)
    await app.open()
    try:
        async with Client(build_server(app.settings, app=app), mode="legacy") as client:
            result = await client.call_tool("add_memory", {"content": "信用卡 4111 1111 1111 1111 的额度是五万"})
            assert not result.is_error
            assert result.structured_content["status"] == "discarded"
            assert result.structured_content["redacted"] == ["card_number"]
    finally:
        await app.close()


@pytest.mark.backends
async def test_a_secret_with_only_its_name_around_it_is_refused_and_says_why(client: Client):
    key = "sk-proj-abcdefghijklmnopqrstuvwxyz123456"
    refused = await client.call_tool("add_memory", {"content": f"我的 OpenAI API key 是 {key}"})
    assert not refused.is_error
    out = refused.structured_content
    assert (out["status"], out["reason"], out["redacted"]) == ("discarded", "secret", ["api_key"])
    assert "nothing worth remembering is left without it" in out["message"]
    english = await client.call_tool("add_memory", {"content": "my password is Tr0ub4dor&3, remember it for me"})
    assert english.structured_content["reason"] == "secret"
    kept = await client.call_tool("add_memory", {"content": "公司 VPN 的密码是 Qwer1234!x，每季度换一次"})
    assert (kept.structured_content["status"], kept.structured_content["redacted"]) == ("stored", ["password"])
    listed = (await client.call_tool("list_memories", {})).structured_content["items"]
    assert [item["content"] for item in listed] == ["公司 VPN 的密码是 【已隐去的密码】，每季度换一次"]
