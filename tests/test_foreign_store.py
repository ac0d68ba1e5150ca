"""Another program's SQLite database is never taken for the store: not a `-wal` of another database left beside
memory.db (copied or restored there), which opening would copy into memory.db and so wipe the store, nor a database
file of another program named by POCKETMEM_DB or `db` in config.toml, which the migrations would fill with pocketmem's
tables. Each is refused by every opening with a line naming the file and what to change, never a backup, and the
files are left byte for byte as they were."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.config import load_settings
from pocketmem.base.models import Status
from pocketmem.store.sqlite.driver import NotAStore

from .helpers import START, STORE_FACTS, Backend, a_store, doctor
from .servers import cli

pytestmark = [pytest.mark.anyio]

FACTS = STORE_FACTS

FOREIGN_WAL = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("pragma journal_mode = wal")
conn.execute("create table t (x)")
conn.executemany("insert into t values (?)", [("y" * 500,)] * 50)
conn.execute("pragma wal_checkpoint(truncate)")
conn.execute("pragma wal_autocheckpoint = 0")
conn.execute(sys.argv[2])
os._exit(0)  # no close: its last writes stay in its -wal
"""
# What the other database's -wal holds: a table of its own, the drop of its only table (read with it, memory.db holds
# no tables at all), rows of that table only (read with it, memory.db keeps its own tables' names over foreign pages).
LAST_WRITES = {
    "holds another database's tables (t, t2)": "create table t2 (y)",
    "holds no tables at all": "drop table t",
    "cannot be read (database disk image is malformed)": "insert into t values ('z')",
}




def a_foreign_wal(beside: Path, other: Path, last: str) -> None:
    """Another database's WAL, holding writes it never copied into its file, copied beside `beside`."""
    subprocess.run([sys.executable, "-c", FOREIGN_WAL, str(other), last], check=True)
    shutil.copyfile(f"{other}-wal", f"{beside}-wal")


def contents(*paths: Path) -> tuple[bytes, ...]:
    return tuple(path.read_bytes() for path in paths)


def no_backup(line: str) -> None:
    assert "backup" not in line and "restore" not in line and "unexpected" not in line, line


@pytest.mark.parametrize("holds", list(LAST_WRITES))
async def test_a_wal_of_another_database_beside_memory_db_is_refused_and_nothing_is_written(
    tmp_path, settings, capsys, holds
):
    await a_store(settings)
    db, wal = settings.db_path, Path(f"{settings.db_path}-wal")
    a_foreign_wal(db, tmp_path / "other.db", LAST_WRITES[holds])
    before = contents(db, wal)

    code, report = await doctor(settings, capsys)
    assert code == 1 and len(report["problems"]) == 1, report
    line = report["problems"][0]
    assert line.startswith(f"{wal} is not the WAL of memory.db: memory.db as pocketmem last wrote it is a pocketmem "
                           f"store, but read with that -wal it {holds}; opening it would copy"), line
    assert "Move memory.db-wal and memory.db-shm out of" in line
    no_backup(line)
    done = cli(Backend(), settings.home, "stats")
    assert done.returncode == 2 and done.stderr.strip() == f"pocketmem: {line}", done.stderr
    with pytest.raises(NotAStore, match="is not the WAL of memory.db"):  # serve and the page open so
        await PocketMem(settings).open()
    assert contents(db, wal) == before  # the refusals never copied that WAL into memory.db

    for name in ("memory.db-wal", "memory.db-shm"):  # what the line says to do
        (settings.home / name).rename(tmp_path / name)
    async with PocketMem(settings, clock=FixedClock(START)) as app, app.store.read() as reader:
        listed = await reader.scan_memories("global", (Status.active,), None, 10)
    assert sorted(m.content for m in listed) == sorted(FACTS)


def another_programs_file(path: Path, table: str = "notes") -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute(f"create table {table} (id integer primary key, body text)")
        conn.execute(f"insert into {table} (body) values ('not a memory')")
    conn.close()
    return path.read_bytes()


@pytest.mark.parametrize("table", ["notes", "memories"])
async def test_another_programs_database_named_by_pocketmem_db_is_refused_unwritten(tmp_path, make_settings, capsys,
                                                                                     table):
    other = tmp_path / "other" / "app.db"
    kept = another_programs_file(other, table)
    settings = make_settings(tmp_path, db=other)
    said = (f"{other} is not a pocketmem store: its tables ({table}) are another program's; nothing was written to "
            "it; set POCKETMEM_DB to the store's SQLite file, or unset it to keep the store in "
            "$POCKETMEM_HOME/memory.db")
    code, report = await doctor(settings, capsys)
    assert code == 1 and report["problems"] == [said], report
    done = cli(Backend(), settings.home, "list", POCKETMEM_DB=str(other))
    assert done.returncode == 2 and done.stderr.strip() == f"pocketmem: {said}", done.stderr
    assert other.read_bytes() == kept and sorted(p.name for p in other.parent.iterdir()) == ["app.db"]
    assert not (settings.home / "global").exists()


async def test_another_programs_database_is_named_by_the_setting_that_points_at_it(tmp_path, monkeypatch, capsys):
    home, other = tmp_path / "home", tmp_path / "other" / "app.db"
    kept = another_programs_file(other)
    home.mkdir()
    (home / "config.toml").write_text(f'db = "{other}"\n', encoding="utf-8")
    monkeypatch.setenv("POCKETMEM_HOME", str(home))
    code, report = await doctor(load_settings(embedder="hash"), capsys)
    assert code == 1 and report["problems"][0].endswith(
        f"nothing was written to it; set db (in {home / 'config.toml'}) to the store's SQLite file, or remove that "
        "key to keep the store in $POCKETMEM_HOME/memory.db"
    ), report
    (home / "config.toml").unlink()
    in_home = home / "memory.db"
    in_home.write_bytes(kept)  # another program's file where the store belongs
    code, report = await doctor(load_settings(embedder="hash"), capsys)
    assert code == 1 and report["problems"] == [
        f"{in_home} is not a pocketmem store: its tables (notes) are another program's; nothing was written to it; "
        "move it away (pocketmem keeps its store in POCKETMEM_HOME as memory.db, and makes a new one where there is "
        "none), or set POCKETMEM_HOME to another folder"
    ]
    assert other.read_bytes() == kept and in_home.read_bytes() == kept
