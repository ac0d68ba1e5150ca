"""`pocketmem serve --transport http|sse`: MCP over HTTP, one user per bearer token.

Who may connect (decided at start, re-checked on every request):

    host        --auth auto (default)                  --auth token       --auth none
    loopback    no token needed while none has ever     token required     no token needed
                existed; once one is created, every
                request needs one (no restart) — also
                after the last is revoked, until the
                operator runs `pocketmem token
                allow-anonymous`
    exposed     token required; refuses to start       token required     refuses to start
                while no token exists

Exposed: bound to a non-loopback address, or named by a non-loopback --allowed-host (a loopback
server behind a reverse proxy is reachable from anywhere).

A request without a token, where one is not needed, acts as POCKETMEM_USER (like stdio); a token
that is sent is always checked, so a wrong one gets 401 everywhere. When the store cannot be read to check it
(the database is down or the file unreadable), the request is refused with 503 and Retry-After
(`StoreDownGuard`), never with the 401 of a wrong token. DNS-rebinding protection is
always on (`ServedNames`): loopback names are allowed on a loopback host, otherwise the bound address
and every --allowed-host; the Host and Origin headers are parsed (scheme, host, numeric port), never
prefix-matched, so `http://127.0.0.1:8765.evil.example` or `http://127.0.0.1:8765@evil.example` is
refused, and an Origin must name the port the request was sent to (`http://127.0.0.1:1` is another site).
Request bodies are capped at POCKETMEM_MAX_REQUEST_BYTES (413 beyond).

Revoking a token (`pocketmem token revoke`, from any process) ends what it opened: its next request gets 401,
a notification is never sent to a client that subscribed with it (checked as it is sent), and every
stateful streamable-HTTP session it made is closed, its open event stream with it, within
SESSION_CHECK_SECONDS.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import ipaddress
import logging
import os
import secrets
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from pocketmem.app import PocketMem
from pocketmem.base.config import Settings
from pocketmem.base.errors import ConfigError, StoreUnavailable
from pocketmem.mcp.notifications import Clients
from pocketmem.mcp.server import build_server
from pocketmem.mcp.workers import MAX_WORKERS, Supervisor, adopt_socket
from pocketmem.service.manage.tokens import RETRY_AFTER_SECONDS, SCOPE, Anonymous, TokenService

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
SSE_PATH = "/sse"
SSE_MESSAGE_PATH = "/messages/"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
# SSE streams stay open; on Ctrl-C give them this long before closing them.
GRACEFUL_SHUTDOWN_SECONDS = 3
# How often the tokens of open stateful sessions are re-read, to close those of a revoked token.
SESSION_CHECK_SECONDS = 1.0
TOKEN_CLIENT = "pocketmem:"  # + the token's id: the SDK's client_id, so a session stays with its token


class AuthMode(StrEnum):
    auto = "auto"
    token = "token"
    none = "none"


def is_loopback(host: str) -> bool:
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1 : name.find("]")]
    elif name.count(":") == 1:
        name = name.split(":")[0]  # host:port
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def exposed_name(host: str, allowed_hosts: Sequence[str]) -> str | None:
    """The name by which others can reach the server, None when only this machine can.

    A loopback bind with a public --allowed-host is a server behind a reverse proxy: requests
    arrive from 127.0.0.1 but come from anywhere, so it is exposed just the same.
    """
    if not is_loopback(host):
        return host or "(all addresses)"
    return next((name for name in allowed_hosts if not is_loopback(name)), None)


def access_policy(host: str, mode: AuthMode, active_tokens: int, allowed_hosts: Sequence[str] = ()) -> Anonymous:
    """Refuse unsafe combinations with a message that says what to do instead."""
    create = "create one with `pocketmem token create --user NAME`"
    exposed = exposed_name(host, allowed_hosts)
    if exposed is not None:
        if mode is AuthMode.none:
            raise ConfigError(
                f"refusing --auth none on {exposed}: anyone who can reach it could read every memory. "
                "--auth none is for a loopback host with no public --allowed-host only"
            )
        if active_tokens == 0:
            raise ConfigError(
                f"refusing to serve {exposed} without authentication: no token exists yet. "
                f"{create.capitalize()}, give it to the client (Authorization: Bearer <token>), then start again"
            )
        return Anonymous.never
    if mode is AuthMode.none:
        return Anonymous.always
    if mode is AuthMode.token:
        if active_tokens == 0:
            raise ConfigError(f"--auth token, but no token exists yet; {create}")
        return Anonymous.never
    return Anonymous.until_first_token


DEFAULT_PORTS = {"http": 80, "https": 443}


def authority(value: str) -> tuple[str, int | None] | None:
    """The host of `host[:port]` (lower-case, an IPv6 address without brackets) and its port, if any; None unless
    the value is exactly that (a numeric port, no user, no path)."""
    try:
        parts = urlsplit("//" + value.strip())
        port = parts.port  # raises ValueError unless the port is a number
    except ValueError:
        return None
    if parts.username is not None or parts.path or parts.query or parts.fragment or not parts.hostname:
        return None
    return parts.hostname, port


@dataclass(frozen=True)
class ServedNames:
    """The host names clients legitimately use to reach the server, and the Host / Origin checks against them."""

    names: frozenset[str]

    def host_ok(self, header: str | None) -> bool:
        named = authority(header) if header is not None else None
        return named is not None and named[0] in self.names

    def origin_ok(self, origin: str | None, host: str | None) -> bool:
        """An Origin is absent (a same-origin request) or exactly `http(s)://name[:port]`: a served name, on the port
        the request was sent to (the Host header's; without one, the default port of the Origin's scheme, as a
        browser sends it to a public name on 443 behind a proxy)."""
        if origin is None:
            return True
        try:
            parts = urlsplit(origin.strip())
        except ValueError:
            return False
        default = DEFAULT_PORTS.get(parts.scheme)
        named = authority(parts.netloc)
        sent_to = authority(host or "")
        if default is None or named is None or sent_to is None or parts.path or parts.query or parts.fragment:
            return False
        origin_port = default if named[1] is None else named[1]
        return named[0] in self.names and origin_port == (default if sent_to[1] is None else sent_to[1])


def transport_security(host: str, allowed_hosts: Sequence[str]) -> ServedNames:
    """Host and Origin headers a request may carry: what clients legitimately use to reach us."""
    if host in WILDCARD_HOSTS and not allowed_hosts:
        raise ConfigError(
            f"--host {host or '(all)'} listens on every address, so pocketmem cannot tell which host names are "
            "legitimate (DNS-rebinding protection): name them with --allowed-host, e.g. "
            "--allowed-host memory.example.com --allowed-host 192.168.1.20"
        )
    # Through a wildcard address local clients arrive as 127.0.0.1 / localhost too.
    names: list[str] = list(LOOPBACK_NAMES) if is_loopback(host) or host in WILDCARD_HOSTS else []
    if host not in WILDCARD_HOSTS and not is_loopback(host):
        names.append(host)
    for name in allowed_hosts:
        name = name.strip().lower()
        if not name or "/" in name:
            raise ConfigError(f"--allowed-host {name!r}: give a host name or address, without scheme or path")
        names.append(name)
    return ServedNames(frozenset(name.strip("[]").lower() for name in names))


# How a refused request is answered: (scope, 421 or 403) -> the response. In plain English by default; a page
# mounted beside the transport answers for its own paths in its own language (NetworkOptions.mount).
Refusal = Callable[[Scope, int], Response]


def plain_refusal(scope: Scope, status: int) -> Response:
    return PlainTextResponse("Invalid Host header" if status == 421 else "Invalid Origin header", status_code=status)


class HeaderGuard:
    """DNS-rebinding protection for every request: a Host the server answers to (else 421) and, when sent, an
    Origin naming it (else 403). It replaces the SDK's check, which matches prefixes. `answers` maps a path prefix
    to how refusals under it are said (the management page's, in the page's language); elsewhere `plain_refusal`."""

    def __init__(self, app: ASGIApp, served: ServedNames, answers: Mapping[str, Refusal] | None = None) -> None:
        self.app = app
        self.served = served
        self.answers = dict(answers or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            host = headers.get("host")
            refused = 421 if not self.served.host_ok(host) else None
            if refused is None and not self.served.origin_ok(headers.get("origin"), host):
                refused = 403
            if refused is not None:
                await self._answer(scope["path"])(scope, refused)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _answer(self, path: str) -> Refusal:
        under = (say for prefix, say in self.answers.items()
                 if path == prefix or path.startswith(prefix.rstrip("/") + "/"))
        return next(under, plain_refusal)


class LocalAccess:
    """The identity of token-less requests where the policy allows them (loopback only).

    The network layer marks such a request with this process-local secret, which never leaves
    the process, so the SDK's bearer machinery treats every request alike. `allowed` is the policy, read from
    the store on every call: from the first `token create` on, it says no, and the sessions opened without a
    token are closed like those of a revoked token.
    """

    CLIENT_ID = "pocketmem:local"

    def __init__(self, user_id: str, allowed: Callable[[], Awaitable[bool]]) -> None:
        self.user_id = user_id
        self.allowed = allowed
        self.secret = secrets.token_urlsafe(32)  # never sent anywhere

    def matches(self, token: str) -> bool:
        return hmac.compare_digest(token.encode("utf-8"), self.secret.encode("utf-8"))


class StoreTokenVerifier(TokenVerifier):
    """The SDK's hook: a presented bearer token -> the user it acts as (AccessToken.subject)."""

    def __init__(self, tokens: TokenService, local: LocalAccess | None = None) -> None:
        self.tokens = tokens
        self.local = local

    async def verify_token(self, token: str) -> AccessToken | None:
        if self.local is not None and self.local.matches(token):
            return AccessToken(token=token, client_id=LocalAccess.CLIENT_ID, subject=self.local.user_id, scopes=[SCOPE])
        record = await self.tokens.verify(token)  # StoreUnavailable when the store fails: StoreDownGuard's 503
        if record is None:
            return None
        # client_id is per token, so an MCP session opened with one token cannot be used with another.
        return AccessToken(token=token, client_id=f"{TOKEN_CLIENT}{record.id}", subject=record.user_id, scopes=[SCOPE])

    async def revoked(self, clients: set[str]) -> set[str]:
        """The clients among `clients` whose token is no longer active, and the process-local identity once
        requests without a token are no longer allowed."""
        ids = {client: client.removeprefix(TOKEN_CLIENT) for client in clients
               if client.startswith(TOKEN_CLIENT) and client != LocalAccess.CLIENT_ID}
        inactive = await self.tokens.inactive(set(ids.values())) if ids else set()
        out = {client for client, token_id in ids.items() if token_id in inactive}
        if LocalAccess.CLIENT_ID in clients and (self.local is None or not await self.local.allowed()):
            out.add(LocalAccess.CLIENT_ID)
        return out

    def clients(self) -> Clients:
        return Clients(current=_current_client, revoked=self.revoked)


