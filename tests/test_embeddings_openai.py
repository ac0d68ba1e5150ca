"""OpenAICompatibleEmbedder against a local fake of the OpenAI HTTP API (tests/fake_openai.py)."""

from __future__ import annotations

import math
import socket
from collections.abc import AsyncIterator, Iterator

import pytest

from pocketmem.base.errors import ProviderUnavailable
from pocketmem.providers.embeddings.openai_compat import OpenAICompatibleEmbedder
from tests.fake_openai import FakeOpenAI, Reply, fake_vector

MODEL = "text-embedding-3-small"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default_dimensions=8) as server:
        yield server


@pytest.fixture
async def make_embedder(fake: FakeOpenAI) -> AsyncIterator:
    """Builds embedders pointed at the fake and closes them all afterwards."""
    made: list[OpenAICompatibleEmbedder] = []

    def make(**overrides: object) -> OpenAICompatibleEmbedder:
        options: dict = {"base_url": fake.base_url, "api_key": "sk-test-123", "timeout": 5.0}
        options.update(overrides)
        embedder = OpenAICompatibleEmbedder(MODEL, **options)  # type: ignore[arg-type]
        made.append(embedder)
        return embedder

    yield make
    for embedder in made:
        await embedder.aclose()


def _norm(vector: list[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


def _unit(vector: list[float]) -> list[float]:
    n = _norm(vector)
    return [x / n for x in vector]


# -- vectors ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_vectors_are_unit_length_in_input_order(fake: FakeOpenAI, make_embedder) -> None:
    embedder = make_embedder()
    texts = ["alpha", "beta", "用户喜欢喝乌龙茶", "gamma"]
    vectors = await embedder.embed_many(texts)

    assert len(vectors) == len(texts)
    for text, vector in zip(texts, vectors, strict=True):
        assert _norm(vector) == pytest.approx(1.0)
        # the fake's vector for that very text (float32 on the wire, hence the tolerance)
        assert vector == pytest.approx(_unit(fake_vector(text, 8)), abs=1e-6)
    assert len({tuple(v) for v in vectors}) == len(texts)


@pytest.mark.anyio
async def test_dimensions_learned_from_first_answer(fake: FakeOpenAI, make_embedder) -> None:
    embedder = make_embedder()
    assert embedder.dimensions is None
    vector = await embedder.embed("hello")
    assert len(vector) == 8
    assert embedder.dimensions == 8
    [request] = fake.requests_to("/embeddings")
    assert "dimensions" not in request.json
    assert request.json["model"] == MODEL
    assert request.json["input"] == ["hello"]


@pytest.mark.anyio
async def test_requested_dimensions_are_sent(fake: FakeOpenAI, make_embedder) -> None:
    embedder = make_embedder(dimensions=16)
    assert embedder.dimensions == 16
    vectors = await embedder.embed_many(["one", "two"])
    assert [len(v) for v in vectors] == [16, 16]
    [request] = fake.requests_to("/embeddings")
    assert request.json["dimensions"] == 16


@pytest.mark.anyio
async def test_wrong_vector_size_is_refused(fake: FakeOpenAI, make_embedder) -> None:
    fake.vector_fn = lambda text, dims: fake_vector(text, 4)  # a server that ignores `dimensions`
    embedder = make_embedder(dimensions=16)
    with pytest.raises(ProviderUnavailable, match=r"size 4, expected 16"):
        await embedder.embed("one")


@pytest.mark.anyio
async def test_vector_size_change_between_answers_is_refused(fake: FakeOpenAI, make_embedder) -> None:
    embedder = make_embedder()
    await embedder.embed("first")
    fake.default_dimensions = 12
    with pytest.raises(ProviderUnavailable, match=r"size 12, expected 8"):
        await embedder.embed("second")


@pytest.mark.anyio
async def test_count_mismatch_is_refused(fake: FakeOpenAI, make_embedder) -> None:
    one = {"object": "embedding", "index": 0, "embedding": [1.0, 0.0]}
    fake.fail_embeddings(200, body={"object": "list", "data": [one], "model": MODEL, "usage": {}})
    embedder = make_embedder()
    with pytest.raises(ProviderUnavailable, match=r"returned 1 vectors with indexes \[0\] for 2 texts"):
        await embedder.embed_many(["a", "b"])


@pytest.mark.anyio
async def test_empty_input_sends_nothing(fake: FakeOpenAI, make_embedder) -> None:
    assert await make_embedder().embed_many([]) == []
    assert fake.requests == []


# -- requests ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_batches_follow_batch_size(fake: FakeOpenAI, make_embedder) -> None:
    embedder = make_embedder(batch_size=2)
    texts = [f"text {i}" for i in range(5)]
    vectors = await embedder.embed_many(texts)

    requests = fake.requests_to("/embeddings")
    assert [len(r.json["input"]) for r in requests] == [2, 2, 1]
    assert [t for r in requests for t in r.json["input"]] == texts
    for text, vector in zip(texts, vectors, strict=True):
        assert vector == pytest.approx(_unit(fake_vector(text, 8)), abs=1e-6)


@pytest.mark.anyio
async def test_api_key_is_sent_as_bearer_token(fake: FakeOpenAI, make_embedder) -> None:
    await make_embedder(api_key="sk-test-123").embed("x")
    [request] = fake.requests
    assert request.path == "/v1/embeddings"
    assert request.headers["authorization"] == "Bearer sk-test-123"


# -- failures ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_server_error_is_provider_unavailable(fake: FakeOpenAI, make_embedder) -> None:
    fake.fail_embeddings(500, times=5)
    embedder = make_embedder()
    with pytest.raises(ProviderUnavailable) as caught:
        await embedder.embed("x")
    message = str(caught.value)
    assert fake.base_url in message
    assert "HTTP 500" in message
    assert MODEL in message
    # the client is built with max_retries=1: one retry on 5xx, then give up
    assert len(fake.requests_to("/embeddings")) == 2


@pytest.mark.anyio
async def test_server_error_once_is_retried(fake: FakeOpenAI, make_embedder) -> None:
    fake.fail_embeddings(503, times=1)
    vector = await make_embedder().embed("x")
    assert len(vector) == 8
    assert len(fake.requests_to("/embeddings")) == 2


@pytest.mark.anyio
async def test_unauthorized_is_provider_unavailable(fake: FakeOpenAI, make_embedder) -> None:
    fake.fail_embeddings(401, times=5)
    with pytest.raises(ProviderUnavailable) as caught:
        await make_embedder(api_key="sk-wrong").embed("x")
    message = str(caught.value)
    assert fake.base_url in message
    assert "HTTP 401" in message
    assert len(fake.requests_to("/embeddings")) == 1  # 4xx is not retried


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.anyio
async def test_unreachable_endpoint_is_provider_unavailable() -> None:
    base_url = f"http://127.0.0.1:{_closed_port()}/v1"
    embedder = OpenAICompatibleEmbedder(MODEL, base_url=base_url, api_key="sk-test", timeout=5.0)
    try:
        with pytest.raises(ProviderUnavailable, match="cannot reach") as caught:
            await embedder.embed("x")
        assert base_url in str(caught.value)
    finally:
        await embedder.aclose()


@pytest.mark.anyio
async def test_stopped_server_is_provider_unavailable(make_embedder) -> None:
    with FakeOpenAI() as gone:
        base_url = gone.base_url
    with pytest.raises(ProviderUnavailable, match="cannot reach"):
        await make_embedder(base_url=base_url).embed("x")


@pytest.mark.anyio
async def test_slow_answer_is_a_timeout(fake: FakeOpenAI, make_embedder) -> None:
    fake.embedding_delay = 2.0
    with pytest.raises(ProviderUnavailable, match=r"did not answer within 0\.5s") as caught:
        await make_embedder(timeout=0.5).embed("x")
    assert fake.base_url in str(caught.value)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "body",
    [
        {"object": "list", "data": [], "model": MODEL, "usage": {}},
        {"object": "list", "data": None, "model": MODEL, "usage": {}},
        {"error": {"message": "quota", "type": "error"}},
        {"object": "list", "data": [{"object": "embedding", "index": 0}], "model": MODEL, "usage": {}},
        {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [float("nan"), 1.0]}],
         "model": MODEL, "usage": {}},
    ],
)
async def test_malformed_success_is_provider_unavailable(fake: FakeOpenAI, make_embedder, body) -> None:
    fake.fail_embeddings(200, body=body)
    with pytest.raises(ProviderUnavailable, match="malformed|indexes|NaN"):
        await make_embedder().embed("x")


