"""A small companion agent with long-term memory: the OpenAI Agents SDK talks to pocketmem over MCP (stdio).

The agent recalls before it answers and remembers after, as pocketmem's server instructions ask:

    pip install pocketmem openai-agents          # or: uv tool install … / pipx install … (docs/install.md)
    export OPENAI_API_KEY=sk-...                  # any model the Agents SDK can use
    python examples/openai_agents/memory_agent.py "我不吃香菜，记住哦"
    python examples/openai_agents/memory_agent.py "晚饭推荐点什么？"

Memories live in POCKETMEM_HOME (default ~/.pocketmem); see them with `pocketmem list`.
The tests run this file with a scripted model instead of a hosted one (tests/test_examples.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from typing import Any

from agents import Agent, Runner
from agents.mcp import MCPServerStdio

INSTRUCTIONS = """\
You are a warm companion who remembers the user across conversations.
1. Before answering a message, call recall_memories with the message as `query`; use its `injection` text.
2. Answer in the user's language, using what you recalled.
3. When the user tells you something worth keeping (a preference, a fact about their life, a plan, a person),
   call add_memory with one short sentence in their language and the right category."""


def pocketmem_server(env: dict[str, str] | None = None) -> MCPServerStdio:
    """pocketmem as the Agents SDK starts any stdio MCP server: the installed command, else this Python's module."""
    command = shutil.which("pocketmem")
    params: dict[str, Any] = (
        {"command": command, "args": ["serve"]} if command else {"command": sys.executable, "args": ["-m", "pocketmem", "serve"]}
    )
    # Only what the server needs: hosts start it with a small environment too.
    keep = {k: v for k, v in os.environ.items() if k.startswith("POCKETMEM_") or k in ("PATH", "HOME", "PYTHONPATH")}
    params["env"] = {**keep, **(env or {})}
    return MCPServerStdio(
        params, name="pocketmem", cache_tools_list=True, client_session_timeout_seconds=60,
        use_structured_content=True,
    )


def build_agent(server: MCPServerStdio, model: Any = None) -> Agent:
    return Agent(name="companion", instructions=INSTRUCTIONS, mcp_servers=[server],
                 model=model or os.environ.get("AGENT_MODEL", "gpt-4.1-mini"))


async def chat(message: str, *, model: Any = None, env: dict[str, str] | None = None) -> str:
    """One turn: start pocketmem, let the agent recall, answer and remember, stop pocketmem."""
    async with pocketmem_server(env) as server:
        result = await Runner.run(build_agent(server, model), message)
    return str(result.final_output)


if __name__ == "__main__":
    print(asyncio.run(chat(" ".join(sys.argv[1:]) or "你好")))
