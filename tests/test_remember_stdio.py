"""remember_conversation against `pocketmem serve` as a subprocess over stdio, the way hosts start it:
once with the client's model (MCP sampling, no API key), once with an OpenAI-compatible endpoint."""

from __future__ import annotations

import pytest
from mcp import Client

from tests.fake_openai import FakeOpenAI

from .helpers import server_params
from .scripted_llm import ScriptedSampler, labels, ops

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

MESSAGES = [
    {"role": "user", "content": "我从北京搬到杭州了，另外我不吃香菜。"},
    {"role": "assistant", "content": "好的，记住了。"},
]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sampling_over_stdio(tmp_path, mode):
    home = tmp_path / "home"
    async with Client(server_params(home), mode=mode) as client:
        added = await client.call_tool("add_memory", {"content": "用户住在北京"})
        old = added.structured_content["memory_id"]
    sampler = ScriptedSampler([lambda prompt: ops(
        {"op": "UPDATE", "memory_id": labels(prompt)["用户住在北京"], "content": "用户住在杭州", "confidence": 0.95},
        {"op": "ADD", "content": "用户不吃香菜", "category": "preference", "confidence": 0.95, "keywords": ["香菜"]},
    )])
    async with Client(server_params(home), mode=mode, sampling_callback=sampler) as client:
        result = await client.call_tool("remember_conversation", {"messages": MESSAGES})
        assert not result.is_error, result.content[0].text
        statuses = [(i["op"], i["status"]) for i in result.structured_content["items"]]
        assert statuses == [("UPDATE", "stored"), ("ADD", "stored")]
        assert result.structured_content["items"][0]["superseded"] == old
        recalled = await client.call_tool("recall_memories", {"query": "晚饭放香菜吗"})
        assert recalled.structured_content["injection"] == "今天的对话摘要“用户不吃香菜”"
        history = await client.call_tool("list_memories", {"status": "superseded"})
        assert [m["id"] for m in history.structured_content["items"]] == [old]


async def test_an_openai_compatible_endpoint_over_stdio(tmp_path):
    home = tmp_path / "home"
    with FakeOpenAI() as fake:
        fake.script_chat(ops({"op": "ADD", "content": "用户不吃香菜", "category": "preference", "confidence": 0.95}))
        env = {"POCKETMEM_LLM_BASE_URL": fake.base_url, "POCKETMEM_LLM_MODEL": "local-model",
               "POCKETMEM_LLM_API_KEY": "sk-stdio"}
        async with Client(server_params(home, **env), mode="legacy") as client:
            result = await client.call_tool("remember_conversation", {"messages": MESSAGES})
        assert not result.is_error, result.content[0].text
        assert result.structured_content["source"] == "openai" and result.structured_content["model"] == "local-model"
        [request] = fake.requests_to("/chat/completions")
        assert request.headers["authorization"] == "Bearer sk-stdio"


async def test_without_any_model_over_stdio_the_error_says_what_to_do(tmp_path):
    async with Client(server_params(tmp_path / "home"), mode="legacy") as client:
        result = await client.call_tool("remember_conversation", {"messages": MESSAGES})
    assert result.is_error and "extract_memories" in result.content[0].text
