"""Shared fixtures: real SQLite files in tmp_path, a fixed clock, the real MCP client in process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.clock import FixedClock
from pocketmem.config import Settings
from pocketmem.server import build_server

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


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


def make_settings(tmp_path: Path, **overrides: object) -> Settings:
    # No maintenance timer unless a test asks for one: it would act on the fixed clock behind the test's back.
    values: dict[str, object] = {"home": tmp_path / "home", "tz": "Asia/Shanghai", "maintain_interval": 0}
    values.update(overrides)
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
