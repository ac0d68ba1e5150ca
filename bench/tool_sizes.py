"""How many bytes the tool definitions cost a host that sends them with every model request.

    python bench/tool_sizes.py            # print the sizes
    python bench/tool_sizes.py --write    # ... and update docs/benchmarks.md

Measured through the SDK's own client, in process, as compact UTF-8 JSON (no spaces, non-ASCII kept):
  - names + descriptions + input schemas (what the model reads; the budget is 8,000 bytes),
  - output schemas (what a host may also send; the model never needs them to call a tool),
  - the whole tools/list result (titles and annotations included);
and what a result costs the model on every call: the text block of a recall, an add and a listing as sent,
beside the same JSON indented as the SDK writes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import pydantic_core  # noqa: E402
from common import write_section  # noqa: E402
from mcp import Client  # noqa: E402

from pocketmem.base.config import Settings  # noqa: E402
from pocketmem.mcp.server import build_server  # noqa: E402


def compact(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


RESULT_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("add_memory", {"content": "用户不喜欢香菜，吃到会很反感。", "keywords": ["香菜", "饮食"]}),
    ("add_memory", {"content": "用户对花生过敏，吃了会起疹子。", "scores": {"persistence": 1.0}}),
    ("recall_memories", {"query": "晚饭想吃火锅，有什么要注意的？", "keywords": ["香菜", "花生", "饮食"]}),
    ("list_memories", {"limit": 10}),
]


async def result_sizes(client: Client) -> list[tuple[str, int, int]]:
    """(tool, bytes of the text block as sent, bytes of the same JSON indented as the SDK writes it)."""
    sizes = []
    for name, args in RESULT_CALLS:
        result = await client.call_tool(name, args)
        text = result.content[0].text  # type: ignore[union-attr]
        indented = pydantic_core.to_json(result.structured_content, indent=2).decode()
        sizes.append((name, len(text.encode()), len(indented.encode())))
    return sizes


async def measure() -> dict[str, int]:
    with tempfile.TemporaryDirectory() as home:
        server = build_server(Settings(home=Path(home), embedder="hash", maintain_interval=0))
        async with Client(server, mode="legacy") as client:
            tools = (await client.list_tools()).tools
            results = await result_sizes(client)
    dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    lean = [{k: t[k] for k in ("name", "description", "inputSchema") if k in t} for t in dumped]
    outputs = [t.get("outputSchema") for t in dumped]
    sizes = {"tools": len(tools), "lean": compact(lean), "output_schemas": compact(outputs)}
    sizes["whole"] = compact({"tools": dumped})
    for tool in lean:
        sizes[f"tool:{tool['name']}"] = compact(tool)
    for i, (name, sent, indented) in enumerate(results):
        sizes[f"result:{i}:{name}"], sizes[f"indented:{i}:{name}"] = sent, indented
    return sizes


def report(sizes: dict[str, int]) -> str:
    lines = [
        "## Tool definitions (`python bench/tool_sizes.py`)",
        "",
        "Compact UTF-8 JSON, as a host sends it with each model request (bytes; the same on any machine).",
        "",
        "| part | bytes |",
        "|---|---:|",
        f"| names + descriptions + input schemas, {sizes['tools']} tools (budget 8,000) | {sizes['lean']:,} |",
        f"| output schemas | {sizes['output_schemas']:,} |",
        f"| whole tools/list result | {sizes['whole']:,} |",
    ]
    lines += [f"| {key[5:]} | {value:,} |" for key, value in sizes.items() if key.startswith("tool:")]
    lines += [
        "",
        "### Results",
        "",
        "The text block of a result, which most hosts put in the model's context on every call (bytes, compact",
        "UTF-8 JSON as sent), beside the same JSON indented as the SDK writes it; calls in order on a new store.",
        "",
        "| call | sent | indented |",
        "|---|---:|---:|",
    ]
    lines += [
        f"| {key.split(':')[2]} | {value:,} | {sizes['indented' + key[6:]]:,} |"
        for key, value in sizes.items() if key.startswith("result:")
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    text = report(asyncio.run(measure()))
    print(text)
    if args.write:
        write_section(text, "tool-sizes")


if __name__ == "__main__":
    main()
