"""The `pocketmem` command: serve, stats, doctor, reindex.

Settings come from the environment (POCKETMEM_*) and are validated here, once; errors become
one readable message on stderr and a non-zero exit. stdout is kept for results (and, for
`serve` over stdio, for the protocol alone).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from . import __version__
from .config import Settings, load_settings
from .errors import PocketmemError

log = logging.getLogger("pocketmem")


def _configure_logging(settings: Settings, verbose: int) -> None:
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose == 1 else getattr(logging, settings.log_level)
    logging.basicConfig(stream=sys.stderr, level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _run(coro_fn: Callable[[Settings], Awaitable[int]], settings: Settings) -> int:
    return asyncio.run(coro_fn(settings))


async def _stats(settings: Settings) -> int:
    from .app import PocketMem, dumps

    async with PocketMem(settings) as app:
        print(dumps(await app.stats(settings.user)))
    return 0


async def _doctor(settings: Settings) -> int:
    from .app import PocketMem, dumps

    app = PocketMem(settings)
    problems: list[str] = []
    try:
        await app.open(check_embedder=False)
    except PocketmemError as exc:
        print(dumps({"database": str(settings.db_path), "ok": False, "error": str(exc)}))
        return 1
    try:
        report = await app.doctor()
        store = report["store"]
        if store["integrity"] != "ok":
            problems.append(f"integrity_check: {store['integrity']}")
        if not store["vectors_available"]:
            problems.append("sqlite-vec is not loaded: recall uses the keyword index only (pip install sqlean.py)")
        if store["keyword_orphans"] or store["vector_mismatches"] or store["count_mismatches"]:
            problems.append("the indexes disagree with the memories table: run `pocketmem reindex`")
        if not store["schema_current"]:
            problems.append("the schema is not current")
        if not report["embedder"]["ok"]:
            problems.append(f"embedder: {report['embedder']['error']}")
        stored = report["embedder"]["store_embedder"]
        if stored is not None and stored != report["embedder"]["tag"]:
            problems.append(f"the store was embedded by {stored}; run `pocketmem reindex`")
        report["ok"] = not problems
        report["problems"] = problems
        print(dumps(report))
    finally:
        await app.close()
    return 0 if not problems else 1


async def _reindex(settings: Settings) -> int:
    from .app import PocketMem

    app = PocketMem(settings)
    await app.open(check_embedder=False)
    try:
        count = await app.reindex()
    finally:
        await app.close()
    print(f"re-embedded {count} memories with {app.embedder.tag}", file=sys.stderr)
    return 0


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    from .server import build_server

    server = build_server(settings)
    if args.transport == "stdio":
        server.run()
    elif args.transport == "http":
        server.run("streamable-http", host=args.host, port=args.port, streamable_http_path="/mcp")
    else:
        server.run("sse", host=args.host, port=args.port)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pocketmem",
        description="Long-term memory for LLM agents over MCP. Settings come from POCKETMEM_* variables.",
    )
    parser.add_argument("--version", action="version", version=f"pocketmem {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    serve.add_argument("--transport", choices=("stdio", "http", "sse"), default="stdio")
    serve.add_argument("--host", default="127.0.0.1", help="address for http/sse (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port for http/sse (default 8765)")

    sub.add_parser("stats", help="print counts for POCKETMEM_USER as JSON")
    sub.add_parser("doctor", help="check the database, the sqlite-vec extension, the schema and the embedder")
    sub.add_parser("reindex", help="re-embed every memory with the configured embedder (after changing it)")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings()
        _configure_logging(settings, args.verbose)
        commands: dict[str, Callable[[], int]] = {
            "serve": lambda: _serve(settings, args),
            "stats": lambda: _run(_stats, settings),
            "doctor": lambda: _run(_doctor, settings),
            "reindex": lambda: _run(_reindex, settings),
        }
        code = commands[args.command]()
    except PocketmemError as exc:
        print(f"pocketmem: {exc}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


