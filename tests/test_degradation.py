"""Degradation (docs/recall-safety.md §1), through the MCP client on real stores:

- an OpenAI-compatible embedding endpoint (tests/fake_openai.py, a real local HTTP server) that is stopped
  and started again: recall answers from the keyword path; a write is stored at once, keyword-searchable,
  and embedded later by the background queue, also after a restart;
- a keyword index that is gone (the FTS5 table dropped from the SQLite file; on PostgreSQL the term
  statistics table dropped): recall answers from the vector path, even with the built-in embedder;
- both down: the user card with its core memories.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.models import EventKind
from pocketmem.mcp.server import build_server
from pocketmem.service.writing import embed_queue
from pocketmem.service.writing.embed_queue import EmbedQueue
from tests.fake_openai import FakeOpenAI

from .helpers import MakeSettings, call

pytestmark = pytest.mark.anyio
USER = "global"
CORIANDER = "用户不喜欢香菜，吃到会很反感。"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default_dimensions=64) as server:
        yield server


def openai_settings(make_settings: MakeSettings, tmp_path, fake: FakeOpenAI):
    return make_settings(
        tmp_path, embedder="openai", embed_model="fake-embed", embed_base_url=fake.base_url,
        embed_api_key="sk-test", embed_timeout=2.0,
    )


async def missing(app: PocketMem) -> list[str]:
    async with app.store.read() as reader:
        return [row[2] for row in await reader.missing_vectors(100)]


async def wait_until_embedded(app: PocketMem, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while await missing(app):
        assert time.monotonic() < deadline, f"still without a vector: {await missing(app)}"
        await anyio.sleep(0.1)


@pytest.fixture
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_queue, "FIRST_DELAY", 0.05)
    monkeypatch.setattr(embed_queue, "MAX_DELAY", 0.2)


@pytest.fixture
async def openai_app(tmp_path, clock, fake, make_settings) -> AsyncIterator[PocketMem]:
    async with PocketMem(openai_settings(make_settings, tmp_path, fake), clock=clock) as pm:
        yield pm


@pytest.fixture
async def client(openai_app: PocketMem) -> AsyncIterator[Client]:
    async with Client(build_server(openai_app.settings, app=openai_app)) as c:
        yield c


# -- the embedding endpoint down ----------------------------------------------------------------------
async def test_embedder_down_single_word_message_recalls_by_keyword(client: Client, fake: FakeOpenAI):
    stored = await call(client, "add_memory", {"content": CORIANDER})
    assert stored["status"] == "stored"
    healthy = await call(client, "recall_memories", {"query": "香菜"})
    assert healthy["degraded"] is None

    fake.close()
    answer = await call(client, "recall_memories", {"query": "香菜能吃吗"})
    assert [m["id"] for m in answer["memories"]] == [stored["memory_id"]]
    assert answer["degraded"].startswith("keyword path")
    assert "embed" in answer["degraded"]
    unrelated = await call(client, "recall_memories", {"query": "明天去银行办卡"})
    assert unrelated["memories"] == []


async def test_write_while_endpoint_down_is_stored_searchable_and_embedded_later(
    client: Client, openai_app: PocketMem, fake: FakeOpenAI, quick_backoff: None
):
    await call(client, "add_memory", {"content": "用户每天早上喝两杯咖啡。"})
    fake.close()
    stored = await call(client, "add_memory", {"content": CORIANDER, "keywords": ["忌口"]})
    assert stored["status"] == "stored"
    assert "found by keyword" in stored["message"]
    assert await missing(openai_app) == [stored["memory_id"]]

    found = await call(client, "recall_memories", {"query": "这道菜里有香菜吗", "keywords": ["忌口"]})
    assert [m["id"] for m in found["memories"]] == [stored["memory_id"]]
    with anyio.fail_after(20):  # the queue tries, fails, and backs off
        while openai_app.embed_queue.state.failures < 1:  # noqa: ASYNC110 - the queue has no failure event
            await anyio.sleep(0.02)
    assert await missing(openai_app) == [stored["memory_id"]]

    fake.start()
    await wait_until_embedded(openai_app)
    async with openai_app.store.read() as reader:
        vectors = await reader.memory_vectors(USER, [stored["memory_id"]])
    assert len(vectors[stored["memory_id"]]) == 64
    assert openai_app.embed_queue.state.failures == 0
    healthy = await call(client, "recall_memories", {"query": "香菜能吃吗"})
    assert healthy["degraded"] is None


async def test_a_memory_waiting_for_its_vector_leaves_recall_whole(
    client: Client, openai_app: PocketMem, fake: FakeOpenAI
):
    """A row without a vector (stored while the endpoint was down, or written by an older version) is left out of
    the vector side; it never turns every recall into the keyword path."""
    kept = await call(client, "add_memory", {"content": "用户每天早上喝两杯美式咖啡。"})
    fake.close()
    waiting = await call(client, "add_memory", {"content": CORIANDER})
    fake.start()
    assert await missing(openai_app) == [waiting["memory_id"]]
    coffee = await call(client, "recall_memories", {"query": "我早上一般喝什么咖啡"})
    assert coffee["degraded"] is None and kept["memory_id"] in [m["id"] for m in coffee["memories"]]
    coriander = await call(client, "recall_memories", {"query": "香菜能吃吗", "keywords": ["香菜"]})
    assert coriander["degraded"] is None and [m["id"] for m in coriander["memories"]] == [waiting["memory_id"]]
    assert await missing(openai_app) == [waiting["memory_id"]]  # still waiting while both recalls ran


async def test_confirming_while_endpoint_down_stores_and_doctor_counts_the_wait(
    client: Client, openai_app: PocketMem, fake: FakeOpenAI
):
    pending = await call(client, "add_memory", {"content": CORIANDER, "confidence": 0.7})
    assert pending["status"] == "pending"
    fake.close()
    confirmed = await call(client, "confirm_pending", {"pending_id": pending["pending_id"], "action": "confirm"})
    assert confirmed["memory_id"] and await missing(openai_app) == [confirmed["memory_id"]]
    report = await openai_app.doctor()
    assert report["embedder"]["ok"] is False and report["embedder"]["waiting_for_vectors"] == 1


async def test_rows_without_vector_are_found_again_after_a_restart(
    tmp_path, clock, fake: FakeOpenAI, make_settings: MakeSettings
):
    settings = openai_settings(make_settings, tmp_path, fake)
    fake.close()  # down from the very start: the vector index does not even know its size yet
    async with PocketMem(settings, clock=clock) as first:
        ids = [
            (await first.writing.add(USER, request(text))).memory_id
            for text in (CORIANDER, "用户的猫叫小白。", "The user is learning the piano.")
        ]
        assert sorted(await missing(first)) == sorted(ids)
    fake.start()
    second = PocketMem(settings, clock=clock)
    async with Client(build_server(settings, app=second)) as client:
        await wait_until_embedded(second)
        answer = await call(client, "recall_memories", {"query": "我的猫叫什么名字", "keywords": ["猫", "小白"]})
        assert answer["degraded"] is None
        assert answer["memories"][0]["content"] == "用户的猫叫小白。"
    assert len(fake.requests_to("/embeddings")) >= 2


async def test_queue_backs_off_and_sets_aside_what_keeps_failing(openai_app: PocketMem, fake: FakeOpenAI):
    fake.close()
    stored = await openai_app.writing.add(USER, request(CORIANDER))
    queue: EmbedQueue = openai_app.embed_queue
    delays = []
    for _ in range(embed_queue.MAX_ATTEMPTS + 2):
        assert await queue.attempt() is False or stored.memory_id in queue.state.set_aside
        delays.append(queue.state.delay)
    assert delays[:4] == [1.0, 2.0, 4.0, 8.0]
    assert max(delays) <= embed_queue.MAX_DELAY
    assert stored.memory_id in queue.state.set_aside
    fake.start()
    assert await queue.attempt() is True  # nothing left to try until the next start
    assert await missing(openai_app) == [stored.memory_id]


async def test_a_patch_meanwhile_keeps_its_own_vector(openai_app: PocketMem, fake: FakeOpenAI):
    fake.close()
    stored = await openai_app.writing.add(USER, request(CORIANDER))
    fake.start()
    fresh = [9.0] * 64
    async with openai_app.store.write() as tx:
        await tx.write_vectors([(USER, stored.memory_id, fresh)], openai_app.embedder.tag)
    assert await openai_app.embed_queue.attempt() is True
    async with openai_app.store.read() as reader:
        vector = (await reader.memory_vectors(USER, [stored.memory_id]))[stored.memory_id]
    assert vector == pytest.approx(fresh)


def request(content: str):
    from pocketmem.service.writing.add_request import AddRequest

    return AddRequest(content=content)


# -- the keyword index down (SQLite file) ---------------------------------------------------------------
def drop_keyword_index(path) -> None:
    from pocketmem.store.sqlite.driver import sqlite_module

    module, _ = sqlite_module()
    conn = module.connect(str(path), isolation_level=None)
    try:
        conn.execute("drop table memories_fts_vocab")
        conn.execute("drop table memories_fts")
    finally:
        conn.close()


@pytest.fixture
async def hash_app(tmp_path, clock, make_settings) -> AsyncIterator[PocketMem]:
    async with PocketMem(make_settings(tmp_path), clock=clock) as pm:
        yield pm


async def test_keyword_index_gone_builtin_embedder_answers_from_vectors(hash_app: PocketMem):
    async with Client(build_server(hash_app.settings, app=hash_app)) as client:
        target = await call(client, "add_memory", {"content": CORIANDER})
        await call(client, "add_memory", {"content": "用户明天上午十点要去银行办信用卡。"})
        drop_keyword_index(hash_app.settings.db_path)
        answer = await call(client, "recall_memories", {"query": "香菜能吃吗"})
        assert [m["id"] for m in answer["memories"]] == [target["memory_id"]]
        assert answer["degraded"].startswith("vector path")
        assert "keyword index" in answer["degraded"]
    async with hash_app.store.read() as reader:
        events = await reader.list_events(USER, kinds=[EventKind.retrieval_fail], limit=10)
    assert events and "keyword index" in events[0].payload["error"]


async def test_keyword_index_gone_and_nothing_near_gives_the_card(hash_app: PocketMem):
    async with Client(build_server(hash_app.settings, app=hash_app)) as client:
        await call(client, "add_memory", {
            "content": "用户叫李雷，是一名后端工程师。", "scores": {"persistence": 1.0},
        })
        drop_keyword_index(hash_app.settings.db_path)
        answer = await call(client, "recall_memories", {"query": "周末天气怎么样"})
        assert answer["memories"] == []
        assert "李雷" in answer["injection"]
        assert answer["degraded"].startswith("user card only")


async def test_both_down_answers_with_the_card_core_memories(
    tmp_path, clock, fake: FakeOpenAI, make_settings: MakeSettings
):
    settings = openai_settings(make_settings, tmp_path, fake)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        await call(client, "add_memory", {"content": CORIANDER, "scores": {"persistence": 1.0}})
        fake.close()
        drop_keyword_index(settings.db_path)
        answer = await call(client, "recall_memories", {"query": "香菜能吃吗"})
        assert answer["memories"] == []
        assert "香菜" in answer["injection"]
        assert answer["degraded"].startswith("user card only")
        assert "embedder" in answer["degraded"] and "keyword index" in answer["degraded"]


def test_dropping_the_index_really_breaks_it(tmp_path, make_settings):
    """The fault the tests above inject is real: the keyword table is gone from the file."""
    import asyncio

    async def make() -> None:
        async with PocketMem(make_settings(tmp_path)) as pm:
            await pm.writing.add(USER, request(CORIANDER))

    asyncio.run(make())
    path = make_settings(tmp_path).db_path
    drop_keyword_index(path)
    with pytest.raises(sqlite3.OperationalError):
        sqlite3.connect(path).execute("select * from memories_fts")


# -- PostgreSQL ---------------------------------------------------------------------------------------
@pytest.mark.postgres_only
async def test_postgres_write_while_endpoint_down_then_embedded(
    client: Client, openai_app: PocketMem, fake: FakeOpenAI, quick_backoff: None
):
    fake.close()
    stored = await call(client, "add_memory", {"content": CORIANDER})
    assert stored["status"] == "stored"
    answer = await call(client, "recall_memories", {"query": "香菜能吃吗"})
    assert [m["id"] for m in answer["memories"]] == [stored["memory_id"]]
    assert answer["degraded"].startswith("keyword path")
    assert await missing(openai_app) == [stored["memory_id"]]
    fake.start()
    await wait_until_embedded(openai_app)
    async with openai_app.store.read() as reader:
        assert len((await reader.memory_vectors(USER, [stored["memory_id"]]))[stored["memory_id"]]) == 64


@pytest.mark.postgres_only
async def test_postgres_keyword_statistics_gone_builtin_embedder_answers_from_vectors(hash_app: PocketMem):
    import psycopg

    async with Client(build_server(hash_app.settings, app=hash_app)) as client:
        target = await call(client, "add_memory", {"content": CORIANDER})
        await call(client, "add_memory", {"content": "用户明天上午十点要去银行办信用卡。"})
        url = hash_app.settings.database_url.get_secret_value()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("drop table memory_term_counts cascade")
            conn.execute("drop table memory_user_term_counts cascade")
        answer = await call(client, "recall_memories", {"query": "香菜能吃吗"})
        assert [m["id"] for m in answer["memories"]] == [target["memory_id"]]
        assert answer["degraded"].startswith("vector path")


# -- the rule itself -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("failures", "path", "bar"),
    [
        ([], None, 0.4),
        (["EmbedderFailed"], "keyword path", 0.161),
        (["VectorIndexFailed"], "keyword path", 0.4),  # the shortlist still has its similarities
        (["VectorScoringFailed"], "keyword path", 0.161),
        (["KeywordIndexFailed"], "vector path", 0.4),
        (["EmbedderFailed", "KeywordIndexFailed"], "user card only", 0.4),
        (["StoreDamaged", "BookkeepingFailed"], None, 0.4),  # recall still has both kinds of evidence
    ],
)
def test_which_path_answers_and_its_bar(failures, path, bar):
    """The path follows from the failures' classes; the message a failure carries never matters."""
    from pocketmem.service.recall import fallback

    health = fallback.Health()
    for name in failures:
        health.fail(getattr(fallback, name)("keyword index: a message that names another part"))
    assert health.path == path
    assert fallback.threshold(0.4, health, lexical=False) == bar
    if path == "vector path":
        assert fallback.threshold(0.4, health, lexical=True) == 0.079
    assert fallback.threshold(0.4, health, lexical=False, core_lift=1.0) < bar  # a core memory's own bar
