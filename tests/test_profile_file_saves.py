"""Saves of User.md that are not a person's edit — an emptied file, the title alone, a file cut off inside a
line, id comments stripped by an editor, a byte order mark — lose nothing; deleting lines deletes exactly those
lines; two processes starting together on a new home share the folder (docs/profile.md)."""

from __future__ import annotations

import re

import anyio
import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.models import EventKind
from pocketmem.mcp.server import build_server
from pocketmem.service.profile.profile_files import folder_name

from .helpers import call

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"
FOODS = ["我不吃香菜", "我对花生过敏", "我女儿叫小美", "我住在杭州", "我是后端工程师"]


@pytest.fixture
def files_settings(tmp_path, make_settings):
    return make_settings(tmp_path, profile_files="on")


@pytest.fixture
async def files_app(files_settings, clock):
    async with PocketMem(files_settings, clock=clock) as app:
        yield app


@pytest.fixture
async def files_client(files_app, files_settings):
    async with Client(build_server(files_settings, app=files_app)) as client:
        yield client


async def add_core(client: Client) -> list[str]:
    """The five core memories, added one by one (each write keeps a version of User.md)."""
    return [(await call(client, "add_memory", {"content": text, "scores": {"persistence": 1}}))["memory_id"]
            for text in FOODS]


async def active_and_trash(client: Client) -> tuple[set[str], set[str]]:
    await client.read_resource("memory://user-card")  # the read that takes in the saved file
    active = await call(client, "list_memories", {"limit": 50})
    trash = await call(client, "list_trash", {})
    return {i["content"] for i in active["items"]}, {i["content"] for i in trash["items"]}


async def rejected(app: PocketMem) -> list:
    async with app.store.read() as reader:
        return await reader.list_events(USER, 50, kinds=[EventKind.profile_file_rejected])


SAVES = {  # what a broken save leaves of the file pocketmem wrote
    "empty": lambda text: "",
    "title only": lambda text: "# User\n",
    "cut inside a line": lambda text: text[: len(text) * 2 // 3],
    "id comments stripped": lambda text: re.sub(r" <!-- [0-9a-f]{32} -->", "", text),
}


@pytest.mark.parametrize("case", SAVES)
async def test_an_emptied_cut_or_stripped_user_md_loses_nothing(case, files_client, files_app, files_settings):
    ids = await add_core(files_client)
    path = files_settings.home / folder_name(USER) / "User.md"
    path.write_text(SAVES[case](path.read_text(encoding="utf-8")), encoding="utf-8")
    active, trash = await active_and_trash(files_client)
    assert (active, trash) == (set(FOODS), set())
    assert all(i in path.read_text(encoding="utf-8") for i in ids)  # written again, whole
    # Only the cut file is reported (kept beside it): the others read as "nothing to change".
    events = await rejected(files_app)
    if case == "cut inside a line":
        assert len(events) == 1 and "cut short" in events[0].payload["problems"][0]
        assert [p.name for p in path.parent.glob("User.rejected-*.md")] == [events[0].payload["kept"]]
    else:
        assert events == [] and not list(path.parent.glob("*.rejected-*"))


async def test_deleted_lines_are_exactly_the_lines_gone(files_client, files_settings):
    ids = await add_core(files_client)
    path = files_settings.home / folder_name(USER) / "User.md"
    # Keep the first and third lines: the other three go, not just the ones an older version lacked.
    text = path.read_text(encoding="utf-8")
    for i in (1, 3, 4):
        text = text.replace(f"- {FOODS[i]} <!-- {ids[i]} -->\n", "")
    path.write_text(text, encoding="utf-8")
    active, trash = await active_and_trash(files_client)
    assert (active, trash) == ({FOODS[0], FOODS[2]}, {FOODS[1], FOODS[3], FOODS[4]})
    # Every line of the list deleted, its heading kept: the person emptied the list.
    text = path.read_text(encoding="utf-8")
    path.write_text(re.sub(r"- .* <!-- [0-9a-f]{32} -->\n", "", text), encoding="utf-8")
    active, trash = await active_and_trash(files_client)
    assert (active, trash) == (set(), set(FOODS))


async def test_a_byte_order_mark_is_not_text_outside_a_section(files_client, files_app, files_settings):
    await add_core(files_client)
    path = files_settings.home / folder_name(USER) / "User.md"
    text = path.read_text(encoding="utf-8").replace("- 称呼 (name):", "- 称呼 (name): 小王")
    path.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())  # Windows Notepad
    assert "称呼：小王" in (await files_client.read_resource("memory://user-card")).contents[0].text
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    await files_client.read_resource("memory://user-card")
    assert await rejected(files_app) == [] and not list(path.parent.glob("*.rejected-*"))


