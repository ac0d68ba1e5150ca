"""Damage `doctor --repair` cannot mend (an index's page zeroed: SQLite calls the file malformed, and cannot even drop
the index) is named with a way out that works, never with `--repair` again: export what the store holds and import
it into a new home."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from .helpers import Backend
from .servers import server_env

PAGE = 4096


def pm(home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pocketmem", *args], env=server_env(Backend(), home),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_a_zeroed_index_page_is_sent_to_export_and_import_never_to_repair_again(tmp_path):
    home, fresh = tmp_path / "home", tmp_path / "fresh"
    facts = ["用户住在杭州", "用户的猫叫小白", "I prefer tea over coffee"]
    for fact in facts:
        assert pm(home, "add", fact).returncode == 0
    db = home / "memory.db"
    with sqlite3.connect(db) as conn:
        conn.execute("pragma wal_checkpoint(truncate)")
        (root,) = conn.execute("select rootpage from sqlite_master where name = 'memories_by_importance'").fetchone()
        assert conn.execute("pragma page_size").fetchone()[0] == PAGE
    with db.open("r+b") as file:
        file.seek((root - 1) * PAGE)
        file.write(bytes(PAGE))
    done = pm(home, "doctor", "--repair")
    problems = json.loads(done.stdout)["problems"]
    assert done.returncode == 1 and problems, done.stderr
    for line in problems:
        assert "run `pocketmem doctor --repair`" not in line, line
    assert any("(`pocketmem export -o memories.jsonl`), then set POCKETMEM_HOME to a new folder" in line
               for line in problems), problems
    exported = tmp_path / "memories.jsonl"
    assert pm(home, "export", "-o", str(exported)).returncode == 0
    assert pm(fresh, "import", str(exported)).returncode == 0
    listed = pm(fresh, "list", "--json")
    assert sorted(m["content"] for m in json.loads(listed.stdout)["items"]) == sorted(facts), listed.stdout
    assert json.loads(pm(fresh, "doctor").stdout)["ok"]
