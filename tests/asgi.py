"""`pocketmem serve --transport http|sse` in process: the same ASGI app, reached by the official client without a
socket or a subprocess; and the management page as a person's browser reaches it (`Browser`, `make_browser`).

    async with serve_in_process(backend, tmp_path, "http") as server:
        token = await server.create_token("alice")
        async with server.connect(token) as client:
            await client.call_tool(...)

`serve_in_process` does what `pocketmem serve` does before it listens (open the store, apply the access policy,
`mcp.http.build_app`, the app's lifespan) and `StreamingASGITransport` carries httpx requests to that app. Unlike
httpx's own ASGITransport it streams the response, so SSE streams (the SSE transport, the streamable HTTP GET
stream) work. Settings come from the test's `backend` (the fixture, passed first), so on the PostgreSQL run of a
test marked `backends` the server uses the test's PostgreSQL database, as the subprocess does through
`servers.server_env`.
"""

from __future__ import annotations

import math
import re
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from starlette.types import ASGIApp

from pocketmem.app import PocketMem
from pocketmem.mcp.http import MCP_PATH, SSE_PATH, AuthMode, NetworkOptions, access_policy, build_app
from pocketmem.mcp.http import _describe as describe
from pocketmem.service.manage.tokens import Anonymous, TokenService
from pocketmem.web.server import make_access, ui_app

from .helpers import Backend

PORT = 8765
Message = MutableMapping[str, Any]


class _ResponseBody(httpx2.AsyncByteStream):
    """The app's body chunks as they are sent; closing it tells the app the client went away."""

    def __init__(self, chunks: MemoryObjectReceiveStream[bytes], gone: anyio.Event) -> None:
        self.chunks = chunks
        self.gone = gone

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.chunks:
            yield chunk

    async def aclose(self) -> None:
        self.gone.set()
        self.chunks.close()


class StreamingASGITransport(httpx2.AsyncBaseTransport):
    """httpx -> an ASGI app in this event loop, the app running in `tasks` so a response can stream."""

    def __init__(self, app: ASGIApp, tasks: TaskGroup, errors: list[BaseException], state: dict[str, Any]) -> None:
        self.app = app
        self.tasks = tasks
        self.errors = errors
        self.state = state

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        assert isinstance(request.stream, httpx2.AsyncByteStream)
        body = b"".join([chunk async for chunk in request.stream])
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
            "headers": [(k.lower(), v) for (k, v) in request.headers.raw], "scheme": request.url.scheme,
            "path": request.url.path, "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query, "server": (request.url.host, request.url.port),
            "client": ("127.0.0.1", 50000), "root_path": "", "state": dict(self.state),
        }
        chunks_in, chunks_out = anyio.create_memory_object_stream[bytes](math.inf)
        started, gone = anyio.Event(), anyio.Event()
        head: dict[str, Any] = {}
        sent_body = False

        async def receive() -> Message:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                head.update(status=message["status"], headers=message.get("headers", []))
                started.set()
            elif message["type"] == "http.response.body":
                await _send_chunk(chunks_in, message.get("body", b""))
                if not message.get("more_body", False):
                    chunks_in.close()

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            except Exception as exc:  # noqa: BLE001 - a server logs it and answers 500; here the test sees it
                self.errors.append(exc)
                head.setdefault("error", exc)
            finally:
                chunks_in.close()
                started.set()

        self.tasks.start_soon(run)
        await started.wait()
        if "status" not in head:
            raise head.get("error") or RuntimeError("the app sent no response")
        return httpx2.Response(head["status"], headers=head["headers"], stream=_ResponseBody(chunks_out, gone))


