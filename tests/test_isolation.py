"""Two users on one HTTP server: each token acts as its user, and nothing crosses between them. The server runs
in process, through the ASGI app (tests/asgi.py), on both backends.

Bob holds every id of Alice's (active, core, superseded, trashed, pending) and tries every tool,
resource and prompt with them. He must get "not found" (or nothing), and Alice's store must be
exactly as it was — including use counts, which a leaking recall would bump.
"""

from __future__ import annotations

import json

import pytest

from tests.asgi import serve_in_process

pytestmark = [pytest.mark.anyio, pytest.mark.backends]

UNKNOWN_ID = "0" * 32
ALICE_TEXTS = ("用户不喜欢香菜，吃到会很反感。", "用户的名字叫林晓", "用户下周二要去字节面试", "用户住在杭州")


async def ok(client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def refused(client, tool: str, args: dict, id_field: str = "memory_id") -> None:
    """An error that reads exactly like the one for an id that exists nowhere."""
    result = await client.call_tool(tool, args)
    assert result.is_error, (tool, args, result.structured_content)
    text = result.content[0].text
    unknown = await client.call_tool(tool, {**args, id_field: UNKNOWN_ID})
    assert unknown.is_error
    assert text.replace(args[id_field], UNKNOWN_ID) == unknown.content[0].text
    assert any(word in text for word in ("no memory", "no pending memory", "nothing with id")), text
    for secret in ALICE_TEXTS:
        assert secret not in text


async def snapshot(client, memory_ids: list[str]) -> dict:
    out: dict = {}
    for status in ("active", "superseded", "pending", "trashed"):
        out[status] = (await ok(client, "list_memories", {"status": status, "limit": 500}))["items"]
    out["trash"] = await ok(client, "list_trash", {"limit": 500})
    stats = json.loads((await client.read_resource("memory://stats")).contents[0].text)
    out["stats"] = {k: v for k, v in stats.items() if k != "events"}
    out["card"] = (await client.read_resource("memory://user-card")).contents[0].text
    out["memories"] = [
        json.loads((await client.read_resource(f"memory://memories/{mid}")).contents[0].text) for mid in memory_ids
    ]
    return out


async def seed_alice(client) -> dict[str, str]:
    ids = {}
    ids["plain"] = (await ok(client, "add_memory", {
        "content": ALICE_TEXTS[0], "keywords": ["香菜", "coriander"], "operation_id": "op-1"}))["memory_id"]
    ids["core"] = (await ok(client, "add_memory", {
        "content": ALICE_TEXTS[1], "category": "person", "scores": {"persistence": 1}}))["memory_id"]
    ids["old"] = (await ok(client, "add_memory", {"content": "用户住在上海"}))["memory_id"]
    ids["new"] = (await ok(client, "add_memory", {"content": ALICE_TEXTS[3], "supersedes": ids["old"]}))["memory_id"]
    ids["trashed"] = (await ok(client, "add_memory", {"content": "用户在学吉他"}))["memory_id"]
    await ok(client, "forget_memory", {"memory_id": ids["trashed"]})
    ids["pending"] = (await ok(client, "add_memory", {"content": ALICE_TEXTS[2], "confidence": 0.7}))["pending_id"]
    return ids


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_another_users_ids_are_not_found_and_change_nothing(tmp_path, mode, backend):
    async with serve_in_process(backend, tmp_path, "http") as server:  # the tokens exist before the server starts
        alice, bob = await server.create_token("alice"), await server.create_token("bob")
    async with serve_in_process(backend, tmp_path, "http") as server:
        assert "bearer token required" in server.log()
        async with server.connect(alice, mode=mode) as a:
            ids = await seed_alice(a)
            stats = json.loads((await a.read_resource("memory://stats")).contents[0].text)
            assert stats["active"] == 3 and "database" not in stats  # no server paths for network users
            memory_ids = [v for k, v in ids.items() if k != "pending"]
            before = await snapshot(a, memory_ids)

        async with server.connect(bob, mode=mode) as b:
            bob_before = await snapshot(b, [])
            for mid in memory_ids:
                await refused(b, "forget_memory", {"memory_id": mid})
                await refused(b, "restore", {"memory_id": mid})
                await refused(b, "patch_core_memory", {"memory_id": mid, "patch": "被别人改了", "mode": "replace"})
                await refused(b, "add_memory", {"content": "bob 想覆盖", "supersedes": mid}, "supersedes")
                for action in ("complete", "reopen", "promote", "keep", "forget"):
                    await refused(b, "mark_memory", {"memory_id": mid, "action": action})
                for uri in (f"memory://memories/{mid}", f"memory://memories/{UNKNOWN_ID}"):
                    with pytest.raises(Exception, match="no memory") as raised:
                        await b.read_resource(uri)
                    assert all(text not in str(raised.value) for text in ALICE_TEXTS)
            for action in ("confirm", "reject", "snooze"):
                await refused(b, "confirm_pending", {"pending_id": ids["pending"], "action": action}, "pending_id")
            for query in ALICE_TEXTS:
                recalled = await ok(b, "recall_memories", {
                    "query": query, "keywords": ["香菜", "名字", "面试", "杭州"], "include_history": True, "top_k": 50,
                    "used": memory_ids})
                assert recalled["reinforced"] == []
                assert recalled["memories"] == [] and recalled["injection"] == ""
                assert recalled["pending_confirmations"] == []
                prompt = await b.get_prompt("memory_context", {"message": query})
                assert all(text not in json.dumps(prompt.model_dump(), ensure_ascii=False) for text in ALICE_TEXTS)
            for status in ("active", "superseded", "pending", "trashed"):
                assert (await ok(b, "list_memories", {"status": status, "text": "用户"}))["items"] == []
            assert await snapshot(b, []) == bob_before

            # The same content and the same operation_id are Bob's own, not duplicates of Alice's.
            mine = await ok(b, "add_memory", {"content": ALICE_TEXTS[0], "operation_id": "op-1"})
            assert mine["status"] == "stored" and mine["memory_id"] != ids["plain"]
            assert [i["content"] for i in (await ok(b, "list_memories", {}))["items"]] == [ALICE_TEXTS[0]]

        async with server.connect(alice, mode=mode) as a:
            assert await snapshot(a, memory_ids) == before
            # ... and Alice's ids still work for Alice.
            await ok(a, "patch_core_memory", {"memory_id": ids["core"], "patch": "昵称小林"})
            await ok(a, "restore", {"memory_id": ids["trashed"]})
            assert (await ok(a, "confirm_pending", {"pending_id": ids["pending"], "action": "confirm"}))["memory_id"]
