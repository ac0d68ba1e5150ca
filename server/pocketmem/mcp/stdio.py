"""`pocketmem serve` over stdio, answering every line.

The SDK's stdio transport hands a line it cannot read as a JSON-RPC message (not JSON, or nested deeper than
the parser allows: a request 100,000 levels deep) to the session as an exception, and the client never hears
back. Here such a line gets the JSON-RPC answer for it, a parse error with `"id": null` (the id cannot be
read), and the server goes on with the next line. The message names no content of the line.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

log = logging.getLogger(__name__)

PARSE_ERROR_MESSAGE = (
    "Parse error: the line is not a JSON-RPC message pocketmem can read (invalid JSON, or nested too deeply); "
    "nothing was done"
)


def parse_error() -> SessionMessage:
    error = types.ErrorData(code=types.PARSE_ERROR, message=PARSE_ERROR_MESSAGE)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error))


async def run_stdio(mcp: MCPServer) -> None:
    await run_lowlevel_stdio(mcp._lowlevel_server)  # noqa: SLF001 - the SDK's own run_stdio_async, reader wrapped


async def run_lowlevel_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        send, receive = create_context_streams[SessionMessage | Exception](0)

        async def answer_bad_lines() -> None:
            async with send:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        log.warning("unreadable line on stdin (%s); answered with a parse error", type(item).__name__)
                        await write_stream.send(parse_error())
                        continue
                    await send.send(item)

        async with receive, anyio.create_task_group() as tasks:
            tasks.start_soon(answer_bad_lines)
            await server.run(receive, write_stream, server.create_initialization_options())
            tasks.cancel_scope.cancel()