async def test_two_processes_starting_on_a_new_home_share_its_folder(files_settings, clock):
    first, second = PocketMem(files_settings, clock=clock), PocketMem(files_settings, clock=clock)
    await first.open()
    await second.open()
    try:
        async with anyio.create_task_group() as tg:  # both find no id yet, both claim one
            tg.start_soon(first.profile_files.sync, USER)
            tg.start_soon(second.profile_files.sync, USER)
    finally:
        await first.close()
        await second.close()
    async with PocketMem(files_settings, clock=clock) as app, Client(build_server(files_settings, app=app)) as c:
        await call(c, "add_memory", {"content": "我不吃香菜", "scores": {"persistence": 1}})
        folder = files_settings.home / folder_name(USER)
        assert "我不吃香菜" in (folder / "User.md").read_text(encoding="utf-8")
        marker = (folder / ".pocketmem-store").read_text(encoding="utf-8").strip()
        assert marker == await app.store.get_meta("profile_files_store_id")
        assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == [".pocketmem-store"]


async def test_a_save_landing_while_the_file_is_rewritten_is_taken_in(files_client, files_app, files_settings):
    # The person saves User.md (the copy they opened, a line added) after pocketmem took the files in and before
    # it replaces User.md with the agent's new memory: the save is taken in, not overwritten.
    await add_core(files_client)
    path = files_settings.home / folder_name(USER) / "User.md"
    files = files_app.profile_files
    render, saves = files.render_file, [path.read_text(encoding="utf-8") + "- 我喜欢爬山\n"]

    async def render_then_save(user_id: str, name: str) -> str:
        text = await render(user_id, name)
        if name == "User.md" and saves:
            path.write_text(saves.pop(), encoding="utf-8")
        return text

    files.render_file = render_then_save  # type: ignore[method-assign]
    await call(files_client, "add_memory", {"content": "我养了一只猫", "scores": {"persistence": 1}})
    files.render_file = render  # type: ignore[method-assign]
    active, trash = await active_and_trash(files_client)
    assert (active, trash) == ({*FOODS, "我养了一只猫", "我喜欢爬山"}, set())
    text = path.read_text(encoding="utf-8")
    assert "我养了一只猫" in text and "我喜欢爬山" in text
    assert await rejected(files_app) == []


async def test_processes_taking_in_one_save_apply_it_once(files_settings, clock):
    # Two processes of one store (two instances here) read at the same moment after a person changed a line,
    # deleted a line and added one: each change is made once, and neither reports the other's work as a bad edit.
    first, second = PocketMem(files_settings, clock=clock), PocketMem(files_settings, clock=clock)
    await first.open()
    await second.open()
    try:
        async with Client(build_server(files_settings, app=first)) as client:
            ids = await add_core(client)
        path = files_settings.home / folder_name(USER) / "User.md"
        text = path.read_text(encoding="utf-8").replace(FOODS[0], "我不吃香菜和葱")
        text = text.replace(f"- {FOODS[1]} <!-- {ids[1]} -->\n", "") + "- 我喜欢爬山\n"
        path.write_text(text, encoding="utf-8")
        async with anyio.create_task_group() as tg:
            tg.start_soon(first.profile_files.check, USER)
            tg.start_soon(second.profile_files.check, USER)
        async with Client(build_server(files_settings, app=second)) as client:
            active, trash = await active_and_trash(client)
        assert sorted(active) == sorted(["我不吃香菜和葱", *FOODS[2:], "我喜欢爬山"]) and trash == {FOODS[1]}
        assert await rejected(first) == [] and not list(path.parent.glob("*.rejected-*"))
    finally:
        await first.close()
        await second.close()