# -- identity ---------------------------------------------------------------------------------


def test_tag_names_model() -> None:
    embedder = OpenAICompatibleEmbedder(MODEL, base_url="http://127.0.0.1:9/v1", api_key=None)
    assert embedder.tag == f"openai:{MODEL}"
    assert embedder.dimensions is None


def test_tag_names_requested_dimensions() -> None:
    embedder = OpenAICompatibleEmbedder(MODEL, base_url="http://127.0.0.1:9/v1", api_key=None, dimensions=256)
    assert embedder.tag == f"openai:{MODEL}@256"
    assert embedder.dimensions == 256


def test_endpoint_defaults_to_openai() -> None:
    embedder = OpenAICompatibleEmbedder(MODEL, base_url=None, api_key=None)
    assert embedder.endpoint == "https://api.openai.com/v1"


# -- the fake's chat endpoint (used by extraction tests) --------------------------------------


@pytest.mark.anyio
async def test_fake_chat_answers_from_its_script(fake: FakeOpenAI) -> None:
    import openai

    fake.script_chat("first", Reply(status=429, body={"error": {"message": "slow down"}}), "third")
    client = openai.AsyncOpenAI(api_key="sk-chat", base_url=fake.base_url, max_retries=0)
    try:
        messages = [{"role": "user", "content": "hi"}]
        answer = await client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
        assert answer.choices[0].message.content == "first"
        with pytest.raises(openai.RateLimitError):
            await client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
        answer = await client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
        assert answer.choices[0].message.content == "third"
        with pytest.raises(openai.InternalServerError):  # script exhausted
            await client.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
    finally:
        await client.close()
    requests = fake.requests_to("/chat/completions")
    assert len(requests) == 4
    assert requests[0].json["messages"] == messages
    assert requests[0].headers["authorization"] == "Bearer sk-chat"


