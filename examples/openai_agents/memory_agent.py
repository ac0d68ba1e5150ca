"""A small companion agent with long-term memory: the OpenAI Agents SDK talks to pocketmem over MCP (stdio).

The agent recalls before it answers and remembers after, as pocketmem's server instructions ask. From the
root of this checkout:

    python3 -m venv .venv && .venv/bin/pip install ".[examples]"     # pocketmem and the agent frameworks
    .venv/bin/python examples/openai_agents/memory_agent.py --scripted "我不吃香菜，记住哦"
    .venv/bin/python examples/openai_agents/memory_agent.py --scripted "晚饭推荐点什么？"

--scripted needs no model and no network: a fixed script (the Agents SDK's ScriptedModel) recalls, remembers
a message that asks to be remembered, and answers with what pocketmem injected. Without it the agent runs on
a hosted model: `export OPENAI_API_KEY=sk-...` (and AGENT_MODEL to pick one).

Memories live in POCKETMEM_HOME (default ~/.pocketmem); see them with `.venv/bin/pocketmem list`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
from typing import Any

from agents import Agent, Runner, set_tracing_disabled
from agents.mcp import MCPServerStdio
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

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


# -- --scripted: a fixed script in place of a model ------------------------------------------------------
ASKS_TO_REMEMBER = re.compile(r"[，,。.!！\s]*(?:记住哦|记住|请记住|remember (?:this|that))[。.!！]*$", re.IGNORECASE)
FOOD = ("吃", "饭", "餐", "菜", "eat", "food", "dinner", "lunch")


def inferred_keywords(message: str) -> list[str]:
    """What a model would add as search terms; the script knows one topic."""
    return ["饮食", "忌口", "food"] if any(word in message.casefold() for word in FOOD) else []


def scripted_model(message: str) -> ScriptedModel:
    """Recall first; remember the message if it asks to be remembered; answer with what recall injected."""
    keywords = inferred_keywords(message)
    steps: list[Any] = [[function_call("recall_memories", {"query": message, "keywords": keywords}, call_id="recall")]]
    fact = ASKS_TO_REMEMBER.sub("", message)
    if fact != message:
        steps.append([function_call("add_memory", {"content": fact, "category": "preference",
                                                   "keywords": keywords}, call_id="add")])

    def answer(call: Any) -> list[Any]:
        outputs = [json.loads(item["output"]) for item in call.input
                   if isinstance(item, dict) and item.get("type") == "function_call_output"]
        recalled = outputs[0].get("injection") or "（没有相关的记忆）"
        stored = f" 记下了：{fact}" if len(outputs) > 1 and outputs[1].get("status") == "stored" else ""
        return [assistant_message(f"[scripted] 想起的：{recalled}{stored}")]

    return ScriptedModel([*steps, ModelStep.respond(answer)])


def main() -> None:
    parser = argparse.ArgumentParser(description="One turn with a companion agent that remembers (pocketmem).")
    parser.add_argument("message", nargs="*", help="what the user says")
    parser.add_argument("--scripted", action="store_true", help="a fixed script instead of a hosted model")
    args = parser.parse_args()
    message = " ".join(args.message) or "你好"
    if args.scripted:
        set_tracing_disabled(True)  # nothing leaves the machine
    print(asyncio.run(chat(message, model=scripted_model(message) if args.scripted else None)))


if __name__ == "__main__":
    main()
