"""Something other than a regular file in place of a profile file (a symbolic link, a pipe, a directory) is never
read through: a link or pipe is replaced by the file, a directory is refused once, with one event each."""

from __future__ import annotations

import os

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.models import EventKind
from pocketmem.service.profile.profile_files import folder_name
from pocketmem.service.writing.add_request import AddRequest

from .helpers import START

pytestmark = [pytest.mark.anyio]
USER = "global"


async def starts(settings, times: int) -> list:
    """Open the server `times` times, reading the user card (which takes in edited files) each time."""
    for _ in range(times):
        async with PocketMem(settings, clock=FixedClock(START)) as app:
            await app.user_card(USER)
            await app.profile_files.sync_all()
    async with PocketMem(settings, clock=FixedClock(START)) as app, app.store.read() as reader:
        events = await reader.list_events(USER, 1000)
    return [e for e in events if e.kind == EventKind.profile_file_rejected]


async def test_a_link_a_pipe_and_a_directory_in_place_of_profile_files(tmp_path, make_settings):
    settings = make_settings(tmp_path, profile_files="on")
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        await app.writing.add(USER, AddRequest(content="用户住在杭州", scores={"persistence": 1.0}))
    folder = settings.home / folder_name(USER)
    outside = tmp_path / "elsewhere.md"
    outside.write_text("# not pocketmem's\n- 用户的银行卡号在这里\n", encoding="utf-8")
    (folder / "Persona.md").unlink()
    (folder / "Persona.md").symlink_to(outside)
    (folder / "User.md").unlink()
    os.mkfifo(folder / "User.md")  # reading it would block forever
    (folder / "Insights.md").unlink()
    (folder / "Insights.md").mkdir()

    rejected = await starts(settings, 4)
    assert (folder / "Persona.md").is_file() and not (folder / "Persona.md").is_symlink()
    assert (folder / "User.md").is_file() and "用户住在杭州" in (folder / "User.md").read_text(encoding="utf-8")
    assert (folder / "Insights.md").is_dir()
    assert outside.read_text(encoding="utf-8") == "# not pocketmem's\n- 用户的银行卡号在这里\n"
    assert not list(folder.glob("*.rejected-*"))
    assert sorted(e.payload["file"] for e in rejected) == ["Insights.md", "Persona.md", "User.md"]
    assert all("银行卡" not in str(e.payload) for e in rejected)
