"""How many bytes the tool definitions cost a host that sends them with every model request.

    python bench/tool_sizes.py            # print the sizes
    python bench/tool_sizes.py --write    # ... and update docs/benchmarks.md

Measured through the SDK's own client, in process, as compact UTF-8 JSON (no spaces, non-ASCII kept):
  - names + descriptions + input schemas (what the model reads; the budget is 8,000 bytes),
  - output schemas (what a host may also send; the model never needs them to call a tool),
  - the whole tools/list result (titles and annotations included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from common import write_section  # noqa: E402
from mcp import Client  # noqa: E402

from pocketmem.base.config import Settings  # noqa: E402
from pocketmem.mcp.server import build_server  # noqa: E402


def compact(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


async def measure() -> dict[str, int]:
    with tempfile.TemporaryDirectory() as home:
        server = build_server(Settings(home=Path(home), embedder="hash", maintain_interval=0))
        async with Client(server, mode="legacy") as client:
            tools = (await client.list_tools()).tools
    dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    lean = [{k: t[k] for k in ("name", "description", "inputSchema") if k in t} for t in dumped]
    outputs = [t.get("outputSchema") for t in dumped]
    sizes = {"tools": len(tools), "lean": compact(lean), "output_schemas": compact(outputs)}
    sizes["whole"] = compact({"tools": dumped})
    for tool in lean:
        sizes[f"tool:{tool['name']}"] = compact(tool)
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