async def _send_chunk(chunks: MemoryObjectSendStream[bytes], chunk: bytes) -> None:
    try:
        await chunks.send(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the client stopped reading, as a closed socket


@asynccontextmanager
async def _lifespan(app: ASGIApp, tasks: TaskGroup, state: dict[str, Any]) -> AsyncIterator[None]:
    """The ASGI lifespan protocol, as uvicorn drives it (the streamable HTTP session manager starts here)."""
    to_app, app_inbox = anyio.create_memory_object_stream[Message](math.inf)
    app_outbox, from_app = anyio.create_memory_object_stream[Message](math.inf)
    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": state}
    async with to_app, app_inbox, app_outbox, from_app:
        tasks.start_soon(app, scope, app_inbox.receive, app_outbox.send)
        await to_app.send({"type": "lifespan.startup"})
        assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        try:
            yield
        finally:
            await to_app.send({"type": "lifespan.shutdown"})
            assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"


@dataclass
class InProcessServer:
    app: PocketMem
    options: NetworkOptions
    announce: str
    transport: StreamingASGITransport
    errors: list[BaseException] = field(default_factory=list)

    @property
    def base(self) -> str:
        host = "[::1]" if self.options.host == "::1" else self.options.host
        return f"http://{host}:{PORT}"

    @property
    def url(self) -> str:
        return self.base + (MCP_PATH if self.options.transport == "http" else SSE_PATH)

    def log(self) -> str:
        """What `pocketmem serve` prints on stderr once it listens."""
        return self.announce

    def http(self, headers: dict[str, str] | None = None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=self.transport, base_url=self.base, headers=headers or {}, timeout=30)

    async def create_token(self, user: str, name: str | None = None) -> str:
        """`pocketmem token create` against the same store."""
        return (await TokenService(self.app.store, self.app.clock).create(user, name)).token

    async def revoke_token(self, token: str) -> None:
        await TokenService(self.app.store, self.app.clock).revoke(token.split("_")[1])

    async def allow_anonymous(self) -> None:
        await TokenService(self.app.store, self.app.clock).allow_anonymous()

    @asynccontextmanager
    async def connect(self, token: str | None = None, *, mode: str = "legacy", url: str | None = None,
                      **kw: Any) -> AsyncIterator[Client]:
        """The official client over streamable HTTP (…/mcp) or SSE (…/sse), carrying the token."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        target = url or self.url
        if target.endswith(SSE_PATH):

            def factory(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> Any:
                return httpx2.AsyncClient(transport=self.transport, headers=headers, timeout=timeout, auth=auth)

            async with Client(sse_client(target, headers=headers, httpx_client_factory=factory), mode=mode,
                              **kw) as client:
                yield client
            return
        async with httpx2.AsyncClient(transport=self.transport, headers=headers, timeout=30) as http:
            async with Client(streamable_http_client(target, http_client=http), mode=mode, **kw) as client:
                yield client


@asynccontextmanager
async def serve_in_process(
    backend: Backend, tmp_path: Path, transport: str = "http", *, host: str = "127.0.0.1",
    auth: AuthMode = AuthMode.auto, allowed_hosts: tuple[str, ...] = (), mount: Any = None, **settings: Any,
) -> AsyncIterator[InProcessServer]:
    """`pocketmem serve --transport <transport>` over tmp_path/home, without a socket (the `--port 0` of tests)."""
    config = backend.make_settings(tmp_path, **settings)
    options = NetworkOptions(transport, host=host, port=PORT, auth=auth, allowed_hosts=allowed_hosts, mount=mount)
    async with PocketMem(config) as app:
        tokens = TokenService(app.store, app.clock)
        active = await tokens.count_active()
        anonymous = access_policy(host, auth, active, allowed_hosts)
        asgi = build_app(config, app, options, anonymous)
        announce = describe(options, PORT, anonymous, active, await tokens.anonymous_allowed())
        if options.ui:
            announce += f"\npocketmem: memory management page at http://{host}:{PORT}/ui/memories"
        errors: list[BaseException] = []
        state: dict[str, Any] = {}
        async with anyio.create_task_group() as tasks:
            async with _lifespan(asgi, tasks, state):
                yield InProcessServer(app, options, announce, StreamingASGITransport(asgi, tasks, errors, state),
                                      errors)
            tasks.cancel_scope.cancel()


# -- the management page, as a person's browser reaches it -------------------------------------------------
BASE = "http://127.0.0.1:8765"


class Browser:
    """An httpx client that keeps cookies and reads the CSRF token off the last page, like a person's browser."""

    def __init__(self, client: httpx2.AsyncClient) -> None:
        self.client = client
        self.csrf = ""

    async def get(self, path: str, **kw) -> httpx2.Response:
        response = await self.client.get(f"/ui{path}", **kw)
        if found := re.search(r'<meta name="csrf-token" content="([^"]+)">', response.text):
            self.csrf = found.group(1)
        return response

    async def post(self, path: str, data: dict | None = None, **kw) -> httpx2.Response:
        if not self.csrf:
            await self.get("/memories")
        return await self.client.post(f"/ui{path}", data={"csrf": self.csrf, **(data or {})}, **kw)


def make_browser(app: PocketMem, anonymous: Anonymous = Anonymous.until_first_token) -> httpx2.AsyncClient:
    asgi = ui_app(app, make_access(app, anonymous, "127.0.0.1"))
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=asgi), base_url=BASE)
