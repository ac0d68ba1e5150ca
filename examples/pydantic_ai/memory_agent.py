"""The same companion agent on Pydantic AI: pocketmem as an MCP toolset over stdio (FastMCP's client).

    pip install pocketmem "pydantic-ai-slim[mcp,openai]"
    export OPENAI_API_KEY=sk-...
    python examples/pydantic_ai/memory_agent.py "我不吃香菜，记住哦"
    python examples/pydantic_ai/memory_agent.py "晚饭推荐点什么？"

The tests run it with Pydantic AI's FunctionModel instead of a hosted model (tests/test_examples.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from typing import Any

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset

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


if __name__ == "__main__":
    print(asyncio.run(chat(" ".join(sys.argv[1:]) or "你好")))
