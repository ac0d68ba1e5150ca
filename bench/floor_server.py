"""The protocol's floor: a bare MCPServer whose one tool does nothing (no pocketmem code at all).

    python bench/floor_server.py stdio
    python bench/floor_server.py http PORT [--stateless]
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("floor", version="1.0")


@mcp.tool()
def noop(query: str = "") -> str:
    """Does nothing."""
    return "ok"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        mcp.run()
    else:
        stateless = "--stateless" in sys.argv
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), stateless_http=stateless,
                json_response=stateless)
