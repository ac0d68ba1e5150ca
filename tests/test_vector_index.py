"""The SQLite store's binary vector index: a shortlist by the vectors' signs, rescored with the full vectors.

On a real sqlite-vec file: the neighbours and their similarities are the exact search's, a store made with the
earlier float index is given the binary one when it opens, and a stored vector sqlite-vec cannot read (cut short,
text) is left out of the vector side alone, listed by the doctor and cleared by `--repair` for the embed queue.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.models import Category, Memory, Status
from pocketmem.core.scoring import fill_scores
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.sqlite.store import SQLiteStore
from pocketmem.store.sqlite.tx import pack_vector
from pocketmem.store.types import IndexedText

from .helpers import START, Backend, NeighbourSearchingEmbedder, damage

pytestmark = pytest.mark.anyio
DIMS = 64
USER = "u"
NOW = datetime(2026, 11, 1, tzinfo=UTC)


def unit(values: list[float]) -> list[float]:
    norm = math.hypot(*values)
    return [v / norm for v in values]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def memory(i: int) -> Memory:
    return Memory(
        id=f"m{i:04d}", user_id=USER, content=f"memory {i}", category=Category.fact, keywords=[],
        scores=fill_scores(Category.fact, None),
        info_importance=0.5, time_coef=1.0, importance=0.5, confidence=1.0, source="test", created_at=NOW,
        updated_at=NOW, valid_from=NOW, status=Status.active, content_hash=f"h{i}", embed_model="test",
    )


async def filled(path: Path, vectors: list[list[float]]) -> SQLiteStore:
    store = SQLiteStore(path)
    await store.open()
    await store.ensure_vectors("test", DIMS)
    async with store.write() as tx:
        await tx.ensure_user(USER, NOW)
        await tx.import_memories([(memory(i), v, IndexedText("", "")) for i, v in enumerate(vectors)])
    return store


async def test_binary_index_finds_the_exact_neighbours_with_their_exact_similarities(tmp_path: Path) -> None:
    # 80 topics of 10 memories each, as an encoder places memories about one thing near each other.
    rnd = random.Random(25)
    topics = [[rnd.gauss(0, 1) for _ in range(DIMS)] for _ in range(80)]
    vectors = [unit([x + rnd.gauss(0, 0.5) for x in topic]) for topic in topics for _ in range(10)]
    store = await filled(tmp_path / "memory.db", vectors)
    try:
        kept = total = 0
        for q in range(30):
            # A question near one memory (a reworded fact), as recall asks.
            query = unit([x + rnd.gauss(0, 0.05) for x in vectors[q * 7]])
            exact = sorted(range(len(vectors)), key=lambda i: -cosine(query, vectors[i]))[:10]
            async with store.read() as reader:
                found = await reader.vector_neighbours(USER, query, 10, (Status.active,))
            assert found[0][0] == f"m{exact[0]:04d}"  # the nearest is always found
            for mid, similarity in found:  # rescored in full precision: the exact cosine
                assert similarity == pytest.approx(cosine(query, vectors[int(mid[1:])]), abs=1e-5)
            assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
            kept += len({f"m{i:04d}" for i in exact} & {mid for mid, _ in found})
            total += 10
        assert kept / total >= 0.95
    finally:
        await store.close()


async def test_a_store_with_the_float_index_gets_the_binary_one_when_it_opens(tmp_path: Path) -> None:
    rnd = random.Random(7)
    vectors = [unit([rnd.gauss(0, 1) for _ in range(DIMS)]) for _ in range(50)]
    path = tmp_path / "memory.db"
    store = await filled(path, vectors)
    async with store.write() as tx:  # as a store written before the binary index was
        await tx.execute("drop table memory_vectors")
        await tx.execute(
            "create virtual table memory_vectors using vec0 (user_id text partition key, status text, "
            f"embedding float[{DIMS}] distance_metric=cosine)"
        )
        await tx.execute(
            "insert into memory_vectors (rowid, user_id, status, embedding) "
            "select rowid, user_id, status, embedding from memories"
        )
        await tx.execute("delete from schema_migrations where name = 'm014_binary_vector_index'")
    await store.close()

    store = SQLiteStore(path)
    await store.open()
    try:
        async with store.read() as reader:
            (definition,) = await reader.fetch_one("select sql from sqlite_master where name = 'memory_vectors'")
            found = await reader.vector_neighbours(USER, vectors[3], 5, (Status.active,))
        assert f"bit[{DIMS}]" in definition
        assert found[0] == ("m0003", pytest.approx(1.0, abs=1e-5))
        assert (await store.health())["vector_rows"] == len(vectors)
        # recorded, so a release that checks the records and lacks this change refuses the store
        assert (await store.health())["schema"] == "m014_binary_vector_index"
    finally:
        await store.close()
    assert pack_vector(vectors[0])  # the full vectors stay in the memories rows


@pytest.mark.parametrize("stored", [b"\x01\x02\x03", "hello", b"\x00" * 8])
async def test_a_vector_sqlite_vec_cannot_read_is_left_out_of_the_vector_side_and_repair_clears_it(
    tmp_path: Path, stored: object
) -> None:
    settings = Backend().make_settings(tmp_path)
    facts = ("用户住在杭州", "用户的猫叫小白", "用户每周三去游泳")
    async with PocketMem(settings, clock=FixedClock(START), embedder=NeighbourSearchingEmbedder()) as app:
        ids = [(await app.writing.add(USER, AddRequest(content=fact))).memory_id for fact in facts]
    damage(settings.db_path, "update memories set embedding = ? where id = ?", stored, ids[0])

    async with PocketMem(settings, clock=FixedClock(START), embedder=NeighbourSearchingEmbedder()) as app:
        for query, wanted in (("小白", ids[1]), ("游泳", ids[2]), ("杭州", ids[0])):  # the last by its words
            answer = await app.retrieval.recall(USER, RecallRequest(query=query))
            assert answer.degraded is None and wanted in [hit.id for hit in answer.memories], answer
        report = await app.doctor()
        assert report["store"]["bad_vectors"] == 1 and report["problems"] == [
            "1 of 3 memories keep a vector that cannot be read (not a float32 vector of the store's size): recall "
            "leaves them out of its vector side; run `pocketmem doctor --repair` (it clears them, and `pocketmem "
            "serve` embeds them again)"
        ]
        repaired = await app.doctor(repair=True)
        assert repaired["ok"] and repaired["repaired"][0].startswith("1 memory kept a vector that could not be read")
        assert (await app.doctor())["embedder"]["waiting_for_vectors"] == 1
        assert await app.embed_queue.run_once() == 1  # what `serve` runs in the background
        report = await app.doctor()
        assert report["ok"] and report["store"]["bad_vectors"] == 0
        assert report["embedder"]["waiting_for_vectors"] == 0
