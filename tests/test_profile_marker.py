"""A profile folder's `.pocketmem-store` that holds no store id (bytes that are not UTF-8, nothing, a link loop, text
that is no id) is read by one function for the profile files and the doctor: recall and every write still work,
recall's `degraded` names the file, the doctor names it with what to do, and `pocketmem add` prints no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.shared.folder_owner import OWNER_FILE
from pocketmem.service.writing.add_request import AddRequest

from .helpers import START, Backend, a_store, doctor
from .servers import server_env

pytestmark = [pytest.mark.anyio]


def spoil(marker: Path, case: str) -> None:
    marker.unlink()
    if case == "a link loop":
        marker.symlink_to(OWNER_FILE)
    else:
        marker.write_bytes({"not UTF-8": b"garbage\x00\xff", "empty": b"", "no id": b"hello"}[case])


@pytest.mark.parametrize(("case", "said"), [
    ("not UTF-8", "is not UTF-8 text (it starts b'garbage\\x00\\xff')"),
    ("empty", "is empty"),
    ("a link loop", "is a symbolic link that leads back to itself (a loop)"),
    ("no id", "holds 'hello'"),
])
async def test_a_marker_without_a_store_id_is_named_and_recall_and_writes_work(settings, capsys, case, said):
    await a_store(settings)
    marker = settings.home / "global" / OWNER_FILE
    assert marker.is_file()
    spoil(marker, case)
    code, report = await doctor(settings, capsys)
    line = (f"{marker} {said}, not the id of the pocketmem store that keeps this folder, so its Markdown files are "
            "neither updated nor read back (recall still answers from the store): move it away (this store then "
            "writes its own id there)")
    assert code == 1 and report["problems"] == [line], report["problems"]
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        stored = await app.writing.add("global", AddRequest(content="用户喜欢喝乌龙茶"))
        answer = await app.retrieval.answer("global", RecallRequest(query="用户住在哪里"))
    assert stored.status == "stored"
    assert answer.degraded == f"profile files: {line}" and answer.memories
    marker.unlink()  # moved away, the store writes its own id again
    code, report = await doctor(settings, capsys)
    assert code == 0, report["problems"]


@pytest.mark.slow
def test_the_command_line_adds_and_searches_without_a_traceback(tmp_path):
    home = tmp_path / "home"
    env = server_env(Backend(), home)
    run = [sys.executable, "-m", "pocketmem"]
    assert subprocess.run([*run, "add", "用户住在杭州"], env=env, capture_output=True, text=True).returncode == 0
    spoil(home / "global" / OWNER_FILE, "not UTF-8")
    for args in (["add", "用户的猫叫小白"], ["search", "杭州"]):
        done = subprocess.run([*run, *args], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    listed = subprocess.run([*run, "list", "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert "用户的猫叫小白" in listed.stdout, listed.stderr
