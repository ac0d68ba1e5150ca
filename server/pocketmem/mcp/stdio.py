"""`pocketmem serve` over stdio, answering each line it cannot read as JSON-RPC says.

The SDK's stdio transport hands a line it cannot read as a JSON-RPC message to the session as an exception, and
the client never hears back. Here such a line gets the JSON-RPC answer for it, nothing is done for it, and the
server goes on with the next line. The log names no content of the line.

The SDK's parser is stricter than JSON: it refuses a string holding an escaped unpaired surrogate (`"a\\ud800b"`,
which a JavaScript host writes for a string cut mid-emoji) and a message nested more than 201 levels deep. So
a refused line is read again with Python's `json` (up to `READ_AGAIN_CHARS` characters). When it is a request
whose id can be read (a string or an integer), the error carries that id and the host's pending request ends;
the message names the field and what is wrong with it. The line is JSON, so the code is not `-32700` (parse
error: the JSON itself cannot be read). It is `-32602` (invalid params) when the fault lies inside `params`:
the envelope and method are well formed, an argument is not; and `-32600` (invalid request) when it lies
elsewhere (the method, the envelope). A notification (a method, no id) gets no reply, as JSON-RPC says.
Every other refused line gets a parse error (`-32700`) with `"id": null`, since no id can be read from it:
bytes that are not UTF-8 (JSON text is UTF-8), not JSON, too deep for Python's reader as well (a request
100,000 levels deep), longer than `READ_AGAIN_CHARS`, a JSON value that is not a request (a response among
them, as before), or an id that is neither a string nor an integer.

To read a line again, stdin keeps each line it hands to the SDK's reader until that line's item (a message or
an exception: the reader makes exactly one per line, in order) reaches `answer_bad_lines`.

The SDK decodes stdin with `errors="replace"`, so bytes that are not UTF-8 would be stored as U+FFFD. Here stdin
is decoded with `surrogateescape`: such a line no longer parses and gets the parse error above, as HTTP answers
400 for a body that is not UTF-8. stdin is claimed as the SDK claims it: fd 0 reads the null device while
serving, so nothing else in the process can take the protocol's bytes.
"""

from __future__ import annotations

import json
import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from io import TextIOWrapper
from typing import IO, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from pocketmem.core.text import UNPAIRED_SURROGATE

log = logging.getLogger(__name__)

PARSE_ERROR_MESSAGE = (
    "Parse error: the line is not a JSON-RPC message pocketmem can read (not UTF-8, invalid JSON, or nested too "
    "deeply); nothing was done"
)
NOT_A_REQUEST = (
    'not a JSON-RPC 2.0 request the server can read ("jsonrpc": "2.0", a "method" string, "params" an object '
    "if given)"
)
READ_AGAIN_CHARS = 1_048_576  # HTTP's default body limit (POCKETMEM_MAX_REQUEST_BYTES): longer is not read again
SDK_MAX_LEVELS = 201  # the deepest message the SDK's parser reads, the message itself being level 1
SHOWN_STEPS = 6  # a field's path is named down to this many steps

Path = tuple[str | int, ...]


def error_reply(request_id: str | int | None, code: int, message: str) -> SessionMessage:
    error = types.ErrorData(code=code, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def parse_error() -> SessionMessage:
    return error_reply(None, types.PARSE_ERROR, PARSE_ERROR_MESSAGE)


def answer_refused_line(line: str | None) -> SessionMessage | None:
    """The reply to a line the SDK refused: an error carrying the request's id when Python's `json` reads the
    line as a request with a string or integer id, nothing for a notification, else a parse error with id null."""
    message = read_again(line)
    if message is None:
        log.warning("unreadable line on stdin; answered with a parse error")
        return parse_error()
    if "id" not in message:
        log.warning("a notification on stdin the server cannot read; not answered")
        return None
    request_id = message["id"]
    if not (is_utf8(request_id) or isinstance(request_id, int) and not isinstance(request_id, bool)):
        log.warning("a request on stdin whose id cannot be read; answered with a parse error")
        return parse_error()
    path, why, kind = first_fault(message)
    in_params = path[:1] == ("params",)
    code, name = (types.INVALID_PARAMS, "Invalid params") if in_params else (types.INVALID_REQUEST, "Invalid request")
    log.warning("a request on stdin the server cannot read (%s); answered with %s for its id", kind, code)
    return error_reply(request_id, code, f"{name}: {why}; nothing was done")


def read_again(line: str | None) -> dict[str, Any] | None:
    """The line as Python's `json` reads it, when that is an object with a method; None when it is not UTF-8,
    not JSON, deeper than Python's reader goes, longer than READ_AGAIN_CHARS, or no request or notification."""
    if line is None or len(line) > READ_AGAIN_CHARS or not is_utf8(line):  # surrogates: bytes that are not UTF-8
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) and "method" in value else None


