"""Every released schema opens with this release: a store made by each release's own migration code (built from
git history by tests/fixtures/schemas/build.py) is reindexed, written to, recalled from and passes doctor."""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.sqlite.driver import connect

from .helpers import START
from .servers import checkout_env, cli

pytestmark = [pytest.mark.anyio]

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "schemas").glob("*.db.gz"))
FIRST_RELEASE = FIXTURES[0].parent / "48b03d3e22.db.gz"


def unpack(fixture: Path, home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    db = home / "memory.db"
    db.write_bytes(gzip.decompress(fixture.read_bytes()))
    return db


def schema(db: Path) -> set[tuple[str, str]]:
    """Every table, index and trigger by name, and every column of a table as `column table.name`."""
    with sqlite3.connect(db) as conn:
        named = conn.execute("select type, name from sqlite_master where name not like 'sqlite_%'")
        found = {(r[0], r[1]) for r in named}
        plain = conn.execute("select name from sqlite_master where type = 'table' and sql not like 'create virtual%'")
        for (table,) in plain.fetchall():
            found |= {("column", f"{table}.{r[1]}") for r in conn.execute(f'pragma table_info("{table}")')}
        return found


def test_there_is_a_fixture_for_the_first_and_the_latest_release():
    assert len(FIXTURES) >= 12 and FIRST_RELEASE in FIXTURES


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.name.split(".")[0] for f in FIXTURES])
async def test_an_old_store_upgrades_reindexes_writes_recalls_and_passes_doctor(tmp_path, fixture, make_settings):
    settings = make_settings(tmp_path)
    db = unpack(fixture, settings.home)
    fresh = make_settings(tmp_path / "fresh")
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        assert await app.reindex() == 3
        added = await app.writing.add("alice", AddRequest(content="Alice plays the cello on Sundays"))
        assert added.status == "stored" and added.memory_id is not None
        assert (await app.stats("alice"))["active"] == 3
        found = await app.retrieval.recall("alice", RecallRequest(query="coriander noodles"))
        assert "m-alice-1" in [m.id for m in found.memories]
        found = await app.retrieval.recall("alice", RecallRequest(query="cello"))
        assert added.memory_id in [m.id for m in found.memories]
        report = await app.doctor()
        assert report["ok"], report["problems"]
        assert report["store"]["count_mismatches"] == 0 and report["store"]["keyword_orphans"] == 0
    # The profile files are written after the write (a store without `profile_files.earlier` failed here).
    files = sorted(p.name for p in (settings.home / "alice").glob("*.md"))
    assert files == ["Insights.md", "Persona.md", "Project.md", "User.md"]
    with sqlite3.connect(db) as conn:
        written = conn.execute("select name from profile_files where user_id = 'alice' order by name").fetchall()
    assert [r[0] for r in written] == files
    async with PocketMem(fresh, clock=FixedClock(START)) as app:
        await app.writing.add("alice", AddRequest(content="Alice plays the cello on Sundays"))
    assert schema(db) == schema(fresh.db_path)


@pytest.mark.parametrize("fixture", [FIXTURES[0], FIXTURES[-1]], ids=lambda f: f.name.split(".")[0])
async def test_an_old_stores_first_recall_is_whole_before_its_vectors_are_computed(tmp_path, fixture, make_settings):
    """Opened by a server with the default encoder, an older store's rows have no vector until the embed queue
    reaches them: the vector side leaves them out, and recall answers from both sides, not the keyword path."""
    settings = make_settings(tmp_path, embedder="use")
    unpack(fixture, settings.home)
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        found = await app.retrieval.recall("alice", RecallRequest(query="coriander noodles"))
        assert found.degraded is None
        assert "m-alice-1" in [m.id for m in found.memories]


@pytest.mark.slow
def test_the_first_release_store_through_the_command_line(tmp_path):
    home = tmp_path / "home"
    unpack(FIRST_RELEASE, home)
    env = {**checkout_env(), "POCKETMEM_HOME": str(home), "POCKETMEM_USER": "alice"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pocketmem", *args], env=env, capture_output=True, text=True,
                              timeout=120)

    for args in (("reindex",), ("add", "Alice plays the cello on Sundays"), ("search", "cello")):
        done = run(*args)
        assert done.returncode == 0, done.stderr
    doctor = run("doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert json.loads(doctor.stdout)["ok"]


FACTS = ["用户的猫叫小白", "Alice likes coriander in her noodles", "用户每周三去游泳"]


def rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return sorted(conn.execute(sql).fetchall())


@pytest.mark.parametrize("dropped", ["memory_counts", "memories_fts", "user_terms", "memory_vectors"])
async def test_doctor_repair_recreates_a_missing_derived_table_with_its_rows(tmp_path, dropped, make_settings):
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        for fact in FACTS:
            await app.writing.add("alice", AddRequest(content=fact))
    terms = rows(settings.db_path, "select user_id, term, docs from user_terms")
    conn = connect(str(settings.db_path), load_vectors=True)  # sqlite-vec loaded: it drops its own table
    conn.execute(f"drop table {dropped}")
    conn.close()
    app = PocketMem(settings, clock=FixedClock(START))
    await app.open()  # as `pocketmem doctor` opens it
    try:
        report = await app.doctor()
        if dropped == "memory_vectors":
            assert not report["ok"] and any("doctor --repair" in p for p in report["problems"])
            report = await app.doctor(repair=True)
            assert report["repaired"] == ["the vector index was missing: rebuilt from the stored vectors"]
        else:  # rebuilt as the store opened, before any write could need it
            assert report["repaired"] == [f"table {dropped} was missing: rebuilt from the memories"]
        assert report["ok"], report["problems"]
        assert report["store"]["vector_rows"] == report["store"]["memories"] == 3
        assert (await app.stats("alice"))["active"] == 3
        found = await app.retrieval.recall("alice", RecallRequest(query="coriander"))
        assert [m.content for m in found.memories][:1] == [FACTS[1]]
    finally:
        await app.close()
    assert rows(settings.db_path, "select user_id, term, docs from user_terms") == terms
    assert rows(settings.db_path, "select user_id, active from memory_counts") == [("alice", 3)]


def test_doctor_names_a_column_missing_after_the_migrations_ran_and_repair_adds_it(tmp_path, backend, make_settings):
    """A store whose migrations are all recorded but whose table lacks a column the schema has now (an edit by
    hand, a migration changed after release): doctor names the column, `doctor --repair` adds it, writes land."""
    settings = make_settings(tmp_path)
    home = settings.home
    assert cli(backend, home, "add", "Alice likes coriander", "--user", "alice").returncode == 0
    with sqlite3.connect(settings.db_path) as conn:
        conn.execute("alter table profile_files drop column earlier")
    doctor = cli(backend, home, "doctor")
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert json.loads(doctor.stdout)["problems"] == [
        "column profile_files.earlier is missing (added with its default value): run `pocketmem doctor --repair`"
    ]
    repaired = cli(backend, home, "doctor", "--repair")
    report = json.loads(repaired.stdout)
    assert report["ok"] and report["repaired"] == ["column profile_files.earlier was missing: added"]
    added = cli(backend, home, "add", "Alice has a cat", "--user", "alice")
    assert added.returncode == 0 and "ERROR" not in added.stderr, added.stderr
