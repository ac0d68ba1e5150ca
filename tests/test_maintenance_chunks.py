"""Maintenance's rescore works in bounded chunks and lets go of the write lock between them.

A first pass over a large store rewrites many scores; an add or a recall made meanwhile must not wait
for the whole pass. Checked with events, not timings: the add is started once the pass has written its
first chunk, and must be stored while the pass still has chunks to go.
"""

from __future__ import annotations

import json

import anyio
import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.models import Category
from pocketmem.core.scoring import fill_scores, importance
from pocketmem.core.text import content_hash
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.transfer.exporting import FORMAT, VERSION
from pocketmem.service.upkeep import maintenance
from pocketmem.service.writing.add_request import AddRequest

from .helpers import START

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"
SIZE = 2_000


def export_lines(size: int) -> list[str]:
    lines = [json.dumps({"type": "header", "format": FORMAT, "version": VERSION})]
    scores = fill_scores(Category.fact, None)
    info, coef, current = importance(scores, START, START)
    for i in range(size):
        content = f"记录{i}：用户在第{i}天读了第{i * 7 % 997}页的书"
        lines.append(json.dumps({
            "type": "memory", "id": f"{i:032x}", "user_id": USER, "content": content, "category": "fact",
            "keywords": [], "scores": scores.model_dump(), "info_importance": info, "time_coef": coef,
            "importance": current, "confidence": 1.0, "source": "test", "created_at": START.isoformat(),
            "updated_at": START.isoformat(), "valid_from": START.isoformat(), "use_count": 0, "status": "active",
            "content_hash": content_hash(content), "embed_model": "hash",
        }, ensure_ascii=False))
    return lines


@pytest.fixture
async def big(tmp_path, make_settings) -> PocketMem:
    clock = FixedClock(START)
    app = PocketMem(make_settings(tmp_path, max_active=SIZE * 2), clock=clock)
    await app.open(serving=True)  # a server's maintenance pass: the server took the store for its embedder
    try:
        report = await app.exporter.import_lines(export_lines(SIZE))
        assert not report.refused, report.refused
        clock.advance(days=40)  # every stored score is now stale
        yield app
    finally:
        await app.close()


async def test_an_add_and_a_recall_made_during_a_long_rescore_finish_before_it(big, monkeypatch):
    chunks: list[int] = []  # memories rescored per chunk written
    first_chunk = anyio.Event()
    store_class = type(big.store)
    original = store_class.write

    def spying_write(self, durable: bool = True, *, user_id: str | None = None):
        return _Spy(original(self, durable, user_id=user_id), chunks, first_chunk)

    monkeypatch.setattr(store_class, "write", spying_write)
    seen: dict[str, int] = {}
    finished = anyio.Event()

    async def maintain() -> None:
        report = await big.maintenance.run()
        assert report.users[0].rescored == SIZE
        finished.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(maintain)
        await first_chunk.wait()
        stored = await big.writing.add(USER, AddRequest(content="用户下周二去上海出差"))
        assert stored.status == "stored"
        seen["add"] = len(chunks)
        await big.retrieval.recall(USER, RecallRequest(query="上海出差", record=False))
        seen["recall"] = len(chunks)
        assert not finished.is_set(), "the add and the recall waited for the whole pass"
    assert len(chunks) > seen["recall"] >= seen["add"] >= 1, (chunks, seen)
    assert max(chunks) <= maintenance.RESCORE_BATCH


class _Spy:
    """A write transaction that notes, once it commits, how many memories the pass rescored in it."""

    def __init__(self, inner, chunks: list[int], first_chunk: anyio.Event) -> None:
        self.inner, self.chunks, self.first_chunk = inner, chunks, first_chunk
        self.tx = None
        self.rescored = 0

    async def __aenter__(self):
        self.tx = await self.inner.__aenter__()
        original = self.tx.update_scores

        async def update_scores(user_id, scores):
            self.rescored += len(scores)
            return await original(user_id, scores)

        self.tx.update_scores = update_scores
        return self.tx

    async def __aexit__(self, *exc):
        result = await self.inner.__aexit__(*exc)
        if self.rescored:
            self.chunks.append(self.rescored)
            self.first_chunk.set()
        return result


async def test_a_pass_with_no_score_to_change_takes_the_write_lock_for_no_chunk(big, monkeypatch):
    first = await big.maintenance.run()
    assert first.users[0].rescored == SIZE
    store_class = type(big.store)
    original_write, original_rescore = store_class.write, big.maintenance._rescore  # noqa: SLF001
    writes: list[str] = []
    step: list[str] = []

    def counting_write(self, durable: bool = True, *, user_id: str | None = None):
        writes.extend(step)
        return original_write(self, durable, user_id=user_id)

    async def rescore(user_id, now):
        step.append("rescore")
        try:
            return await original_rescore(user_id, now)
        finally:
            step.clear()

    monkeypatch.setattr(store_class, "write", counting_write)
    monkeypatch.setattr(big.maintenance, "_rescore", rescore)
    again = await big.maintenance.run()  # the same instant: nothing moved
    assert again.users[0].rescored == 0 and not again.changed
    assert writes == []  # SIZE // RESCORE_BATCH chunks read, none written
