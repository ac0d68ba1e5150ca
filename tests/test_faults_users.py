"""One user's bad row never stops another user's step: maintenance's steps and the profile files alike."""

from __future__ import annotations

import json
import sqlite3

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.service.shared.folder_owner import folder_name
from pocketmem.service.writing.add_request import AddRequest

from .helpers import START
from .servers import cli

pytestmark = [pytest.mark.anyio]


@pytest.mark.slow
async def test_a_garbage_time_in_one_users_core_memory_does_not_stop_anothers_profile_files(
    tmp_path, backend, make_settings
):
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        bad = await app.writing.add("alice", AddRequest(content="alice 住在杭州", scores={"persistence": 1.0}))
        await app.writing.add("zoe", AddRequest(content="zoe 不吃香菜", scores={"persistence": 1.0}))
    with sqlite3.connect(settings.db_path) as db:
        db.execute("update memories set created_at = 'garbage' where id = ?", (bad.memory_id,))
    user_md = settings.home / folder_name("zoe") / "User.md"
    text = user_md.read_text(encoding="utf-8")
    user_md.write_text(text.rstrip("\n") + "\n- zoe 对花生过敏\n", encoding="utf-8")  # a line added at the end

    done = cli(backend, settings.home, "maintain")
    # Exit 1 says a row was left out (named on stderr); everything else was done, zoe's file included.
    assert done.returncode == 1, done.stderr
    assert "left out memories row" in done.stderr and bad.memory_id in done.stderr
    report = json.loads(done.stdout)
    files = {f["user_id"]: f for f in report["profile_files"]}
    assert files["zoe"]["taken_in"] and not files["zoe"]["problems"]
    # alice's unreadable memory is left out of her files (a warning names it), which are written without it.
    assert "alice" not in files and f"left out: memories row {bad.memory_id}" in done.stderr
    assert "alice 住在杭州" not in (settings.home / folder_name("alice") / "User.md").read_text(encoding="utf-8")
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        listed = await app.listing.list_memories("zoe", category=None, status="active", text=None, limit=10,
                                                   offset=0)
        assert "zoe 对花生过敏" in [m.content for m in listed.items]
