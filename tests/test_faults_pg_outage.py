"""Faults: the PostgreSQL server goes down while pocketmem serves on it (POCKETMEM_DATABASE_URL), then comes back.

Maintenance says the outage in one WARNING line and tries again soon, not an interval later; a tool call fails at
once after the first one found the server down, instead of each waiting the pool's whole timeout; once the server
is back, both work again without a restart. A real PostgreSQL behind a TCP proxy that refuses every connection
(tests/pg.py); the tools through a real `pocketmem serve` process over stdio.
"""

from __future__ import annotations

import logging
import time

import anyio
import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.service.upkeep import maintenance

from .helpers import START, server_params
from .pg import PgTestServer, Proxy

pytestmark = pytest.mark.anyio


async def test_maintenance_says_an_outage_in_one_line_and_tries_again_soon(
    tmp_path, postgres: PgTestServer, library_db, make_settings, monkeypatch, caplog
):
    monkeypatch.setattr(maintenance, "FIRST_RUN_DELAY", 0.0)
    monkeypatch.setattr(maintenance, "RETRY_FIRST", 0.5)
    async with Proxy(postgres.socket_path) as proxy:
        url = postgres.url(library_db, host="127.0.0.1", port=proxy.port)
        async with PocketMem(make_settings(tmp_path, database_url=url), clock=FixedClock(START)) as app:
            proxy.refuse = True
            proxy.cut()
            caplog.set_level(logging.WARNING)
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(app.maintenance.run_periodically, 3600.0)
                with anyio.fail_after(60):
                    while not [r for r in caplog.records if "maintenance could not reach" in r.getMessage()]:  # noqa: ASYNC110
                        await anyio.sleep(0.1)
                proxy.refuse = False  # back: the next retry, seconds later, runs maintenance
                with anyio.fail_after(60):
                    while app.maintenance.last_run is None:  # noqa: ASYNC110 - the timer has no event to wait on
                        await anyio.sleep(0.1)
                tasks.cancel_scope.cancel()
    said = [r for r in caplog.records if r.name.startswith("pocketmem") and r.levelno >= logging.WARNING]
    assert said, caplog.text
    for record in said:
        assert record.levelno == logging.WARNING and record.exc_info is None, record.getMessage()
        message = record.getMessage()
        assert "maintenance could not reach the store: PostgreSQL at" in message and "trying again in" in message
        assert "3600" not in message


async def test_tool_calls_fail_at_once_while_the_database_is_down_and_work_again_after(
    tmp_path, postgres: PgTestServer, library_db
):
    async with Proxy(postgres.socket_path) as proxy:
        url = postgres.url(library_db, host="127.0.0.1", port=proxy.port)
        params = server_params(tmp_path / "home", POCKETMEM_DATABASE_URL=url, POCKETMEM_EMBEDDER="hash",
                               POCKETMEM_MAINTAIN_INTERVAL="0")
        async with Client(params) as client:
            added = await client.call_tool("add_memory", {"content": "用户喜欢爬山"})
            assert not added.is_error, added.content[0].text
            proxy.refuse = True
            proxy.cut()
            first = await client.call_tool("list_memories", {})
            assert first.is_error and "PostgreSQL at" in first.content[0].text
            for _ in range(3):
                started = time.monotonic()
                later = await client.call_tool("list_memories", {})
                assert time.monotonic() - started < 3.0  # not the pool's 10 s wait
                assert later.is_error and "PostgreSQL at" in later.content[0].text, later.content[0].text

            proxy.refuse = False  # the server is back: calls work again, without a restart
            with anyio.fail_after(30):
                while (answer := await client.call_tool("list_memories", {})).is_error:  # noqa: ASYNC110
                    await anyio.sleep(0.5)
            assert "爬山" in answer.content[0].text
