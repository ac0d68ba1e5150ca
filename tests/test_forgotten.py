"""What the user asked to forget stays forgotten: a later conversation's extraction never brings it back (it is
discarded, reason forgotten, and says so), while an explicit add_memory stores it with a note that the user asked
to forget it; after the purge too, by the content hash the forget's tombstone keeps. Through the real MCP client,
with the client's model scripted, on both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.config import Settings
from pocketmem.core.text import content_hash
from pocketmem.mcp.server import build_server
from pocketmem.service.upkeep.maintenance import MaintenanceReport

from .helpers import USER
from .scripted_llm import ScriptedSampler, ops
from .servers import cli

pytestmark = [pytest.mark.anyio, pytest.mark.backends]

PHONE = "阿杰的手机号是13812345678。"
CHAT = [
    {"role": "user", "content": "今天跟阿杰吃了饭，他的手机号是13812345678。"},
    {"role": "assistant", "content": "好的，吃得开心！"},
]


@pytest.fixture
async def mcp(app: PocketMem, settings: Settings) -> AsyncIterator[tuple[Client, ScriptedSampler]]:
    sampler = ScriptedSampler([])
    async with Client(build_server(settings, app=app), sampling_callback=sampler) as client:
        yield client, sampler


async def call(client: Client, tool: str, **args) -> dict:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def forgotten_phone(client: Client) -> str:
    memory_id = (await call(client, "add_memory", content=PHONE, category="person"))["memory_id"]
    forgot = await call(client, "forget_memory", memory_id=memory_id, reason="用户说别记阿杰的电话了")
    assert forgot["item"]["reason"] == "user_delete"
    return memory_id


async def active(client: Client) -> list[str]:
    return [i["content"] for i in (await call(client, "list_memories", status="active"))["items"]]


@pytest.mark.parametrize("content", [PHONE, "阿杰的手机号是 13812345678"], ids=["same", "same-fact"])
async def test_an_extraction_does_not_bring_back_a_forgotten_fact(mcp, clock, content):
    client, sampler = mcp
    forgotten_id = await forgotten_phone(client)
    clock.advance(days=1)
    sampler.script.append(ops({"op": "ADD", "content": content, "category": "person", "confidence": 0.95}))

    result = await call(client, "remember_conversation", messages=CHAT)

    [item] = result["items"]
    assert item["status"] == "discarded" and item["memory_id"] is None
    assert "asked to forget this on 2026-11-26" in item["message"] and forgotten_id in item["message"]
    assert result["message"] == "1 discarded."
    assert PHONE not in await active(client) and content not in await active(client)


async def test_an_uncertain_extraction_does_not_ask_about_it_again(mcp):
    client, sampler = mcp
    await forgotten_phone(client)
    sampler.script.append(ops({"op": "ADD", "content": PHONE, "category": "person", "confidence": 0.7}))

    [item] = (await call(client, "remember_conversation", messages=CHAT))["items"]

    assert item["status"] == "discarded" and item["pending_id"] is None
    assert (await call(client, "list_memories", status="pending"))["total"] == 0


async def test_an_explicit_add_stores_it_and_says_the_user_forgot_it(mcp, clock):
    client, _ = mcp
    forgotten_id = await forgotten_phone(client)
    clock.advance(days=2)

    result = await call(client, "add_memory", content=PHONE, category="person")

    assert result["status"] == "stored" and result["memory_id"] != forgotten_id
    # said to whoever reads it, the model or the person at the CLI: no tool name, no "the user" to ask
    assert f"forgotten at the user's request on 2026-11-26 (memory {forgotten_id}" in result["message"]
    assert "forget the new one too" in result["message"] and "forget_memory" not in result["message"]
    assert PHONE in await active(client)


async def test_a_restored_memory_is_no_longer_forgotten(mcp):
    client, sampler = mcp
    memory_id = await forgotten_phone(client)
    await call(client, "restore", memory_id=memory_id)
    sampler.script.append(ops({"op": "ADD", "content": PHONE, "category": "person", "confidence": 0.95}))

    [item] = (await call(client, "remember_conversation", messages=CHAT))["items"]

    assert (item["status"], item["memory_id"]) == ("duplicate", memory_id)


async def test_what_the_cap_evicted_comes_back(make_settings, tmp_path, clock):
    """Only the user's forgetting holds: a memory moved to the trash to make room is no reason to refuse."""
    settings = make_settings(tmp_path, max_active=1)
    async with PocketMem(settings, clock=clock) as app:
        sampler = ScriptedSampler([ops({"op": "ADD", "content": PHONE, "category": "person", "confidence": 0.95})])
        async with Client(build_server(settings, app=app), sampling_callback=sampler) as client:
            await call(client, "add_memory", content=PHONE, category="person")
            clock.advance(days=1)
            added = await call(client, "add_memory", content="阿杰喜欢打羽毛球。", category="person",
                               scores={"info": 1, "judge": 1})
            assert [e["content"] for e in added["evicted"]] == [PHONE]

            [item] = (await call(client, "remember_conversation", messages=CHAT))["items"]

    assert item["status"] == "stored" and "forget" not in item["message"]


