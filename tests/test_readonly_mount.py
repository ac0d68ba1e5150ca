"""A store on a read-only mount reads: list and search answer, whether it was closed cleanly or left by a SIGKILL
(with or without its -shm file), doctor's report names the read-only mount (every add would fail) and nothing
else that is not wrong, and a write says the store is read-only.

The mount is real: a read-only bind mount inside a user and mount namespace (`unshare -rm`), so root's
permission to write anything is no help, as on a read-only disk."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.sqlite.driver import connect

from .helpers import START, Backend, MakeSettings
from .servers import FACTS, crashed_store, server_env

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

COMMANDS = {"list": ["list", "--json"], "search": ["search", "小白", "--json"], "doctor": ["doctor"],
            "add": ["add", "用户喜欢喝乌龙茶"]}


def on_read_only_mount(backend: Backend, home: Path, out: Path) -> dict[str, tuple[int, str, str]]:
    """Each command run with `home` mounted read-only; (exit code, stdout, stderr) by name."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        pytest.skip("needs user and mount namespaces (unshare -rm) for a read-only mount")
    out.mkdir()
    lines = [f"mount --bind {home} {home}", f"mount -o remount,ro,bind {home}", f"! touch {home}/probe || exit 9"]
    for name, args in COMMANDS.items():
        command = shlex.join([sys.executable, "-m", "pocketmem", *args])
        lines.append(f"{command} > {out}/{name}.out 2> {out}/{name}.err; echo $? > {out}/{name}.code")
    done = subprocess.run(["unshare", "-rm", "sh", "-c", "\n".join(lines)], env=server_env(backend, home),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return {name: (int((out / f"{name}.code").read_text()), (out / f"{name}.out").read_text(),
                   (out / f"{name}.err").read_text()) for name in COMMANDS}


async def closed_store(make_settings: MakeSettings, home: Path) -> Path:
    settings = make_settings(home.parent)
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        for fact in FACTS:
            await app.writing.add("global", AddRequest(content=fact))
    return settings.db_path


@pytest.mark.parametrize("state", ["closed", "closed-without-vector-index", "killed-with-shm", "killed-without-shm"])
async def test_a_store_on_a_read_only_mount_reads(tmp_path, state, backend, make_settings):
    home = tmp_path / "home"
    if state.startswith("closed"):
        db = await closed_store(make_settings, home)
        assert not Path(f"{db}-wal").exists()  # noqa: ASYNC240 - a test check
        if state == "closed-without-vector-index":  # as an early release left it: no index, no embedder recorded
            conn = connect(str(db), load_vectors=True)
            conn.execute("drop table memory_vectors")
            conn.execute("delete from store_meta where key in ('embedder', 'dimensions')")
            conn.close()
    else:
        crashed_store(backend, home)
        if state == "killed-without-shm":
            (home / "memory.db-shm").unlink()
    before = sorted(p.name for p in home.iterdir())
    assert "memory.db.lock" in before  # left by the writes: on the read-only mount it cannot be opened for writing
    found = on_read_only_mount(backend, home, tmp_path / "out")
    code, out, err = found["list"]
    assert code == 0, err
    assert sorted(m["content"] for m in json.loads(out)["items"]) == sorted(FACTS)
    code, out, err = found["search"]
    assert code == 0, err
    assert "用户的猫叫小白" in [m["content"] for m in json.loads(out)["memories"]]
    code, out, err = found["doctor"]
    report = json.loads(out)
    read_only = (f"{home} is on a read-only file system: the store can be read but nothing can be saved; remount it "
                 "read-write, or copy the folder to a writable disk and point POCKETMEM_HOME there")
    if state == "closed-without-vector-index":
        assert code == 1 and report["problems"] == [
            read_only,
            "the store keeps vectors but no record of the embedder that made them (its store_meta was lost, or an "
            "early release never wrote it): run `pocketmem doctor --repair`; it marks the store for re-embedding, "
            "which the next start of `pocketmem serve` does (or `pocketmem reindex`)",
            "the vector index is missing although sqlite-vec loads: run `pocketmem doctor --repair` "
            "(or `pocketmem reindex`) to rebuild it"]
    else:
        assert code == 1 and report["problems"] == [read_only]
    code, out, err = found["add"]
    assert code == 2 and "read-only" in err and "nothing was written" in err and "unexpected" not in err
    assert sorted(p.name for p in home.iterdir()) == before
