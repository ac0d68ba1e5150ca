"""Odd surroundings named in one line, never a crash or a store in the wrong place: a POCKETMEM_HOME whose name is
not UTF-8 under `client-config` (a host's config is JSON), an empty HOME (a store in /.pocketmem), and a trigger
another program put on one of pocketmem's tables (every save failed while the doctor said ok)."""

from __future__ import annotations

import json
import os
import pwd
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import Backend
from .servers import server_env

pytestmark = pytest.mark.slow


def pm(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pocketmem", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_a_home_whose_name_is_not_utf8_is_refused_by_client_config(tmp_path):
    home = os.fsdecode(os.fsencode(str(tmp_path)) + b"/bad\xff-home")
    os.mkdir(home)
    env = server_env(Backend(), Path(home))
    target = tmp_path / "claude.json"
    for args in ([], ["--write", str(target)]):
        done = pm(env, "client-config", *args)
        assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip() == (
            f"pocketmem: POCKETMEM_HOME: is not UTF-8 text ({tmp_path}/bad\\xff-home), which a host's config file "
            "(JSON) cannot hold: rename that folder to a UTF-8 name, or set it to another")
    assert not target.exists()


def test_an_empty_home_variable_counts_as_unset(tmp_path):
    env = {**server_env(Backend(), tmp_path), "HOME": ""}
    del env["POCKETMEM_HOME"]
    done = subprocess.run([sys.executable, "-c", "from pocketmem.base.config import load_settings; "
                           "print(load_settings().home)"], env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == str(Path(pwd.getpwuid(os.getuid()).pw_dir) / ".pocketmem"), done.stderr


def test_a_trigger_pocketmem_did_not_make_is_named_by_the_doctor(tmp_path):
    env = server_env(Backend(), tmp_path)
    assert pm(env, "add", "用户住在杭州").returncode == 0
    with sqlite3.connect(tmp_path / "memory.db") as conn:
        conn.execute("create trigger no_events before insert on memory_events begin select raise(abort, 'no'); end")
    added = pm(env, "add", "用户的猫叫小白")
    assert added.returncode != 0  # what the trigger does
    done = pm(env, "doctor")
    assert done.returncode == 1, done.stdout
    assert json.loads(done.stdout)["problems"] == [
        "trigger no_events on memory_events is not one pocketmem makes: it runs inside every save to memory_events, "
        "and if it fails, so does the save. Unless it was made on purpose, remove it (sqlite3 memory.db 'drop "
        "trigger \"no_events\"'); nothing else is damaged"
    ]
    with sqlite3.connect(tmp_path / "memory.db") as conn:
        conn.execute('drop trigger "no_events"')
    assert pm(env, "add", "用户的猫叫小白").returncode == 0
    assert json.loads(pm(env, "doctor").stdout)["ok"]