def is_utf8(value: object) -> bool:
    """A string that can be written as UTF-8 (no unpaired surrogate)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def first_fault(message: dict[str, Any]) -> tuple[Path, str, str]:
    """Where the SDK's parser stopped, in the order of the line: (path, what is wrong there, kind for the log).
    Walked without recursion; a request with neither fault is named as a whole."""
    stack: list[tuple[Iterator[tuple[str | int, Any]], Path]] = [(members(message), ())]
    while stack:
        children, path = stack[-1]
        for step, child in children:
            if isinstance(step, str) and not is_utf8(step):
                return path, f"a member name in {where(path)} {UNPAIRED_SURROGATE}", "unpaired surrogate"
            if isinstance(child, str) and not is_utf8(child):
                return (*path, step), f"{where((*path, step))} {UNPAIRED_SURROGATE}", "unpaired surrogate"
            if isinstance(child, (dict, list)):
                if len(path) + 2 > SDK_MAX_LEVELS:  # the message is level 1, its members' values level 2
                    top = path[: next((i for i, at in enumerate(path) if isinstance(at, int)), len(path))]
                    why = f"{where(top)} is nested too deeply: a message may be at most {SDK_MAX_LEVELS} levels deep"
                    return top, why, "nested too deeply"
                stack.append((members(child), (*path, step)))
                break
        else:
            stack.pop()
    return (), NOT_A_REQUEST, "not a request"


def members(value: dict[str, Any] | list[Any]) -> Iterator[tuple[str | int, Any]]:
    return iter(value.items()) if isinstance(value, dict) else enumerate(value)


def where(path: Path) -> str:
    """A field's path as `params.arguments.keywords[0]`, long names and paths cut short."""
    text = ""
    for step in path[:SHOWN_STEPS]:
        text += f"[{step}]" if isinstance(step, int) else ("." if text else "") + (
            step if len(step) <= 40 else step[:40] + "…")
    return (text + ("…" if len(path) > SHOWN_STEPS else "")) or "the request"


class KeptLines(anyio.AsyncFile[str]):
    """stdin for the SDK's reader, keeping each line it hands on until `take` is called for the line's item."""

    def __init__(self, fp: IO[str]) -> None:
        super().__init__(fp)
        self._lines: deque[str] = deque()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in super().__aiter__():
            self._lines.append(line)
            yield line

    def take(self) -> str | None:
        """The line the next item was made from."""
        return self._lines.popleft() if self._lines else None


async def run_stdio(mcp: MCPServer) -> None:
    await run_lowlevel_stdio(mcp._lowlevel_server)  # noqa: SLF001 - the SDK's own run_stdio_async, reader wrapped


@asynccontextmanager
async def strict_stdin() -> AsyncIterator[KeptLines]:
    """The protocol's stdin, decoded so that bytes which are not UTF-8 stay unreadable, keeping each line until it
    is answered; fd 0 points at the null device meanwhile and is put back on exit."""
    wire = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    text = TextIOWrapper(os.fdopen(wire, "rb", closefd=False), encoding="utf-8", errors="surrogateescape")
    try:
        yield KeptLines(text)
    finally:
        os.dup2(wire, 0)  # a worker thread may still block on `wire`: it is never closed under it


async def run_lowlevel_stdio(server: Server[Any]) -> None:
    async with strict_stdin() as stdin, stdio_server(stdin=stdin) as (read_stream, write_stream):
        send, receive = create_context_streams[SessionMessage | Exception](0)

        async def answer_bad_lines() -> None:
            async with send:
                async for item in read_stream:
                    line = stdin.take()
                    if isinstance(item, Exception):
                        answer = answer_refused_line(line)
                        if answer is not None:
                            await write_stream.send(answer)
                        continue
                    await send.send(item)

        async with receive, anyio.create_task_group() as tasks:
            tasks.start_soon(answer_bad_lines)
            await server.run(receive, write_stream, server.create_initialization_options())
            tasks.cancel_scope.cancel()
