"""Settings and the faults around the store that the command line names in one line: an empty POCKETMEM_HOME,
a home that is a file, a lock file that is a folder, a port out of range, a full disk under an export, a damaged
store under `maintain`, doctor's advice by backend, and the entry `client-config` writes."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .servers import checkout_env, run_cli

pytestmark = pytest.mark.slow


def run(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**checkout_env(), "POCKETMEM_EMBEDDER": "hash", "POCKETMEM_TZ": "Asia/Shanghai", **env}
    return subprocess.run([sys.executable, "-m", "pocketmem", *args], env=full, cwd=cwd, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def one_line(out: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    """The command failed with `code` and one line (no traceback, no "unexpected") holding each of `words`."""
    lines = [line for line in out.stderr.splitlines() if line.startswith("pocketmem")]
    assert out.returncode == code, out.stderr
    assert "Traceback" not in out.stderr and "unexpected" not in out.stderr, out.stderr
    assert len(lines) == 1 and all(w in lines[0] for w in words), out.stderr
    return lines[0]


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_or_blank_home_is_the_default_home(tmp_path, value):
    work, user_home = tmp_path / "work", tmp_path / "user"
    work.mkdir()
    added = run("add", "用户的猫叫小白", "--user", "alice", cwd=work, POCKETMEM_HOME=value, HOME=str(user_home))
    assert added.returncode == 0, added.stderr
    assert (user_home / ".pocketmem" / "memory.db").is_file()
    assert list(work.iterdir()) == []  # neither memory.db in the current folder nor a folder named " "
    listed = run("list", "--user", "alice", cwd=tmp_path, POCKETMEM_HOME=value, HOME=str(user_home))
    assert "小白" in listed.stdout


@pytest.mark.parametrize("args", [("add", "x"), ("list",), ("serve",)])
def test_a_home_that_is_a_file_is_named(tmp_path, args):
    home = tmp_path / "home"
    home.write_text("not a folder")
    out = run(*args, POCKETMEM_HOME=str(home))
    one_line(out, 2, f"{home} is a file, not a folder", "POCKETMEM_HOME")
    assert home.read_text() == "not a folder"


def test_a_lock_file_that_is_a_folder_is_named_and_nothing_is_written(tmp_path):
    (tmp_path / "memory.db.lock").mkdir()
    out = run("add", "用户的猫叫小白", POCKETMEM_HOME=str(tmp_path))
    one_line(out, 2, "memory.db.lock is a folder, not a file", "nothing was written")


@pytest.mark.parametrize("args", [("serve", "--transport", "http", "--port", "99999"), ("ui", "--port", "-1")])
def test_a_port_out_of_range_is_refused_naming_the_option(tmp_path, args):
    out = run(*args, POCKETMEM_HOME=str(tmp_path))
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "argument --port:" in out.stderr and "give 1..65535" in out.stderr


def test_an_export_onto_a_full_disk_says_so_and_keeps_the_old_file(capsys, tmp_path, monkeypatch):
    assert run_cli(capsys, tmp_path, "add", "用户的猫叫小白").returncode == 0
    target = tmp_path / "backup.jsonl"
    target.write_text("the backup before\n")

    def full(fd: int) -> None:  # the disk fills as the temporary file is flushed
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("pocketmem.base.files.os.fsync", full)
    out = run_cli(capsys, tmp_path, "export", "-o", str(target))
    one_line(out, 2, f"the disk holding {target} is full", "the file there is kept as it was")
    assert target.read_text() == "the backup before\n"
    assert sorted(p.name for p in tmp_path.glob(".backup.jsonl*")) == []  # no temporary file left


def test_maintain_on_a_damaged_store_says_what_failed_and_exits_1(capsys, tmp_path):
    for n in range(40):
        assert run_cli(capsys, tmp_path, "add", f"用户喜欢第{n}种水果 fruit number {n}").returncode == 0
    db = tmp_path / "memory.db"
    size = db.stat().st_size
    with db.open("r+b") as f:  # the last pages overwritten
        f.seek(size - 8192)
        f.write(os.urandom(8192))
    out = run("maintain", POCKETMEM_HOME=str(tmp_path))
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert "pocketmem: the memory store looks damaged" in out.stderr


def test_doctor_advice_for_an_unreachable_postgresql_fits_postgresql(tmp_path):
    out = run("doctor", POCKETMEM_HOME=str(tmp_path), POCKETMEM_DATABASE_URL="postgresql://me:pw@127.0.0.1:1/mem")
    problems = json.loads(out.stdout)["problems"]
    assert out.returncode == 1 and len(problems) == 1
    assert "memory.db" not in problems[0] and "PostgreSQL server in POCKETMEM_DATABASE_URL" in problems[0]
    assert "me:pw" not in out.stdout


def test_doctor_advice_to_restore_memory_db_names_the_wal(tmp_path):
    (tmp_path / "memory.db").write_bytes(b"not a database, " * 512)
    report = json.loads(run("doctor", POCKETMEM_HOME=str(tmp_path)).stdout)
    assert "remove memory.db-wal and memory.db-shm" in report["problems"][0]


@pytest.mark.parametrize(
    ("tz", "zone"),
    [
        (":/usr/share/zoneinfo/Asia/Shanghai", "Asia/Shanghai"),
        ("CST-8", "Etc/GMT-8"),  # 8 hours ahead of UTC, as the command line shows it
        ("Asia/Tokyo", "Asia/Tokyo"),
        ("XYZ3ABC,M3.2.0,M11.1.0", None),  # a summer-time rule no zone name stands for: left out, with a note
    ],
)
def test_client_config_writes_an_absolute_home_and_a_zone_the_server_accepts(tmp_path, tz, zone):
    out = run("client-config", cwd=tmp_path, POCKETMEM_HOME="rel/home", POCKETMEM_TZ="", TZ=tz)
    assert out.returncode == 0, out.stderr
    env = json.loads(out.stdout)["mcpServers"]["pocketmem"]["env"]
    assert env["POCKETMEM_HOME"] == str(tmp_path / "rel" / "home")
    assert env.get("POCKETMEM_TZ") == zone
    if zone is None:
        assert f"TZ={tz} names no IANA zone" in out.stderr
        return
    served = run("stats", cwd=tmp_path, **env)  # the server accepts the entry as written
    assert served.returncode == 0, served.stderr