def _current_client() -> str | None:
    token = get_access_token()
    return token.client_id if token is not None else None


async def end_revoked_sessions(manager: StreamableHTTPSessionManager, verifier: StoreTokenVerifier) -> None:
    """Close every stateful session whose token has been revoked, with its open streams: the client sees its
    event stream end, and the session id answers 404 from then on."""
    # The SDK keeps who opened each session, and the sessions, in private attributes; it has no public way to
    # end a session from the server's side.
    owners = {sid: owner["client_id"] for sid, owner in manager._session_owners.items()}  # noqa: SLF001
    if not owners:
        return
    revoked = await verifier.revoked(set(owners.values()))
    for session_id, client in owners.items():
        transport = manager._server_instances.get(session_id)  # noqa: SLF001
        if client in revoked and transport is not None:
            log.info("closing session %s: its token was revoked", session_id[:8])
            await manager._discard_session(session_id, transport)  # noqa: SLF001


async def _close_revoked_sessions(manager: StreamableHTTPSessionManager, verifier: StoreTokenVerifier) -> None:
    while True:
        await anyio.sleep(SESSION_CHECK_SECONDS)
        try:
            await end_revoked_sessions(manager, verifier)
        except Exception:  # noqa: BLE001 - the store is down: requests are refused meanwhile (fail closed)
            log.warning("token check of open sessions failed: the store is unavailable", exc_info=True)


