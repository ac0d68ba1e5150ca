"""The helpers test modules share, in one place: the fixed start time, the `Backend` a test runs on (settings
for SQLite files, or a PostgreSQL database per file on the PostgreSQL run), and a few builders several suites use.

Test modules import these from here; fixtures live in conftest.py. Its `backend` fixture makes each test's
`Backend` and its `make_settings` fixture is that backend's `make_settings`: a helper that builds settings or
starts pocketmem is handed one of them by the test, nothing here knows which test is running.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol
from zoneinfo import ZoneInfo

import pytest
from mcp import Client, StdioServerParameters

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.config import Settings
from pocketmem.base.models import Status
from pocketmem.providers.embeddings import HashEmbedder
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.types import MemoryFilter

from .pg import PgTestServer
from .servers import checkout_env

SHANGHAI = ZoneInfo("Asia/Shanghai")
START = datetime(2026, 11, 26, 10, 0, tzinfo=SHANGHAI)


@dataclass
class Backend:
    """The backend one test runs on: conftest's `backend` fixture makes it for the test and drops its PostgreSQL
    databases after it."""

    name: str = "sqlite"
    server: PgTestServer | None = None
    databases: dict[str, str] = field(default_factory=dict)  # SQLite file -> the PostgreSQL database standing in

    def postgres_url_for(self, key: str) -> str:
        """The test's PostgreSQL database standing in for the SQLite file `key` (created on first use)."""
        assert self.server is not None
        if key not in self.databases:
            self.databases[key] = self.server.database()
        return self.server.url(self.databases[key])

    def env(self, home: Path) -> dict[str, str]:
        """Environment for a pocketmem subprocess over `home`: on the PostgreSQL run, its database URL."""
        if self.name != "postgres":
            return {}
        return {"POCKETMEM_DATABASE_URL": self.postgres_url_for(str(home / "memory.db"))}

    def make_settings(self, tmp_path: Path, **overrides: object) -> Settings:
        # No maintenance timer unless a test asks for one: it would act on the fixed clock behind the test's back.
        # The built-in lexical embedder unless a test asks for another: the behaviour suite was written against
        # it; tests/test_neural_default.py runs the default (`use`).
        values: dict[str, object] = {
            "home": tmp_path / "home", "tz": "Asia/Shanghai", "maintain_interval": 0, "embedder": "hash",
        }
        values.update(overrides)
        if self.name == "postgres" and "database_url" not in values and "cloud_url" not in values:
            values["database_url"] = self.postgres_url_for(str(values.get("db") or tmp_path / "home" / "memory.db"))
        return Settings(**values)  # type: ignore[arg-type]


class MakeSettings(Protocol):
    """The `make_settings` fixture: settings over `tmp_path` for the test's backend (`Backend.make_settings`)."""

    def __call__(self, tmp_path: Path, **overrides: object) -> Settings: ...


class NeighbourSearchingEmbedder(HashEmbedder):
    """The built-in vectors, but declared non-lexical so recall runs the nearest-neighbour scan as it does
    for neural embedders."""

    kind = "hash-knn"
    lexical = False


async def dump(app: PocketMem) -> dict:
    """Every row of every user, as comparable data (events without their local ids)."""
    out: dict = {}
    async with app.store.read() as r:
        for user in await r.user_ids():
            memories = await r.scan_memories(user, tuple(Status), None, 10_000)
            events = await r.events_after(user, 0, 100_000)
            out[user] = {
                "user": {k: v for k, v in (await r.get_user(user) or {}).items()},
                "memories": [m.model_dump() for m in memories],
                "usage": {k: v.model_dump() for k, v in (await r.usage(user)).items()},
                "tombstones": [t.model_dump() for t in await r.all_tombstones(user)],
                "revisions": [x.model_dump() for x in await r.all_revisions(user)],
                "pending": [p.model_dump() for p in await r.all_pending(user)],
                "events": [e.model_dump(exclude={"id"}) for e in events if e.kind != "imported"],
            }
    return out