async def purged(client: Client, app: PocketMem, settings: Settings, clock, backend, memory_id: str, how: str) -> None:
    """Purge the trash 8 days on (POCKETMEM_TRASH_DAYS is 7): by the test clock, or by `pocketmem maintain`."""
    clock.advance(days=8)
    if how == "clock":
        report = await app.maintenance.run()
    else:
        out = cli(backend, settings.home, "maintain", "--now", clock.now().isoformat(), "--yes")
        assert out.returncode == 0, out.stderr
        report = MaintenanceReport.model_validate_json(out.stdout)
    assert report.users[0].purged == [memory_id]
    assert (await call(client, "list_trash"))["total"] == 0


@pytest.mark.parametrize("how", ["clock", "cli"])
async def test_a_forgotten_fact_stays_forgotten_after_the_purge(mcp, app, settings, clock, backend, how):
    client, sampler = mcp
    forgotten_id = await forgotten_phone(client)
    await purged(client, app, settings, clock, backend, forgotten_id, how)
    sampler.script.append(ops({"op": "ADD", "content": PHONE, "category": "person", "confidence": 0.95}))

    [item] = (await call(client, "remember_conversation", messages=CHAT))["items"]

    assert item["status"] == "discarded" and item["memory_id"] is None
    assert f"asked to forget this on 2026-11-26 (memory {forgotten_id}, no longer in the trash" in item["message"]
    assert PHONE not in await active(client)
    added = await call(client, "add_memory", content=PHONE, category="person")
    assert added["status"] == "stored" and f"forgotten at the user's request on 2026-11-26 (memory {forgotten_id}" in (
        added["message"]
    )


async def test_the_tombstone_keeps_the_hash_not_the_text(mcp, app, settings, clock, backend):
    client, _ = mcp
    forgotten_id = await forgotten_phone(client)
    await purged(client, app, settings, clock, backend, forgotten_id, "clock")
    async with app.store.read() as reader:
        [tombstone] = await reader.tombstones_for(USER, [forgotten_id])
    assert tombstone.content_hash == content_hash(PHONE) and tombstone.purged_at is not None
    assert "13812345678" not in tombstone.model_dump_json()


async def test_a_rewording_of_a_purged_memory_is_not_recognised(mcp, app, settings, clock, backend):
    """The same fact in other words needs the forgotten text, which the purge removed: only the same content holds."""
    client, sampler = mcp
    forgotten_id = await forgotten_phone(client)
    await purged(client, app, settings, clock, backend, forgotten_id, "clock")
    sampler.script.append(ops({"op": "ADD", "content": "阿杰手机号13812345678", "category": "person",
                               "confidence": 0.95}))

    [item] = (await call(client, "remember_conversation", messages=CHAT))["items"]

    assert item["status"] == "stored" and "forget" not in item["message"]


async def test_a_store_without_the_column_keeps_the_forget_through_the_purge(make_settings, tmp_path, clock, backend):
    """A store a release before the column wrote: the migration gives the forget in the trash its memory's hash."""
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as app:
        async with Client(build_server(settings, app=app)) as client:
            forgotten_id = await forgotten_phone(client)
        async with app.store.write() as tx:
            await tx.execute("drop index tombstones_by_content")
            await tx.execute("alter table memory_tombstones drop column content_hash")
            migration = "pg010_forgotten_hash" if backend.name == "postgres" else "m015_forgotten_hash"
            await tx.execute(f"delete from schema_migrations where name = '{migration}'")
    async with PocketMem(settings, clock=clock) as app:  # migrated here
        async with app.store.read() as reader:
            [tombstone] = await reader.tombstones_for(USER, [forgotten_id])
        assert tombstone.content_hash == content_hash(PHONE)  # from the memory in the trash, before any purge
        sampler = ScriptedSampler([ops({"op": "ADD", "content": PHONE, "category": "person", "confidence": 0.95})])
        async with Client(build_server(settings, app=app), sampling_callback=sampler) as client:
            await purged(client, app, settings, clock, backend, forgotten_id, "clock")
            [item] = (await call(client, "remember_conversation", messages=CHAT))["items"]
    assert item["status"] == "discarded" and forgotten_id in item["message"]