def _closing_revoked_sessions(starlette: Starlette, manager: StreamableHTTPSessionManager,
                              verifier: StoreTokenVerifier) -> None:
    """Run `_close_revoked_sessions` for as long as the app serves (inside its lifespan)."""
    inner = starlette.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with inner(app) as state, anyio.create_task_group() as tasks:
            tasks.start_soon(_close_revoked_sessions, manager, verifier)
            yield state
            tasks.cancel_scope.cancel()

    starlette.router.lifespan_context = lifespan


class StoreDownGuard:
    """Fail closed, but honestly: a request whose token (or the auth state) cannot be checked because the store
    fails gets 503 with Retry-After, not the 401 of a wrong token, which would make a host re-authenticate and
    tell the person their token was revoked. Inside Starlette's error handler, around the auth middleware."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except StoreUnavailable as exc:  # raised before any response: the check comes first
            body = {"error": "temporarily_unavailable", "error_description": f"pocketmem: {exc}"}
            headers = {"Retry-After": str(RETRY_AFTER_SECONDS), "Cache-Control": "no-store"}
            await JSONResponse(body, status_code=503, headers=headers)(scope, receive, send)


class LocalAccessMiddleware:
    """Marks token-less requests to the transport's paths with the process-local identity while the policy allows
    them (the page under /ui decides its visitors itself, web/access.py)."""

    PATHS = frozenset(path.rstrip("/") for path in (MCP_PATH, SSE_PATH, SSE_MESSAGE_PATH))

    def __init__(self, app: ASGIApp, local: LocalAccess) -> None:
        self.app = app
        self.local = local

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["path"].rstrip("/") in self.PATHS
                and not any(k == b"authorization" for k, _ in scope["headers"])):
            if await self.local.allowed():
                header = (b"authorization", f"Bearer {self.local.secret}".encode())
                scope = {**scope, "headers": [*scope["headers"], header]}
        await self.app(scope, receive, send)


@dataclass(frozen=True)
class NetworkOptions:
    transport: str  # "http" | "sse"
    host: str = "127.0.0.1"
    port: int = 8765
    auth: AuthMode = AuthMode.auto
    allowed_hosts: tuple[str, ...] = ()
    # Extra routes mounted beside the transport, e.g. the management page under /ui (web.server.mount_page);
    # a hook, so this layer never imports the page's. It returns how refusals under its paths are said (HeaderGuard).
    mount: Callable[[Starlette, PocketMem, Anonymous, NetworkOptions], Mapping[str, Refusal]] | None = None
    # Streamable HTTP without server-side sessions, JSON responses (any process can answer any request).
    stateless: bool = False
    workers: int = 1
    listen_fd: int | None = None  # a worker's inherited listening socket (workers.py)
    worker_index: int = 0
    argv: tuple[str, ...] = ()  # the `serve` command line, repeated for each worker

    @property
    def ui(self) -> bool:
        return self.mount is not None


def build_app(settings: Settings, app: PocketMem, options: NetworkOptions, anonymous: Anonymous) -> ASGIApp:
    """The ASGI app for one transport; `app` must be open while it serves."""
    tokens = TokenService(app.store, app.clock)
    allowed = functools.partial(tokens.serves_anonymous, anonymous)
    local = LocalAccess(settings.user, allowed) if anonymous is not Anonymous.never else None
    verifier = StoreTokenVerifier(tokens, local)
    mcp = build_server(settings, app=app, token_verifier=verifier, clients=verifier.clients())
    served = transport_security(options.host, options.allowed_hosts)
    # The Host / Origin checks are HeaderGuard's (strict parsing); the SDK still checks Content-Type.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    starlette: Starlette
    if options.transport == "http":
        starlette = mcp.streamable_http_app(
            streamable_http_path=MCP_PATH,
            max_request_body_size=settings.max_request_bytes,
            transport_security=security,
            host=options.host,
            stateless_http=options.stateless,
            json_response=options.stateless,
        )
        if not options.stateless:
            _closing_revoked_sessions(starlette, mcp.session_manager, verifier)
    else:
        starlette = mcp.sse_app(
            sse_path=SSE_PATH,
            message_path=SSE_MESSAGE_PATH,
            max_request_body_size=settings.max_request_bytes,
            transport_security=security,
            host=options.host,
        )
    answers = options.mount(starlette, app, anonymous, options) if options.mount is not None else {}
    # Outermost first: HeaderGuard, Starlette's error handler, StoreDownGuard, LocalAccessMiddleware, the SDK's auth.
    if local is not None:
        starlette.add_middleware(LocalAccessMiddleware, local=local)
    starlette.add_middleware(StoreDownGuard)
    return HeaderGuard(starlette, served, answers)


def _describe(options: NetworkOptions, port: int, anonymous: Anonymous, active_tokens: int, open_: bool = True) -> str:
    host = f"[{options.host}]" if ":" in options.host else options.host
    path = MCP_PATH if options.transport == "http" else SSE_PATH
    kind = "streamable HTTP" if options.transport == "http" else "SSE"
    if anonymous is Anonymous.always:
        access = "no token needed (--auth none)"
    elif anonymous is Anonymous.until_first_token and active_tokens == 0 and open_:
        access = "no token needed until one is created with `pocketmem token create`"
    elif anonymous is Anonymous.until_first_token and active_tokens == 0:
        access = (
            "bearer token required: a token existed before and every one is revoked; create one with "
            "`pocketmem token create`, or allow requests without one with `pocketmem token allow-anonymous` "
            "or --auth none"
        )
    else:
        access = "bearer token required"
    mode = ""
    if options.workers > 1:
        mode = f", {options.workers} stateless workers"
    elif options.stateless:
        mode = ", stateless"
    return f"pocketmem: MCP over {kind} at http://{host}:{port}{path} ({access}{mode})"


def listen(host: str, port: int) -> socket.socket:
    """Bind before serving, so a taken port is a one-line error rather than a server traceback."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host.strip("[]"), port), family=family)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def check_options(options: NetworkOptions) -> NetworkOptions:
    if options.transport != "http" and (options.stateless or options.workers > 1):
        raise ConfigError("--stateless and --workers apply to --transport http (SSE needs a session per client)")
    if not 1 <= options.workers <= MAX_WORKERS:
        raise ConfigError(f"--workers must be between 1 and {MAX_WORKERS}")
    # Several processes: a legacy session would live in one of them only, so every worker is stateless.
    return replace(options, stateless=True) if options.workers > 1 else options


