"""The SQLite store's binary vector index: a shortlist by the vectors' signs, rescored with the full vectors.

On a real sqlite-vec file: the neighbours and their similarities are the exact search's, and a store made
with the earlier float index is given the binary one when it opens.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pocketmem.base.models import Category, Memory, Status
from pocketmem.core.scoring import fill_scores
from pocketmem.store.sqlite.store import SQLiteStore
from pocketmem.store.sqlite.tx import pack_vector
from pocketmem.store.types import IndexedText

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
    finally:
        await store.close()
    assert pack_vector(vectors[0])  # the full vectors stay in the memories rows
