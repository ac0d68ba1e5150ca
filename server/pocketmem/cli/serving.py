"""`pocketmem serve` and `pocketmem ui`, once parsed. Over stdio the store is opened once, before the protocol
starts, and the server is built with the cyclic garbage collector off (docs/speed.md, *Start-up*); over http and
sse, the network transports of mcp/http.py; `ui`, the management page alone.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pocketmem.base.config import Settings
from pocketmem.base.errors import ConfigError


def serve(settings: Settings, args: argparse.Namespace) -> int:
    if args.transport == "stdio":
        if args.auth != "auto" or args.allowed_host or args.ui:
            raise ConfigError(
                "--auth, --allowed-host and --ui apply to --transport http or sse; stdio acts as POCKETMEM_USER"
            )
        import anyio

        anyio.run(_stdio, settings, args)
        return 0
    from pocketmem.mcp import http

    options = http.check_options(http.NetworkOptions(
        transport=args.transport,
        host=args.host,
        port=args.port,
        auth=http.AuthMode(args.auth),
        allowed_hosts=tuple(args.allowed_host),
        mount=_page_hook() if args.ui else None,
        stateless=args.stateless,
        workers=args.workers,
        listen_fd=args.listen_fd,
        worker_index=args.worker_index,
        argv=tuple(args.argv),
    ))
    if options.workers > 1 and options.listen_fd is None:
        return http.serve_workers(settings, options)
    asyncio.run(http.serve(settings, options))
    return 0


async def _stdio(settings: Settings, args: argparse.Namespace) -> None:
    with _collector_off():
        from pocketmem.app import PocketMem
        from pocketmem.mcp.server import build_server
        from pocketmem.mcp.stdio import run_stdio

        app = PocketMem(settings)
        server = build_server(settings, app=app)
        # The store is opened before the protocol starts: a store or embedder fault is then one line on stderr and
        # a non-zero exit, not an ExceptionGroup from inside the server's lifespan, which shares this opening.
        await app.open(serving=True, warm=False)  # the server loads the text tools after its handshake, not here
    try:
        if sys.stdin is not None and sys.stdin.isatty():
            print("pocketmem: waiting for an MCP client on stdin (a host such as Claude Desktop starts this command; "
                  "`pocketmem client-config` prints its entry). Ctrl-C stops.", file=sys.stderr)
        args.protocol_started = True  # from here a failure is the server's, reported through the protocol
        await run_stdio(server)
    finally:
        await app.close()


@contextmanager
def _collector_off() -> Iterator[None]:
    """A server's start-up without the cyclic garbage collector. Start-up makes some 150,000 objects (modules,
    classes, schemas) that live as long as the process, and few cycles among them (about 4,000 objects): the
    collector would walk them again and again while they are made, about 8% of start-up. Once the server is built
    they are frozen (gc.freeze), so the collections that follow skip them too."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _page_hook() -> Any:
    from pocketmem.web.server import mount_page

    return mount_page


def ui(settings: Settings, args: argparse.Namespace) -> int:
    from pocketmem.web.server import serve_ui

    asyncio.run(serve_ui(settings, port=args.port, open_browser=not args.no_browser))
    return 0