async def access_for(settings: Settings, options: NetworkOptions) -> tuple[Anonymous, int]:
    """Open the store just long enough to apply the access policy (the parent of several workers)."""
    async with PocketMem(settings) as app:
        active_tokens = await TokenService(app.store, app.clock).count_active()
    return access_policy(options.host, options.auth, active_tokens, options.allowed_hosts), active_tokens


def serve_workers(settings: Settings, options: NetworkOptions) -> int:
    """The parent of `--workers N`: check, bind, announce, then supervise the workers until interrupted."""
    anonymous, active_tokens = asyncio.run(access_for(settings, options))
    sock = listen(options.host, options.port)
    port = sock.getsockname()[1]
    print(_describe(options, port, anonymous, active_tokens), file=sys.stderr, flush=True)
    return Supervisor(sock, options.argv, options.workers).run()


async def serve(settings: Settings, options: NetworkOptions, *, app: PocketMem | None = None) -> None:
    """Run until interrupted, the app open for serving (it takes the store for its embedder: app.py). Prints the
    URL (with the real port when --port 0) on stderr once listening."""
    worker = options.listen_fd is not None
    if worker and options.worker_index > 0:
        # One worker keeps the timers; the others only answer requests.
        settings = settings.model_copy(update={"maintain_interval": 0, "sync_interval": 0})
    app = app or PocketMem(settings)
    await app.open(serving=True)
    try:
        await _serve_app(settings, options, app, worker)
    finally:
        await app.close()


