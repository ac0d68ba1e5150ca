"""remember_conversation shows the model the related memories that recall finds for the conversation and the
agent's hints (issue 11, item 9): an update such as 我上个月搬到杭州了 meets 用户住在北京 when a keyword, the
note or an earlier version connects them, so the model can UPDATE instead of adding a contradiction."""

from __future__ import annotations

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.mcp.server import build_server
from pocketmem.service.writing.add_request import AddRequest

from .scripted_llm import ScriptedSampler, labels, ops

pytestmark = pytest.mark.anyio
USER = "global"
MOVED = [{"role": "user", "content": "我上个月搬到杭州了"}]
HOME = "用户住在北京"


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


async def add(app: PocketMem, content: str, **kw) -> str:
    result = await app.writing.add(USER, AddRequest(content=content, **kw))
    assert result.status == "stored", result
    return result.memory_id


async def remember(app: PocketMem, mode: str, messages, answer, **args) -> tuple[dict, str]:
    sampler = ScriptedSampler([answer])
    async with Client(build_server(app.settings, app=app), mode=mode, sampling_callback=sampler) as client:
        result = await client.call_tool("remember_conversation", {"messages": messages, **args})
    assert not result.is_error, result.content[0].text
    return result.structured_content, sampler.requests[0].messages[0].content.text  # type: ignore[union-attr]


def update_home(prompt: str) -> str:
    return ops({"op": "UPDATE", "memory_id": labels(prompt)[HOME], "content": "用户住在杭州", "category": "fact",
                "confidence": 0.95, "reason": "moved"})


@pytest.fixture
async def home(app: PocketMem) -> str:
    await add(app, "用户喜欢喝乌龙茶", category="preference")
    return await add(app, HOME)


@pytest.mark.parametrize(
    "hints",
    [
        {"keywords": ["北京"]},
        {"keywords": ["搬家", "北京", "住址", "城市", "租房"]},
        {"note": "用户以前住在北京，现在搬家了"},
    ],
    ids=["keyword", "many-keywords", "note"],
)
async def test_hints_connect_a_move_to_the_old_home(app: PocketMem, mode: str, home: str, hints: dict):
    result, prompt = await remember(app, mode, MOVED, update_home, hints=hints)
    assert HOME in labels(prompt)
    assert "用户喜欢喝乌龙茶" not in labels(prompt)
    assert [i["status"] for i in result["items"]] == ["stored"]
    assert result["items"][0]["superseded"] == home


async def test_without_any_connection_the_model_is_not_shown_unrelated_memories(app: PocketMem, mode: str, home: str):
    result, prompt = await remember(app, mode, MOVED, ops({"op": "SKIP", "reason": "nothing known"}))
    assert labels(prompt) == {}


async def test_a_connection_through_an_earlier_version_brings_the_current_one(app: PocketMem, mode: str):
    old = await add(app, "用户住在北京朝阳区")
    current = await add(app, "用户上个月去了南京工作", supersedes=old)
    result, prompt = await remember(
        app, mode, [{"role": "user", "content": "朝阳区那边的朋友来看我了"}], ops({"op": "SKIP", "reason": "-"})
    )
    assert "用户上个月去了南京工作" in labels(prompt)
    assert "用户住在北京朝阳区" not in labels(prompt)
    assert current
