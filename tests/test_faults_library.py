"""The cloud library's faults (docs/postgres-and-sync.md, docs/recall-safety.md §1): the password of its URL is
never shown, whatever characters it holds; a connection that fails says why in one line naming
POCKETMEM_CLOUD_URL; recall says in `degraded` whenever the library's hits are missing (slow, down, resting after
a failure), and gives the library its budget once the question is encoded.

A real PostgreSQL (tests/pg.py), behind a TCP proxy where it must be slow or fail.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence

import anyio
import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.mcp.server import build_server
from pocketmem.providers.embeddings.hashing import HashEmbedder
from pocketmem.service.recall import library
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.transfer.sync import STATE_KEY

from .helpers import START, USER, add, device, synced
from .pg import PgTestServer, Proxy
from .servers import run_cli

CHENGDU = RecallRequest(query="成都", keywords=["成都"], record=False)


def secret_free(text: str, password: str) -> bool:
    """`text` shows no part of `password` (nor its pieces between the characters a URL parser stops at)."""
    return password not in text and "ss1" not in text and "ss8" not in text


@pytest.mark.anyio
@pytest.mark.parametrize("password", ["pa/ss1", "pa?ss1", "pa#ss1"])
async def test_a_password_holding_a_slash_question_mark_or_hash_is_never_shown(
    tmp_path, postgres: PgTestServer, library_db, make_settings, password
):
    url = f"postgresql://postgres:{password}@127.0.0.1:{postgres.port}/{library_db}"
    async with device(make_settings, tmp_path, "a", url, FixedClock(START), cloud_timeout=1) as a:
        report = await a.sync.run()
        status = (await a.stats(USER))["sync"]
        assert status["library"] == f"postgresql://postgres:***@127.0.0.1:{postgres.port}/{library_db}"
        async with Client(build_server(a.settings, app=a)) as client:
            shown = (await client.read_resource("memory://stats")).contents[0].text
        assert f"postgres:***@127.0.0.1:{postgres.port}" in shown
        for text in (report.model_dump_json(), json.dumps(status, default=str), shown):
            assert secret_free(text, password), text
        # A state an earlier release stored with the password in its error is masked when shown.
        old = f"PostgreSQL at postgresql://postgres:{password}@127.0.0.1:5/x: couldn't get a connection"
        await a.store.set_meta(STATE_KEY, json.dumps({"last_error": old}))
        assert (await a.stats(USER))["sync"]["last_error"] == (
            "PostgreSQL at postgresql://postgres:***@127.0.0.1:5/x: couldn't get a connection"
        )


def test_a_failed_sync_names_the_setting_and_the_cause_in_one_line(
    tmp_path, capsys, postgres: PgTestServer, library_db
):
    """No "couldn't get a connection after 10 sec": the first cause the server gave, and never the pool's own
    warnings, which quote a password they cannot parse."""
    sock = f"host={postgres.socket_dir}&port={postgres.port}"
    db = library_db
    cases = {
        f"postgresql://postgres@/nodb?{sock}": 'database "nodb" does not exist',
        f"postgresql://nobody@/{db}?{sock}": 'role "nobody" does not exist',
        f"postgresql://postgres@127.0.0.1:9/{db}": "Connection refused",
        f"postgresql://postgres:pa ss8@/{db}?{sock}": "must be percent-encoded in the URL",
        f"postgresql://postgres:pa/ss1@127.0.0.1:{postgres.port}/{db}": "must be percent-encoded in the URL",
        # The driver quotes the URL from where it stopped: the password's last piece, one character, with it.
        f"postgresql://postgres:Zq9/x@Kp#7?w@127.0.0.1:{postgres.port}/{db}": "must be percent-encoded in the URL",
        f"postgresql://postgres:Zq9/b?c#d@127.0.0.1:{postgres.port}/{db}": "must be percent-encoded in the URL",
    }
    for url, cause in cases.items():
        out = run_cli(capsys, tmp_path, "sync", POCKETMEM_CLOUD_URL=url, POCKETMEM_CLOUD_TIMEOUT="1")
        (line,) = out.stderr.splitlines()
        assert out.returncode == 1 and line.startswith("synced 0 users: failed: PostgreSQL at "), out.stderr
        assert "(POCKETMEM_CLOUD_URL): " in line and cause in line and "couldn't get a connection" not in line
        assert json.loads(out.stdout)["error"] == line.removeprefix("synced 0 users: failed: ")
        stats = run_cli(capsys, tmp_path, "stats", POCKETMEM_CLOUD_URL=url).stdout
        assert json.loads(stats)["sync"]["last_error"] == json.loads(out.stdout)["error"]
        for text in (out.stdout, out.stderr, stats):
            assert secret_free(text, "pa ss8") and secret_free(text, "pa/ss1"), text
            if "Zq9" in url:
                assert "Zq9" not in text and '"w@' not in text and "c#d" not in text, text
                assert '"***@127.0.0.1' in text, text


@pytest.mark.anyio
async def test_the_pool_never_logs_a_password_it_cannot_parse(tmp_path, postgres: PgTestServer, library_db,
                                                              make_settings, caplog):
    url = f"postgresql://postgres:pa ss8@/{library_db}?host={postgres.socket_dir}&port={postgres.port}"
    caplog.set_level(logging.DEBUG)
    async with device(make_settings, tmp_path, "a", url, FixedClock(START), cloud_timeout=1) as a:
        report = await a.sync.run()
    assert not report.ok and "POCKETMEM_CLOUD_URL" in (report.error or "")
    assert not [r for r in caplog.records if r.name == "psycopg.pool" and r.getMessage().startswith("error conn")]
    assert all(secret_free(r.getMessage(), "pa ss8") for r in caplog.records)


@pytest.mark.anyio
async def test_recall_names_the_missing_library_while_slow_down_or_resting(
    tmp_path, postgres: PgTestServer, library_db, make_settings, monkeypatch
):
    clock = FixedClock(START)
    async with Proxy(postgres.socket_path) as proxy:
        url = postgres.url(library_db, host="127.0.0.1", port=proxy.port)
        async with device(make_settings, tmp_path, "a", url, clock, max_active=1, cloud_timeout=1) as a:
            evicted = await add(a, "用户小时候在成都住过", scores={"info": 0.1, "judge": 0.1})
            clock.advance(minutes=1)
            await add(a, "用户喜欢爬山", scores={"info": 0.9})
            await synced(a)
            found = await a.retrieval.recall(USER, CHENGDU)
            assert [(h.id, h.source) for h in found.memories] == [(evicted, "library")] and found.degraded is None

            proxy.delay = 3.0
            slow = await a.retrieval.recall(USER, CHENGDU)
            assert slow.memories == [] and (slow.degraded or "").startswith("cloud library: no answer within 0.3 s")

            # Down: every answer says the library is missing, until it rests after the failure and says that.
            monkeypatch.setattr(library, "REST_AFTER_FAILURE", 2.0)
            proxy.delay, proxy.refuse = 0.0, True
            proxy.cut()
            with anyio.fail_after(20):
                while True:
                    down = await a.retrieval.recall(USER, CHENGDU)
                    assert down.memories == [] and (down.degraded or "").startswith("cloud library: "), down
                    if "not asked" in down.degraded:
                        break
            assert down.degraded.startswith("cloud library: not asked for 2 s more, after it failed: PostgreSQL at ")
            assert "(POCKETMEM_CLOUD_URL)" in down.degraded

            proxy.refuse = False  # back: asked again after the rest
            with anyio.fail_after(30):
                while not (back := await a.retrieval.recall(USER, CHENGDU)).memories:
                    assert (back.degraded or "").startswith("cloud library: ")
                    await anyio.sleep(0.2)
            assert [h.id for h in back.memories] == [evicted] and back.degraded is None


class SlowToEncode(HashEmbedder):
    """The built-in vectors, encoded `delay` seconds late (a model loading on the first question)."""

    delay = 0.0

    async def _embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(self.delay)
        return await super()._embed_batch(texts)


@pytest.mark.anyio
async def test_the_library_has_its_budget_once_the_question_is_encoded(
    tmp_path, postgres: PgTestServer, library_db, make_settings
):
    """The library's search needs the query's vectors as the notebook's does: a slow encoding (the first question
    of a session) does not use up its budget."""
    clock = FixedClock(START)
    embedder = SlowToEncode()
    async with Proxy(postgres.socket_path) as proxy:
        url = postgres.url(library_db, host="127.0.0.1", port=proxy.port)
        settings = make_settings(tmp_path, db=tmp_path / "a.db", cloud_url=url, sync_interval=0, max_active=1,
                                 library_timeout=2.0)
        async with PocketMem(settings, clock=clock, embedder=embedder) as a:
            evicted = await add(a, "用户小时候在成都住过", scores={"info": 0.1, "judge": 0.1})
            clock.advance(minutes=1)
            await add(a, "用户喜欢爬山", scores={"info": 0.9})
            await synced(a)
            embedder.delay, proxy.delay = 4.0, 0.05  # longer than the budget; the library's search a little slow
            result = await a.retrieval.recall(USER, CHENGDU)
            assert [(h.id, h.source) for h in result.memories] == [(evicted, "library")], result.degraded
            assert result.degraded is None
