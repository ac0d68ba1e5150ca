"""Shared fixtures: real SQLite files in tmp_path (or real PostgreSQL databases), a fixed clock, the real MCP
client in process.

Modules marked `pytest.mark.backends` run every test twice, on SQLite and on PostgreSQL (tests/pg.py:
one server per session, a fresh database per store): `make_settings` and the `settings` fixture then
point at a PostgreSQL database instead of a file, so the same behaviour suite runs on both backends.
Tests about the SQLite file itself are marked `sqlite_only`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.config import Settings
from pocketmem.mcp.server import build_server

from .pg import PgTestServer

SHANGHAI = ZoneInfo("Asia/Shanghai")
START = datetime(2026, 11, 26, 10, 0, tzinfo=SHANGHAI)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads the developer's ~/.pocketmem or POCKETMEM_* variables."""
    import os

    for name in list(os.environ):
        if name.startswith("POCKETMEM_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)
    monkeypatch.setenv("POCKETMEM_HOME", str(tmp_path / "home"))


_current: dict[str, object] = {"backend": "sqlite", "databases": {}}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marked = metafunc.definition.get_closest_marker
    if marked("postgres_only"):
        metafunc.parametrize("backend", ["postgres"], indirect=True, scope="function")
    elif marked("backends") and not marked("sqlite_only"):
        metafunc.parametrize("backend", ["sqlite", "postgres"], indirect=True, scope="function")


@pytest.fixture(scope="session")
def postgres() -> Iterator[PgTestServer]:
    """The session's PostgreSQL server (started on first use)."""
    server = PgTestServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """'sqlite', or 'postgres' for the PostgreSQL run of a module marked backends."""
    name = getattr(request, "param", "sqlite")
    databases: dict[str, str] = {}
    _current.update(backend=name, databases=databases)
    server = request.getfixturevalue("postgres") if name == "postgres" else None
    _current["server"] = server
    try:
        yield name
    finally:
        _current.update(backend="sqlite", databases={}, server=None)
        if server is not None:
            for database in databases.values():
                server.drop(database)


def postgres_url_for(key: str) -> str:
    """The test's PostgreSQL database standing in for the SQLite file `key` (created on first use)."""
    server = _current["server"]
    assert isinstance(server, PgTestServer)
    databases = _current["databases"]
    assert isinstance(databases, dict)
    if key not in databases:
        databases[key] = server.database()
    return server.url(databases[key])


def backend_env(home: Path) -> dict[str, str]:
    """Environment for a pocketmem subprocess over `home`: on the PostgreSQL run, its database URL."""
    if _current["backend"] != "postgres":
        return {}
    return {"POCKETMEM_DATABASE_URL": postgres_url_for(str(home / "memory.db"))}


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


def make_settings(tmp_path: Path, **overrides: object) -> Settings:
    # No maintenance timer unless a test asks for one: it would act on the fixed clock behind the test's back.
    # The built-in lexical embedder unless a test asks for another: the behaviour suite was written against it;
    # tests/test_neural_default.py runs the default (`use`).
    values: dict[str, object] = {
        "home": tmp_path / "home", "tz": "Asia/Shanghai", "maintain_interval": 0, "embedder": "hash",
    }
    values.update(overrides)
    if _current["backend"] == "postgres" and "database_url" not in values and "cloud_url" not in values:
        values["database_url"] = postgres_url_for(str(values.get("db") or tmp_path / "home" / "memory.db"))
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture
async def app(settings: Settings, clock: FixedClock) -> AsyncIterator[PocketMem]:
    pm = PocketMem(settings, clock=clock)
    await pm.open()
    try:
        yield pm
    finally:
        await pm.close()


@pytest.fixture(params=["auto", "legacy"])
async def client(request: pytest.FixtureRequest, app: PocketMem, settings: Settings) -> AsyncIterator[Client]:
    """The SDK's own client, in process: protocol 2026-07-28 (auto) and the 2025-11-25 handshake (legacy)."""
    server = build_server(settings, app=app)
    async with Client(server, mode=request.param) as c:
        yield c