async def _serve_app(settings: Settings, options: NetworkOptions, app: PocketMem, worker: bool) -> None:
    """`serve`'s body, with the app open for serving."""
    import uvicorn

    active_tokens = await TokenService(app.store, app.clock).count_active()
    anonymous = access_policy(options.host, options.auth, active_tokens, options.allowed_hosts)
    asgi = build_app(settings, app, options, anonymous)
    level = logging.getLogger().getEffectiveLevel()
    config = uvicorn.Config(
        asgi,
        host=options.host,
        port=options.port,
        log_config=None,  # keep pocketmem's stderr logging
        log_level=level,
        access_log=level <= logging.INFO,
        server_header=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    server = uvicorn.Server(config)
    sock = adopt_socket(options.listen_fd) if options.listen_fd is not None else listen(options.host, options.port)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not serving.done():  # noqa: ASYNC110 - uvicorn has a started flag, no event
        await asyncio.sleep(0.02)
    if server.started and not worker:
        port = server.servers[0].sockets[0].getsockname()[1]
        open_ = await TokenService(app.store, app.clock).anonymous_allowed()
        print(_describe(options, port, anonymous, active_tokens, open_), file=sys.stderr, flush=True)
        if options.ui:
            host = f"[{options.host}]" if ":" in options.host else options.host
            print(f"pocketmem: memory management page at http://{host}:{port}/ui/memories", file=sys.stderr,
                  flush=True)
    orphaned = asyncio.create_task(stop_when_orphaned(server)) if worker else None
    try:
        await serving
    finally:
        if orphaned is not None:
            orphaned.cancel()


async def stop_when_orphaned(server: Any, interval: float = 1.0) -> None:
    """A worker whose parent is gone (killed outright) stops cleanly instead of serving on alone."""
    parent = os.getppid()
    while os.getppid() == parent:  # noqa: ASYNC110 - a parent's death has no event to wait on, only a changed ppid
        await asyncio.sleep(interval)
    log.warning("the parent process is gone; this worker stops")
    server.should_exit = True
