"""A forget's tombstone keeps the forgotten content's hash wherever it goes: sync carries it to the library and to
the other devices (a hash an older release's tombstone lacked is filled in when the tombstone comes again), and an
export file holds it, so that what the user forgot stays forgotten after the purge there too; a file written
before the hash imports as before. Real SQLite notebooks, a real PostgreSQL library (tests/pg.py)."""

from __future__ import annotations

import io
import json

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.models import Category
from pocketmem.core.text import content_hash
from pocketmem.service.writing.add_request import AddRequest

from .helpers import START, USER, add, device, synced

pytestmark = pytest.mark.anyio

PHONE = "阿杰的手机号是13812345678。"


async def forgotten_and_purged(app, clock: FixedClock) -> str:
    memory_id = await add(app, PHONE, category=Category.person)
    await app.trash.forget(USER, memory_id, "用户说别记阿杰的电话了")
    clock.advance(days=8)
    assert (await app.maintenance.run()).users[0].purged == [memory_id]
    return memory_id


async def added_again(app) -> str:
    """An explicit add of the forgotten content: stored, with the note that the user asked to forget it."""
    result = await app.writing.add(USER, AddRequest(content=PHONE, category=Category.person))
    assert result.status == "stored", result
    return result.message


async def test_sync_carries_the_forget_to_a_new_device(tmp_path, library_url, make_settings):
    clock = FixedClock(START)
    async with device(make_settings, tmp_path, "a", library_url, clock) as a:
        memory_id = await add(a, PHONE, category=Category.person)
        await synced(a)
        await a.trash.forget(USER, memory_id, None)
        await synced(a)
        async with a.library.write() as tx:  # as a release before the hash uploaded it
            await tx.execute("update memory_tombstones set content_hash = null")
        clock.advance(days=8)
        assert (await a.maintenance.run()).users[0].purged == [memory_id]
        await synced(a)  # the purge travels, and with it the hash
        async with a.library.read() as reader:
            [tombstone] = await reader.tombstones_for(USER, [memory_id])
        assert tombstone.content_hash == content_hash(PHONE) and tombstone.purged_at is not None
    async with device(make_settings, tmp_path, "c", library_url, clock) as c:
        await synced(c)
        note = await added_again(c)
    assert f"forgotten at the user's request on 2026-11-26 (memory {memory_id}, no longer in the trash" in note


@pytest.mark.backends
async def test_an_export_file_keeps_the_forget(tmp_path, make_settings):
    clock = FixedClock(START)
    async with PocketMem(make_settings(tmp_path / "a"), clock=clock) as a:
        memory_id = await forgotten_and_purged(a, clock)
        exported = io.StringIO()
        await a.exporter.export(exported, users=[USER])
    lines = exported.getvalue().splitlines()
    [row] = [json.loads(line) for line in lines if json.loads(line)["type"] == "tombstone"]
    assert row["content_hash"] == content_hash(PHONE) and "13812345678" not in json.dumps(row)
    async with PocketMem(make_settings(tmp_path / "b"), clock=clock) as b:
        assert (await b.exporter.import_lines(lines)).imported.tombstone == 1
        assert memory_id in await added_again(b)


@pytest.mark.backends
async def test_a_file_from_before_the_hash_imports_as_before(tmp_path, make_settings):
    clock = FixedClock(START)
    async with PocketMem(make_settings(tmp_path / "a"), clock=clock) as a:
        await forgotten_and_purged(a, clock)
        exported = io.StringIO()
        await a.exporter.export(exported, users=[USER])
    old = [json.loads(line) for line in exported.getvalue().splitlines()]
    for row in old:
        row.pop("content_hash", None)
    async with PocketMem(make_settings(tmp_path / "b"), clock=clock) as b:
        assert (await b.exporter.import_lines(json.dumps(r) for r in old)).imported.tombstone == 1
        assert "forget" not in await added_again(b)  # nothing is left to say what was forgotten