@pytest.mark.anyio
async def test_a_store_on_an_openai_compatible_endpoint(tmp_path, make_settings) -> None:
    """The whole write/read path on a remote embedder: the index is sized by the first answer."""
    from pocketmem.app import PocketMem
    from pocketmem.base.clock import FixedClock
    from pocketmem.service.recall.retrieval import RecallRequest
    from pocketmem.service.writing.add_request import AddRequest
    from tests.helpers import START

    with FakeOpenAI(default_dimensions=24) as fake:
        # The fake's vectors carry no meaning (semantic scores ~0), so only keyword evidence can pass.
        settings = make_settings(
            tmp_path, embedder="openai", embed_model=MODEL, embed_base_url=fake.base_url, relevance_threshold=0.3
        )
        async with PocketMem(settings, clock=FixedClock(START)) as app:
            added = await app.writing.add("global", AddRequest(content="用户不喜欢香菜", keywords=["香菜"]))
            result = await app.retrieval.recall("global", RecallRequest(query="香菜", keywords=["香菜"]))
            assert [m.id for m in result.memories] == [added.memory_id]
            assert await app.store.get_meta("embedder") == f"openai:{MODEL}"
            assert await app.store.get_meta("dimensions") == "24"
        fake.fail_embeddings(500, times=100)
        async with PocketMem(settings, clock=FixedClock(START)) as app:
            degraded = await app.retrieval.recall("global", RecallRequest(query="香菜"))
            assert degraded.degraded and "embedder" in degraded.degraded
            assert [m.id for m in degraded.memories] == [added.memory_id]
