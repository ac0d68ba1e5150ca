"""The same companion agent on Pydantic AI: pocketmem as an MCP toolset over stdio (FastMCP's client).

From the root of this checkout:

    python3 -m venv .venv && .venv/bin/pip install ".[examples]"     # pocketmem and the agent frameworks
    .venv/bin/python examples/pydantic_ai/memory_agent.py --scripted "我不吃香菜，记住哦"
    .venv/bin/python examples/pydantic_ai/memory_agent.py --scripted "晚饭推荐点什么？"

--scripted needs no model and no network: a fixed script (Pydantic AI's FunctionModel) recalls, remembers a
message that asks to be remembered, and answers with what pocketmem injected. Without it the agent runs on a
hosted model: `.venv/bin/pip install "pydantic-ai-slim[openai]"` and `export OPENAI_API_KEY=sk-...`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sys
from typing import Any

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

INSTRUCTIONS = """\
You are a warm companion who remembers the user across conversations.
1. Before answering a message, call recall_memories with the message as `query`; use its `injection` text.
2. Answer in the user's language, using what you recalled.
3. When the user tells you something worth keeping (a preference, a fact about their life, a plan, a person),
   call add_memory with one short sentence in their language and the right category."""


def pocketmem_toolset(env: dict[str, str] | None = None) -> MCPToolset:
    """pocketmem started over stdio: the installed command, else this Python's module."""
    command = shutil.which("pocketmem")
    exe, args = (command, ["serve"]) if command else (sys.executable, ["-m", "pocketmem", "serve"])
    keep = {k: v for k, v in os.environ.items() if k.startswith("POCKETMEM_") or k in ("PATH", "HOME", "PYTHONPATH")}
    transport = StdioTransport(command=exe, args=args, env={**keep, **(env or {})})
    # init_timeout: the default 5 s is tight for a first start (Python imports) on a slow or busy machine.
    return MCPToolset(transport, id="pocketmem", tool_error_behavior="failed", init_timeout=60)


def build_agent(model: Any = None, env: dict[str, str] | None = None) -> Agent:
    return Agent(model or os.environ.get("AGENT_MODEL", "openai:gpt-4.1-mini"), instructions=INSTRUCTIONS,
                 toolsets=[pocketmem_toolset(env)])


async def chat(message: str, *, model: Any = None, env: dict[str, str] | None = None) -> str:
    """One turn: start pocketmem, let the agent recall, answer and remember, stop pocketmem."""
    agent = build_agent(model, env)
    async with agent:
        result = await agent.run(message)
    return str(result.output)


# -- --scripted: a fixed script in place of a model ------------------------------------------------------
ASKS_TO_REMEMBER = re.compile(r"[，,。.!！\s]*(?:记住哦|记住|请记住|remember (?:this|that))[。.!！]*$", re.IGNORECASE)
FOOD = ("吃", "饭", "餐", "菜", "eat", "food", "dinner", "lunch")


def scripted_model(message: str) -> FunctionModel:
    """Recall first; remember the message if it asks to be remembered; answer with what recall injected."""
    keywords = ["饮食", "忌口", "food"] if any(word in message.casefold() for word in FOOD) else []
    fact = ASKS_TO_REMEMBER.sub("", message)

    def step(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = [p.content for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if not done:
            return ModelResponse(parts=[ToolCallPart("recall_memories", {"query": message, "keywords": keywords})])
        if len(done) == 1 and fact != message:
            return ModelResponse(parts=[ToolCallPart("add_memory", {"content": fact, "category": "preference",
                                                                     "keywords": keywords})])
        recalled = done[0].get("injection") or "（没有相关的记忆）"
        stored = f" 记下了：{fact}" if len(done) > 1 and done[1].get("status") == "stored" else ""
        return ModelResponse(parts=[TextPart(f"[scripted] 想起的：{recalled}{stored}")])

    return FunctionModel(step)


def main() -> None:
    parser = argparse.ArgumentParser(description="One turn with a companion agent that remembers (pocketmem).")
    parser.add_argument("message", nargs="*", help="what the user says")
    parser.add_argument("--scripted", action="store_true", help="a fixed script instead of a hosted model")
    args = parser.parse_args()
    message = " ".join(args.message) or "你好"
    print(asyncio.run(chat(message, model=scripted_model(message) if args.scripted else None)))


if __name__ == "__main__":
    main()
