"""`Store.ensure_vectors`: the vector index is created once, and asking again costs nothing.

It replaced a flag other modules set by hand; every write path now calls it before it stores a vector.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.service.writing.add_request import AddRequest

from .helpers import MakeSettings

pytestmark = [pytest.mark.anyio, pytest.mark.backends]


async def test_vector_index_is_prepared_once_and_kept(
    tmp_path: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, make_settings: MakeSettings
) -> None:
    settings = make_settings(tmp_path)
    calls: list[tuple[str, int]] = []
    async with PocketMem(settings, clock=clock) as app:
        prepare = type(app.store).prepare_vectors

        async def counting(self: Any, tag: str, dims: int) -> None:
            calls.append((tag, dims))
            await prepare(self, tag, dims)

        monkeypatch.setattr(type(app.store), "prepare_vectors", counting)
        tag, dims = app.embedder.tag, app.embedder.dimensions
        assert dims is not None
        for text in ("The user drinks oolong tea", "用户每天早上跑步五公里"):
            assert (await app.writing.add("global", AddRequest(content=text))).status == "stored"
        await app.store.ensure_vectors(tag, dims)
        assert calls == [(tag, dims)]  # prepared by the first write (opening writes nothing); the second found it
        assert await app.store.get_meta("embedder") == tag

    async with PocketMem(settings, clock=clock) as app:
        await app.store.ensure_vectors(tag, dims)
        assert (await app.writing.add("global", AddRequest(content="The user lives in Hangzhou"))).status == "stored"
    assert calls == [(tag, dims)]  # a store that records this embedder already has its index


async def test_a_store_without_an_index_prepares_it_at_the_first_vector(
    tmp_path: Path, clock: FixedClock, make_settings: MakeSettings
) -> None:
    # The store alone, not opened by the app: no embedder is recorded yet.
    fresh = PocketMem(make_settings(tmp_path), clock=clock)
    await fresh.store.open()
    try:
        assert await fresh.store.get_meta("embedder") is None
        await fresh.store.ensure_vectors("hash-test", 8)
        await fresh.store.ensure_vectors("hash-test", 8)
        assert await fresh.store.get_meta("embedder") == "hash-test"
        assert await fresh.store.get_meta("dimensions") == "8"
    finally:
        await fresh.store.close()
