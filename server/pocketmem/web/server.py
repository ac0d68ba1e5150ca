"""`pocketmem ui`: the management page on 127.0.0.1, a free port, opened in the browser.

The same access rules as `pocketmem serve --transport http` on loopback with --auth auto, read from the
same stored auth state: no sign-in until the first token is created, a token sign-in from then on (also
after every token is revoked, until `pocketmem token allow-anonymous`). `mount_page` puts the page under /ui of the HTTP
transport's app (`pocketmem serve --transport http --ui`).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import webbrowser

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp

from pocketmem.app import PocketMem
from pocketmem.base.config import Settings
from pocketmem.mcp.http import (
    AuthMode,
    HeaderGuard,
    NetworkOptions,
    Refusal,
    access_policy,
    listen,
    transport_security,
)
from pocketmem.service.manage.tokens import Anonymous, TokenService
from pocketmem.web.access import WebAccess, https_names
from pocketmem.web.app import build_web_app, page_refusal

log = logging.getLogger(__name__)

UI_PATH = "/ui"


def make_access(pm: PocketMem, anonymous: Anonymous, host: str, allowed_hosts: tuple[str, ...] = ()) -> WebAccess:
    return WebAccess(
        tokens=TokenService(pm.store, pm.clock), clock=pm.clock, anonymous=anonymous, local_user=pm.settings.user,
        served=transport_security(host, allowed_hosts), https_only=https_names(allowed_hosts),
    )


def mount_page(
    app: Starlette, pm: PocketMem, anonymous: Anonymous, options: NetworkOptions
) -> dict[str, Refusal]:
    """The HTTP transport's hook (NetworkOptions.mount): the page under /ui of `app` with the transport's access
    rules; the transport's HeaderGuard says its refusals on /ui in the page's language."""
    access = make_access(pm, anonymous, options.host, options.allowed_hosts)
    app.router.routes.append(Mount(UI_PATH, app=build_web_app(pm, access)))
    return {UI_PATH: page_refusal}


def ui_app(pm: PocketMem, access: WebAccess) -> ASGIApp:
    """The standalone page: / redirects to /ui/; the same HeaderGuard as `serve`'s, every refusal the page's."""

    async def to_ui(request: Request) -> RedirectResponse:
        return RedirectResponse(f"{UI_PATH}/memories", status_code=307)

    page = Starlette(routes=[Route("/", to_ui), Mount(UI_PATH, app=build_web_app(pm, access))])
    return HeaderGuard(page, access.served, {"/": page_refusal})


async def standalone(pm: PocketMem, host: str) -> tuple[ASGIApp, bool]:
    """`pocketmem ui`'s app over an open store (--auth auto on `host`), and whether it opens without a sign-in."""
    tokens = TokenService(pm.store, pm.clock)
    anonymous = access_policy(host, AuthMode.auto, await tokens.count_active())
    return ui_app(pm, make_access(pm, anonymous, host)), await tokens.serves_anonymous(anonymous)


async def serve_ui(
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    open_browser: bool = True,
    pm: PocketMem | None = None,
) -> None:
    import uvicorn

    pm = pm or PocketMem(settings)
    async with pm:
        asgi, open_ = await standalone(pm, host)
        level = logging.getLogger().getEffectiveLevel()
        config = uvicorn.Config(
            asgi, log_config=None, log_level=level, access_log=level <= logging.INFO, server_header=False,
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve(sockets=[listen(host, port)]))
        while not server.started and not serving.done():  # noqa: ASYNC110 - uvicorn has a started flag, no event
            await asyncio.sleep(0.02)
        if server.started:
            bound = server.servers[0].sockets[0].getsockname()[1]
            url = f"http://{host}:{bound}{UI_PATH}/memories"
            access = "no sign-in needed until a token is created" if open_ else "sign in with a token"
            print(f"pocketmem: memory management page at {url} ({access}); Ctrl-C stops it", file=sys.stderr,
                  flush=True)
            if open_browser:
                threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
        await serving
