"""The doctor never fails: whatever it meets is a line of its report with the repair it suggests; a keyword index
dropped under a running server does not stop writes."""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.cli import _doctor
from pocketmem.service.writing.add_request import AddRequest

from .helpers import START

pytestmark = [pytest.mark.anyio]


async def test_a_keyword_index_dropped_while_serving_does_not_stop_writes(app, client, settings):
    assert not (await client.call_tool("add_memory", {"content": "用户的猫叫小白"})).is_error
    with sqlite3.connect(settings.db_path) as conn:
        conn.execute("drop table memories_fts")
    added = await client.call_tool("add_memory", {"content": "用户每周三去游泳"})
    assert not added.is_error, added.content[0].text
    for query, fact in (("小白", "用户的猫叫小白"), ("游泳", "用户每周三去游泳")):
        recalled = await client.call_tool("recall_memories", {"query": query})
        assert fact in [m["content"] for m in recalled.structured_content["memories"]]
    report = await app.doctor()
    assert report["ok"], report["problems"]
    assert report["repaired"] == ["table memories_fts was missing: rebuilt from the memories"]
    assert report["store"]["keyword_rows"] == 2


async def doctor(settings, capsys, repair: bool = False) -> tuple[int, dict]:
    code = await _doctor(settings, argparse.Namespace(repair=repair))
    return code, json.loads(capsys.readouterr().out)


async def test_a_file_with_40_flipped_bytes_gets_a_report_never_an_error(tmp_path, capsys, make_settings):
    made = make_settings(tmp_path / "made")
    async with PocketMem(made, clock=FixedClock(START)) as app:
        for i in range(30):
            await app.writing.add("alice", AddRequest(content=f"第{i}条：用户的猫叫小白，喜欢喝乌龙茶 {i * 7}"))
    original = made.db_path.read_bytes()
    broken = 0
    for seed in range(12):
        settings = make_settings(tmp_path / f"seed{seed}")
        settings.home.mkdir(parents=True)
        data = bytearray(original)
        rng = random.Random(seed)
        for _ in range(40):
            data[rng.randrange(len(data))] ^= 0xFF
        settings.db_path.write_bytes(bytes(data))
        for repair in (False, True):
            code, report = await doctor(settings, capsys, repair)
            assert code in (0, 1) and report["ok"] == (code == 0) and isinstance(report["problems"], list)
            for line in report["problems"]:
                assert "unexpected" not in line and ("pocketmem" in line or "restore" in line), line
        broken += code == 1
        shutil.rmtree(settings.home)
    assert broken >= 6  # most of the 12 damaged files are found damaged
