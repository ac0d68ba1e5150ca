"""m003_tokens upgrades an older file in place and loses nothing."""

from __future__ import annotations

import pytest

from pocketmem.app import PocketMem
from pocketmem.service.manage.tokens import TokenService
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.sqlite.driver import connect as sqlite_connect

pytestmark = pytest.mark.anyio


async def test_a_file_from_before_tokens_gains_the_table_and_keeps_its_memories(settings, clock):
    async with PocketMem(settings, clock=clock) as app:
        stored = await app.writing.add("global", AddRequest(content="用户不喜欢香菜"))
    db = sqlite_connect(str(settings.db_path), load_vectors=True)
    db.execute("drop table api_tokens")
    db.execute("delete from schema_migrations where name = 'm003_tokens'")
    db.close()

    async with PocketMem(settings, clock=clock) as app:
        health = await app.store.health()
        assert health["schema_current"] and health["memories"] == 1
        assert (await app.get_memory("global", stored.memory_id))["content"] == "用户不喜欢香菜"
        new = await TokenService(app.store, app.clock).create("alice")
        assert (await TokenService(app.store, app.clock).verify(new.token)).user_id == "alice"
