"""`pocketmem serve` over stdio when start-up failed: the host still hears why.

A desktop host starts the server and speaks MCP to it; a process that exits before the handshake shows
there only as "connection closed", with the reason in a log file few people open. So when the settings or
the store cannot be loaded, the server still answers the handshake (both protocol eras: the SDK's own
loop), carries the cause in its instructions, and answers every list, tool call, resource read and
prompt with one error naming the cause and what to do. It serves nothing else, and stops when stdin
closes; the command line has already printed the one-line error and exits non-zero after.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from pocketmem import __version__
from pocketmem.mcp.stdio import run_lowlevel_stdio


def start_failure_message(cause: str) -> str:
    cause = cause.strip().rstrip(".")
    return f"pocketmem could not start: {cause}. Fix this, then restart the pocketmem MCP server in your client."


def failed_start_server(cause: str) -> Server[Any]:
    message = start_failure_message(cause)

    async def refuse(_ctx: Any, _params: Any) -> Any:
        raise MCPError(types.INTERNAL_ERROR, message)

    async def call_tool(_ctx: Any, _params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)

    return Server(
        "pocketmem",
        version=__version__,
        title="pocketmem (not started)",
        instructions=message,
        on_list_tools=refuse,
        on_call_tool=call_tool,
        on_list_resources=refuse,
        on_list_resource_templates=refuse,
        on_read_resource=refuse,
        on_list_prompts=refuse,
        on_get_prompt=refuse,
    )


async def answer_failed_start(cause: str) -> None:
    """Serves the failure over stdio until stdin closes."""
    await run_lowlevel_stdio(failed_start_server(cause))
