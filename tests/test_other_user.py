"""Files another user owns: pocketmem run by a user who does not own a path is told to `chown` it (a `chmod` by
anyone but the owner fails with "Operation not permitted"), and a profile folder it may not read leaves recall,
the context prompt, the resources and every add working, named in `degraded` and by the doctor.

These run pocketmem as a real second user (`pmtest`, made with useradd), so they need root; CI runs as root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from .helpers import Backend
from .servers import SERVER_SOURCE, server_env

pytestmark = [pytest.mark.anyio]

USER = "pmtest"
FACT = "用户住在杭州，每天骑车上班"


@pytest.fixture
def home() -> Iterator[Path]:
    """A POCKETMEM_HOME owned by USER, in a folder USER can reach (pytest's own tmp folder is root's, mode 700)."""
    if os.geteuid() != 0:
        pytest.skip("runs pocketmem as another user: needs root to make that user and give it a folder")
    if subprocess.run(["id", USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-m", USER], check=True, capture_output=True)
    top = Path(tempfile.mkdtemp(prefix="pocketmem-other-user-"))
    top.chmod(0o755)
    try:
        yield top / "home"
    finally:
        shutil.rmtree(top, ignore_errors=True)


def env(home: Path) -> dict[str, str]:
    """The environment of pocketmem over `home`, the code under test first (started in `/`, which USER may read)."""
    return {"PYTHONPATH": SERVER_SOURCE, **server_env(Backend(), home)}


def as_root(home: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "pocketmem", *args], env=env(home), check=True, capture_output=True,
                   timeout=120, stdin=subprocess.DEVNULL)


def as_user(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", USER, "--", sys.executable, "-m", "pocketmem", *args], env=env(home),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd="/")


def a_store_of(home: Path) -> None:
    """A store with one memory and its profile folder, all USER's."""
    as_root(home, "add", FACT)
    subprocess.run(["chown", "-R", USER, str(home)], check=True)


def doctor(home: Path) -> tuple[int, list[str]]:
    done = as_user(home, "doctor")
    return done.returncode, json.loads(done.stdout)["problems"]


def test_a_memory_db_another_user_owns_is_advised_chown_and_that_advice_works(home):
    a_store_of(home)
    db = home / "memory.db"
    os.chown(db, 0, 0)
    db.chmod(0o644)
    code, problems = doctor(home)
    assert code == 1 and len(problems) == 1, problems
    assert problems[0] == (
        f"this user may not write {db}: it belongs to root, so only root may change that: make it this user's "
        f"(sudo chown {USER} {db}) or run pocketmem as root"
    )
    assert "chmod" not in problems[0]  # USER may not chmod root's file
    subprocess.run(["chown", USER, str(db)], check=True)  # the advice, as root
    assert doctor(home) == (0, [])


async def test_a_profile_folder_this_user_may_not_read_leaves_recall_answering_and_the_doctor_names_it(home):
    a_store_of(home)
    folder = home / "global"
    os.chown(folder, 0, 0)
    folder.chmod(0o700)
    server = StdioServerParameters(command="runuser", args=["-u", USER, "--", sys.executable, "-m", "pocketmem",
                                                            "serve"], env=env(home), cwd="/")
    with (home.parent / "stderr.txt").open("w+") as errlog:
        async with Client(stdio_client(server, errlog=errlog), mode="legacy") as client:
            for _ in range(2):
                recalled = await client.call_tool("recall_memories", {"query": "我住在哪里", "keywords": ["杭州"]})
                assert not recalled.is_error, recalled.content[0].text
                answer = recalled.structured_content
                assert [m["content"] for m in answer["memories"]] == [FACT]
                assert answer["degraded"].startswith(f"profile files: the profile folder {folder} is not readable")
                assert f"sudo chown -R {USER} {folder}" in answer["degraded"]
            added = await client.call_tool("add_memory", {"content": "用户养了一只猫叫小白"})
            assert added.structured_content["status"] == "stored", added.content[0].text
            context = await client.get_prompt("memory_context", {"message": "我住在哪里"})
            assert "杭州" in context.messages[0].content.text
            for uri in ("memory://user-card", "memory://persona"):
                assert (await client.read_resource(uri)).contents[0].text.startswith("# ")
        errlog.seek(0)
        log = errlog.read()
    assert "commit listener failed" not in log and "/pocketmem/" not in log, log  # no traceback of ours
    assert log.count(f"the profile folder {folder} is not readable") == 1, log  # logged once
    code, problems = doctor(home)
    assert code == 1 and len(problems) == 1 and problems[0].startswith(f"the profile folder {folder} is not"), problems
    assert problems[0].endswith(f"(sudo chown -R {USER} {folder}) or run pocketmem as root")
    await anyio.run_process(["chown", "-R", USER, str(folder)])  # the advice, as root
    assert doctor(home) == (0, [])
