"""Imports write memories in batches (one transaction each): every memory lands with its keyword row, its vector
and its place in the sync order, exactly as one add at a time would leave it."""

from __future__ import annotations

import io

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.transfer import exporting
from pocketmem.service.writing.add_request import AddRequest

from .helpers import MakeSettings

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"
FOODS = ["香菜", "火锅", "拉面", "寿司", "芒果", "咖啡", "绿茶"]


async def source_export(make_settings: MakeSettings, tmp_path, clock: FixedClock) -> str:
    async with PocketMem(make_settings(tmp_path / "src", max_active=100), clock=clock) as app:
        for i, food in enumerate(FOODS):
            await app.writing.add(USER, AddRequest(content=f"用户第{i}次吃{food}", keywords=[food]))
        await app.writing.add("other", AddRequest(content="另一个用户养了一只猫", keywords=["猫"]))
        buffer = io.StringIO()
        await app.exporter.export(buffer)
        return buffer.getvalue()


async def test_batched_import_keeps_every_index_and_the_sync_order(tmp_path, clock, monkeypatch, make_settings):
    monkeypatch.setattr(exporting, "IMPORT_BATCH", 3)  # 8 memories: three transactions
    text = await source_export(make_settings, tmp_path, clock)
    async with PocketMem(make_settings(tmp_path / "dst", max_active=100), clock=clock) as app:
        async with app.store.read() as reader:
            before = await reader.change_marker()
        report = await app.exporter.import_lines(text.splitlines())
        assert report.imported.memory == len(FOODS) + 1
        health = await app.store.health()
        assert health["keyword_orphans"] == 0 and health["count_mismatches"] == 0
        assert health.get("vector_mismatches") in (0, None)
        assert health["memories"] == health["keyword_rows"] == len(FOODS) + 1
        # Every imported memory is found by keyword and by its vector.
        for food in FOODS:
            result = await app.retrieval.recall(USER, RecallRequest(query=f"{food}", keywords=[food], record=False))
            assert any(food in m.content for m in result.memories), food
        # Each memory took its own place in the sync order, after what was there before, as single adds do.
        async with app.store.read() as reader:
            changed = await reader.changed_memories(USER, before, None, 100)
            after = await reader.change_marker()
        assert len(changed) == len(FOODS)
        keys = [key for key, _ in changed]
        assert len(set(keys)) == len(keys)
        assert int(after) > int(before)
        # A second import adds nothing and leaves the order alone.
        again = await app.exporter.import_lines(text.splitlines())
        assert again.imported.memory == 0 and again.skipped.memory == len(FOODS) + 1
        async with app.store.read() as reader:
            assert await reader.change_marker() == after
        # New writes after an import keep counting up from where the import left the order.
        await app.writing.add(USER, AddRequest(content="用户开始学游泳", keywords=["游泳"]))
        async with app.store.read() as reader:
            latest = await reader.changed_memories(USER, after, None, 100)
        assert [m.content for _, m in latest] == ["用户开始学游泳"]


async def test_a_file_repeating_an_id_inserts_it_once(tmp_path, clock, monkeypatch, make_settings):
    monkeypatch.setattr(exporting, "IMPORT_BATCH", 4)
    lines = (await source_export(make_settings, tmp_path, clock)).splitlines()
    memory_lines = [line for line in lines if line.startswith('{"type": "memory"')]
    async with PocketMem(make_settings(tmp_path / "dst", max_active=100), clock=clock) as app:
        report = await app.exporter.import_lines([*lines, memory_lines[0]])
        assert report.imported.memory == len(FOODS) + 1
        assert report.skipped.memory == 1
        assert (await app.store.health())["memories"] == len(FOODS) + 1
