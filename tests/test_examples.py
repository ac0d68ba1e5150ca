"""The examples/ agents run for real against a pocketmem subprocess; only the model is scripted (the
framework's own test model returns fixed tool calls): recall before answering, remember after."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("agents", reason="the examples need openai-agents: pip install -e '.[examples]'")

from agents import set_tracing_disabled  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXAMPLE = EXAMPLES / "openai_agents" / "memory_agent.py"


def load_example(path: Path = EXAMPLE):
    spec = importlib.util.spec_from_file_location(f"example_{path.parent.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tool_outputs(call) -> list[dict]:
    """What the MCP tools answered, as the model sees it in its input."""
    items = call.input if isinstance(call.input, list) else []
    out = []
    for item in items:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            text = item["output"] if isinstance(item["output"], str) else json.dumps(item["output"])
            out.append(json.loads(text))
    return out


@pytest.fixture(autouse=True)
def _no_tracing():
    set_tracing_disabled(True)


async def test_the_agent_recalls_before_answering_and_remembers_after(tmp_path):
    example = load_example()
    env = {"POCKETMEM_HOME": str(tmp_path / "home"), "POCKETMEM_TZ": "Asia/Shanghai",
           "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.path.dirname(sys.executable)}
    seen: dict[str, list[dict]] = {}

    def after_first_recall(call):
        seen["first"] = tool_outputs(call)
        return [function_call("add_memory", {"content": "用户不吃香菜", "category": "preference",
                                             "keywords": ["香菜", "coriander", "忌口"]}, call_id="add-1")]

    first = ScriptedModel([
        [function_call("recall_memories", {"query": "我不吃香菜，记住哦"}, call_id="recall-1")],
        ModelStep.respond(after_first_recall),
        [assistant_message("好的，记住了：你不吃香菜。")],
    ])
    assert "记住了" in await example.chat("我不吃香菜，记住哦", model=first, env=env)
    first.assert_complete()
    assert seen["first"][0]["memories"] == []  # nothing known yet
    stored = tool_outputs(first.last_call)[-1]
    assert stored["status"] == "stored"

    def answer_with_memory(call):
        recalled = tool_outputs(call)[-1]
        seen["second"] = [recalled]
        avoid = "，不放香菜" if "香菜" in recalled["injection"] else ""
        return [assistant_message(f"来一碗番茄牛腩面{avoid}。")]

    second = ScriptedModel([
        [function_call("recall_memories", {"query": "晚饭推荐点什么？", "keywords": ["饮食", "忌口", "不吃"]},
                       call_id="recall-2")],
        ModelStep.respond(answer_with_memory),
    ])
    reply = await example.chat("晚饭推荐点什么？", model=second, env=env)
    second.assert_complete()
    recalled = seen["second"][0]
    assert [m["id"] for m in recalled["memories"]] == [stored["memory_id"]]
    assert recalled["injection"].startswith("今天的对话摘要“用户不吃香菜")
    assert reply == "来一碗番茄牛腩面，不放香菜。"
    # The model saw the tools pocketmem offers, described for an LLM.
    names = {t.name for t in second.first_call.tools}
    assert {"recall_memories", "add_memory"} <= names


def _env(tmp_path: Path) -> dict[str, str]:
    return {"POCKETMEM_HOME": str(tmp_path / "home"), "POCKETMEM_TZ": "Asia/Shanghai",
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.path.dirname(sys.executable)}


async def test_the_pydantic_ai_agent_recalls_before_answering_and_remembers_after(tmp_path):
    pytest.importorskip("pydantic_ai", reason="this example needs pydantic-ai-slim[mcp]: pip install -e '.[examples]'")
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    example = load_example(EXAMPLES / "pydantic_ai" / "memory_agent.py")
    results: list[tuple[str, dict]] = []

    def returns(messages) -> list[ToolReturnPart]:
        return [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]

    def first_turn(messages, info):
        done = returns(messages)
        if not done:  # recall before answering
            return ModelResponse(parts=[ToolCallPart("recall_memories", {"query": "我下周一要去上海出差"})])
        if len(done) == 1:  # then remember what the user said
            results.append(("recall", done[0].content))
            return ModelResponse(parts=[ToolCallPart("add_memory", {
                "content": "用户下周一去上海出差", "category": "event", "keywords": ["上海", "出差", "行程"]})])
        results.append(("add", done[1].content))
        return ModelResponse(parts=[TextPart("好的，祝出差顺利！")])

    def second_turn(messages, info):
        done = returns(messages)
        if not done:
            return ModelResponse(parts=[ToolCallPart("recall_memories", {
                "query": "下周有什么安排？", "keywords": ["行程", "出差", "安排"]})])
        recalled = done[0].content
        results.append(("recall", recalled))
        trip = "，下周一去上海出差" if "上海" in recalled["injection"] else ""
        return ModelResponse(parts=[TextPart(f"你记得的安排{trip}。")])

    assert await example.chat("我下周一要去上海出差", model=FunctionModel(first_turn), env=_env(tmp_path)) == \
        "好的，祝出差顺利！"
    reply = await example.chat("下周有什么安排？", model=FunctionModel(second_turn), env=_env(tmp_path))
    (_, empty), (_, added), (_, recalled) = results
    assert empty["memories"] == [] and added["status"] == "stored"
    assert [m["id"] for m in recalled["memories"]] == [added["memory_id"]]
    assert reply == "你记得的安排，下周一去上海出差。"


@pytest.mark.parametrize("example", ["openai_agents", "pydantic_ai"])
def test_each_example_runs_from_the_command_line_with_scripted(tmp_path, example):
    """As the docstring says to run it: no model, no network; the second turn recalls what the first stored."""
    if example == "pydantic_ai":
        pytest.importorskip("pydantic_ai", reason="needs pydantic-ai-slim[mcp]: pip install -e '.[examples]'")
    script = EXAMPLES / example / "memory_agent.py"
    assert "--scripted" in script.read_text(encoding="utf-8").split('"""')[1]  # the docstring says how

    def turn(message: str) -> str:
        out = subprocess.run([sys.executable, str(script), "--scripted", message], env=_env(tmp_path),
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip()

    assert turn("我不吃香菜，记住哦") == "[scripted] 想起的：（没有相关的记忆） 记下了：我不吃香菜"
    assert turn("晚饭推荐点什么？") == "[scripted] 想起的：今天的对话摘要“我不吃香菜”"
