"""`pocketmem serve` over stdio, answering every line.

The SDK's stdio transport hands a line it cannot read as a JSON-RPC message (not JSON, or nested deeper than
the parser allows: a request 100,000 levels deep) to the session as an exception, and the client never hears
back. Here such a line gets the JSON-RPC answer for it, a parse error with `"id": null` (the id cannot be
read), and the server goes on with the next line. The message names no content of the line.

The SDK decodes stdin with `errors="replace"`, so bytes that are not UTF-8 would be stored as U+FFFD. Here stdin
is decoded with `surrogateescape`: such a line no longer parses and gets the same parse error, as HTTP answers
400 for a body that is not UTF-8. stdin is claimed as the SDK claims it: fd 0 reads the null device while
serving, so nothing else in the process can take the protocol's bytes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from io import TextIOWrapper
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
    "Parse error: the line is not a JSON-RPC message pocketmem can read (not UTF-8, invalid JSON, or nested too "
    "deeply); nothing was done"
)


def parse_error() -> SessionMessage:
    error = types.ErrorData(code=types.PARSE_ERROR, message=PARSE_ERROR_MESSAGE)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error))


async def run_stdio(mcp: MCPServer) -> None:
    await run_lowlevel_stdio(mcp._lowlevel_server)  # noqa: SLF001 - the SDK's own run_stdio_async, reader wrapped


@asynccontextmanager
async def strict_stdin() -> AsyncIterator[anyio.AsyncFile[str]]:
    """The protocol's stdin, decoded so that bytes which are not UTF-8 stay unreadable; fd 0 points at the null
    device meanwhile and is put back on exit."""
    wire = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    text = TextIOWrapper(os.fdopen(wire, "rb", closefd=False), encoding="utf-8", errors="surrogateescape")
    try:
        yield anyio.wrap_file(text)
    finally:
        os.dup2(wire, 0)  # a worker thread may still block on `wire`: it is never closed under it


async def run_lowlevel_stdio(server: Server[Any]) -> None:
    async with strict_stdin() as stdin, stdio_server(stdin=stdin) as (read_stream, write_stream):
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