def server_params(home: Path, **env: str) -> StdioServerParameters:
    # Hosts give the server a minimal environment; pass only what it needs.
    base = {**checkout_env(), "POCKETMEM_HOME": str(home), "POCKETMEM_TZ": "Asia/Shanghai"}
    base.update(env)
    return StdioServerParameters(command=sys.executable, args=["-m", "pocketmem", "serve"], env=base)


async def call(client: Client, name: str, args: dict) -> dict:
    """A tool call that must succeed: its structured result."""
    result = await client.call_tool(name, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def error(client: Client, name: str, args: dict) -> str:
    """A tool call that must fail: its error text."""
    result = await client.call_tool(name, args)
    assert result.is_error, result.structured_content
    return result.content[0].text


# -- sync: devices (SQLite notebooks on their own clocks) and one cloud library (the `library_url` fixture) ------
USER = "global"  # the default POCKETMEM_USER


def device(make_settings: MakeSettings, tmp_path, name: str, url: str, clock: FixedClock, **overrides) -> PocketMem:
    settings = make_settings(tmp_path, db=tmp_path / f"{name}.db", cloud_url=url, sync_interval=0, **overrides)
    return PocketMem(settings, clock=clock)


async def add(app: PocketMem, content: str, **kw) -> str:
    result = await app.writing.add(USER, AddRequest(content=content, **kw))
    assert result.status == "stored", result
    return result.memory_id


async def synced(app: PocketMem):
    report = await app.sync.run()
    assert report.ok, report.error
    return report


async def rows(store, status: Status = Status.active) -> dict[str, str]:
    async with store.read() as r:
        items, _ = await r.list_memories(USER, MemoryFilter(statuses=(status,), limit=500))
    return {m.id: m.content for m in items}


def damage(db: Path, statement: str, *params: object) -> None:
    """Change the file as another program would, with the sqlite-vec extension loaded (its triggers need it)."""
    import sqlean
    import sqlite_vec

    conn = sqlean.connect(str(db))
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.execute(statement, params)
        conn.commit()
    finally:
        conn.close()


async def doctor(settings: Settings, capsys: pytest.CaptureFixture[str], repair: bool = False) -> tuple[int, dict]:
    """`pocketmem doctor [--repair]` in process: its exit code and its JSON report."""
    from pocketmem.cli import _doctor

    code = await _doctor(settings, argparse.Namespace(repair=repair))
    return code, json.loads(capsys.readouterr().out)


STORE_FACTS = ("用户住在杭州", "用户的猫叫小白")


async def a_store(settings: Settings, facts: tuple[str, ...] = STORE_FACTS) -> None:
    """A store holding `facts`, each written as add_memory writes it, on the tests' clock."""
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        for fact in facts:
            await app.writing.add("global", AddRequest(content=fact))


def as_an_older_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """This release's code writing a store whose schema is older (MIGRATIONS cut short), as the release of that
    time wrote it: no per-user term counts, and tombstones without the forgotten content's hash."""
    from pocketmem.store.sql.records import TOMBSTONE_COLUMNS, tombstone_params
    from pocketmem.store.sqlite.tx import SQLiteTx

    old_columns = TOMBSTONE_COLUMNS.removesuffix(", content_hash")

    async def no_term_counts(*_args: object) -> None:
        return None

    async def no_hashes(*_args: object) -> list:
        return []

    async def old_tombstone(self: SQLiteTx, tombstone) -> None:
        params = tombstone_params(tombstone, self.dialect)[:-1]
        values = self.dialect.placeholders(len(params))
        await self.execute(f"insert into memory_tombstones ({old_columns}) values ({values})", params)

    monkeypatch.setattr(SQLiteTx, "_count_terms", no_term_counts)
    monkeypatch.setattr(SQLiteTx, "tombstones_by_content", no_hashes)
    monkeypatch.setattr(SQLiteTx, "insert_tombstone", old_tombstone)
