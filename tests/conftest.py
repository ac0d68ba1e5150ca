"""Shared fixtures: real SQLite files in tmp_path (or real PostgreSQL databases), a fixed clock, the real MCP
client in process.

Modules marked `pytest.mark.backends` run every test twice, on SQLite and on PostgreSQL (tests/pg.py:
one server per session, a fresh database per store): the `backend` fixture is then a PostgreSQL `Backend`, and
the `make_settings` and `settings` fixtures point at a PostgreSQL database instead of a file, so the same
behaviour suite runs on both backends. Tests about the SQLite file itself are marked `sqlite_only`.

The backend travels as a fixture: a test that builds settings takes `make_settings` (or `settings`), and hands
`make_settings` or `backend` to the helpers that need it (`servers.cli`, `asgi.serve_in_process`, ...).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.config import Settings
from pocketmem.mcp.server import build_server

from .helpers import START, Backend, MakeSettings
from .pg import PgTestServer


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
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The test's backend: SQLite, or PostgreSQL (`name` 'postgres') on that run of a test marked backends. Its
    PostgreSQL databases are dropped after the test."""
    name = getattr(request, "param", "sqlite")
    server = request.getfixturevalue("postgres") if name == "postgres" else None
    current = Backend(name, server)
    try:
        yield current
    finally:
        if server is not None:
            for database in current.databases.values():
                server.drop(database)


@pytest.fixture
def make_settings(backend: Backend) -> MakeSettings:
    """`make_settings(tmp_path, **overrides)`: settings over tmp_path for the test's backend."""
    return backend.make_settings


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


@pytest.fixture
def settings(make_settings: MakeSettings, tmp_path: Path) -> Settings:
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


@pytest.fixture
def library_db(postgres: PgTestServer) -> Iterator[str]:
    """A database of its own on the suite's PostgreSQL server: a cloud library for the sync tests."""
    name = postgres.database()
    try:
        yield name
    finally:
        postgres.drop(name)


@pytest.fixture
def library_url(postgres: PgTestServer, library_db: str) -> str:
    return postgres.url(library_db)
