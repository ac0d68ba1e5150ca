"""The `pocketmem` command: serve, ui, token, stats, sync, doctor, reindex, maintain, export, import,
and the commands for people in cli/people.py (list, search, show, add, forget, restore, trash, pending).

Settings come from the environment (POCKETMEM_*) and are validated here, once; errors become
one readable message on stderr and a non-zero exit. stdout is kept for results (and, for
`serve` over stdio, for the protocol alone).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import os
import sys
import traceback
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from pocketmem import __version__
from pocketmem.base.config import Settings, load_settings
from pocketmem.base.errors import ConfigError, InvalidInput, PocketmemError
from pocketmem.cli.install import add_install_commands
from pocketmem.cli.people import add_people_commands
from pocketmem.cli.progress import progress_bar
from pocketmem.cli.safety import (
    allow_import,
    allow_maintenance,
    counted,
    export_summary,
    import_summary,
    maintenance_failures,
    maintenance_summary,
)
from pocketmem.cli.serving import serve, ui
from pocketmem.cli.support import (
    add_common_options,
    configure_logging,
    finish_parser,
    for_people,
    port_number,
    warn_unknown_variables,
)
from pocketmem.core.shown_time import absolute

log = logging.getLogger("pocketmem")


def _run(coro_fn: Callable[[Settings], Coroutine[Any, Any, int]], settings: Settings) -> int:
    return asyncio.run(coro_fn(settings))


async def _stats(settings: Settings) -> int:
    from pocketmem.app import PocketMem, dumps

    async with PocketMem(settings) as app:
        print(dumps(await app.stats(settings.user)))
    return 0


PLACES = {"library": "the cloud library", "notebook": "this notebook"}  # a skipped row's `where`, in words
SETTLED = {  # a sync conflict's `resolution`, in words
    "merged": "patched on two devices; both sides' appends are kept",
    "later_wins": "patched on two devices with a replace; the later version is kept, the other side's patches "
    "are in its revisions (pocketmem show)",
}


async def _sync(settings: Settings) -> int:
    from pocketmem.app import PocketMem, dumps

    if settings.cloud_url is None:
        raise ConfigError(
            "pocketmem sync needs POCKETMEM_CLOUD_URL (postgresql://...), the cloud library to sync with"
        )
    async with PocketMem(settings) as app:
        assert app.sync is not None
        with progress_bar("syncing", "users") as progress:
            report = await app.sync.run(progress)
    print(dumps(report.model_dump(mode="json")))
    outcome = f"failed: {report.error}" if not report.ok else "ok"
    if report.ok and report.skipped:
        outcome = f"ok but for {counted(report.skipped, 'row')} left out"
    if report.ok and report.conflicts:
        outcome += f", {counted(report.conflicts, 'core memory')} patched on two devices"
    print(f"synced {counted(len(report.users), 'user')}: {outcome}", file=sys.stderr)
    for user in report.users:
        for conflict in user.conflicts:
            settled = SETTLED[conflict["resolution"]]
            print(f"pocketmem: core memory {conflict['id']} of user {user.user_id!r} {settled}", file=sys.stderr)
    for user in report.users:
        for row in user.skipped:
            place = PLACES[row["where"]]
            print(
                f"pocketmem: left out {row['table']} row {row['id']} of user {user.user_id!r} in {place}: "
                f"{row['why']}; {row['advice']}",
                file=sys.stderr,
            )
    return 0 if report.ok and not report.skipped else 1


async def _doctor(settings: Settings, args: argparse.Namespace) -> int:
    """The report on stdout, exit 1 when it lists a problem; the doctor itself never ends in an error."""
    from pocketmem.app import PocketMem, dumps, make_store
    from pocketmem.service.upkeep.doctor import LOCK_WAIT, missing_store, opening_problems

    problems, note = missing_store(settings)
    if problems or note:
        print(dumps({"database": settings.database_label, "ok": not problems, "problems": problems, "note": note}))
        return 1 if problems else 0
    # Every wait for another process's lock bounded by LOCK_WAIT, the opening's included.
    app = PocketMem(settings, store=make_store(settings, wait=LOCK_WAIT))
    try:
        # The store alone: what the rest of the app reads on opening (store_meta) may be what is missing.
        await app.store.open()
    except Exception as exc:  # noqa: BLE001 - a store that cannot be opened is the report
        why = str(exc) if isinstance(exc, PocketmemError) else f"{type(exc).__name__}: {exc}"
        problems = opening_problems(settings, exc)
        print(dumps({"database": settings.database_label, "ok": False, "error": why, "problems": problems}))
        return 1
    try:
        report = await app.doctor(repair=args.repair)
    finally:
        try:
            await app.close()
        except Exception:  # noqa: BLE001 - the report is what matters; closing is logged
            log.debug("closing after doctor failed", exc_info=True)
    print(dumps(report))
    return 0 if report["ok"] else 1


async def _reindex(settings: Settings) -> int:
    from pocketmem.app import PocketMem

    app = PocketMem(settings)
    await app.open()
    try:
        with progress_bar("re-embedding", "memories") as progress:
            count = await app.reindex(progress)
    finally:
        await app.close()
    print(f"re-embedded {count} memories with {app.embedder.tag}", file=sys.stderr)
    return 0


async def _maintain(settings: Settings, args: argparse.Namespace) -> int:
    from pocketmem.app import PocketMem, dumps
    from pocketmem.base.clock import FixedClock

    clock = None
    if args.now is not None:
        from pocketmem.core.instants import accept

        clock = FixedClock(accept("--now", args.now, settings.zone))
    async with PocketMem(settings, clock=clock) as app:
        if not await allow_maintenance(app, app.clock.now(), args):
            return 0 if args.dry_run else 1
        with progress_bar("maintenance", "users") as progress:
            report = await app.maintenance.run(progress=progress)
        files = await app.profile_files.sync_all()
        damage = app.store.damage
    out = report.model_dump(mode="json")
    edits = [vars(f) for f in files if f.taken_in or f.problems or f.failed]
    if edits:
        out["profile_files"] = edits  # edits people saved in Persona.md, User.md, Project.md, Insights.md
    print(dumps(out))
    print(maintenance_summary(report, settings.zone), file=sys.stderr)
    failed = maintenance_failures(report, damage, files)
    for line in failed:
        print(f"pocketmem: {line}", file=sys.stderr)
    return 1 if failed else 0


async def _export(settings: Settings, args: argparse.Namespace) -> int:
    from pocketmem.app import PocketMem
    from pocketmem.base.files import check_target

    users = [args.user] if args.user else None
    if args.output is not None and str(args.output) != "-":
        check_target(args.output, "-o")
    skipped: list[dict[str, str]] = []
    async with PocketMem(settings) as app:
        async with app.store.read() as reader:
            held = await reader.user_ids()
        holds = ", ".join(held[:10]) + (", …" if len(held) > 10 else "") or "none"
        if args.user and args.user not in held:  # a mistyped user would export an empty file, or an empty card
            raise InvalidInput("--user", f"no user {args.user!r} in this store; it holds {holds}")
        if args.markdown is not None:
            user = args.user or settings.user  # one user's files: POCKETMEM_USER only when no one else is there
            if not args.user and any(other != user for other in held):
                raise InvalidInput(
                    "--user", f"--markdown writes one user's files and this store holds {holds}; name one"
                )
            for path in await app.profile_files.export_markdown(user, args.markdown):
                print(f"wrote {path}", file=sys.stderr)
            if args.output is None:
                return 0
        if args.output is None or str(args.output) == "-":
            with progress_bar("exporting", "users") as progress:
                counts = await app.exporter.export(
                    sys.stdout, users, events=args.events, skipped=skipped, progress=progress
                )
        else:
            # Written next to the target and renamed, so an interrupted export never leaves half a file.
            from pocketmem.base.files import atomic_write

            buffer = io.StringIO()
            with progress_bar("exporting", "users") as progress:
                counts = await app.exporter.export(
                    buffer, users, events=args.events, skipped=skipped, progress=progress
                )
            atomic_write(args.output, buffer.getvalue())
    print(export_summary(counts, args.output), file=sys.stderr)
    for row in skipped:
        print(
            f"pocketmem: left out user {row['user_id']}: {row['table']} row {row['id']} cannot be read "
            f"({row['why']}); run `pocketmem doctor --repair`, then export again",
            file=sys.stderr,
        )
    return 1 if skipped else 0


async def _import(settings: Settings, args: argparse.Namespace) -> int:
    from pocketmem.app import PocketMem, dumps
    from pocketmem.service.transfer.import_file import file_lines

    if str(args.file) == "-":
        lines = list(file_lines(sys.stdin.buffer))
    else:
        try:
            with args.file.open("rb") as file:
                lines = list(file_lines(file))
        except OSError as exc:
            raise InvalidInput("FILE", f"cannot read {args.file}: {exc.strerror}") from None
    async with PocketMem(settings) as app:
        await allow_import(app, lines, args)
        with progress_bar("importing", "memories") as progress:
            report = await app.exporter.import_lines(lines, progress)
        print(dumps(report.model_dump(mode="json")), flush=True)
        for item in report.refused:
            print(
                f"pocketmem: refused line {item.line} ({item.type} {item.id or ''}): {item.field}: {item.why}",
                file=sys.stderr,
            )
        print(import_summary(report), file=sys.stderr, flush=True)
        # The rows are stored; their vectors now (stopping here loses nothing: the server computes the rest).
        with progress_bar("embedding", "memories") as progress:
            await app.embed_queue.run_once(progress)
    return 1 if report.refused else 0  # the rest is stored; a refused row is not


def _instant(text: str) -> datetime:
    """--now: an ISO 8601 date or time; without an offset it is wall-clock time in POCKETMEM_TZ."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r} (e.g. 2026-12-26T10:00+08:00)") from None


async def _token(settings: Settings, args: argparse.Namespace) -> int:
    from pocketmem.app import PocketMem, dumps
    from pocketmem.service.manage.tokens import TokenService

    app = PocketMem(settings)
    await app.open()
    try:
        tokens = TokenService(app.store, app.clock)
        if args.token_command == "create":
            new = await tokens.create(args.user, args.name)
            print(new.token)
            print(
                f"created token {new.record.id} for user {new.record.user_id!r}. It is shown only this once; "
                "clients send it as `Authorization: Bearer <token>`.",
                file=sys.stderr,
            )
        elif args.token_command == "list":
            records = await tokens.list(args.user, include_revoked=args.all)
            rows = [r.model_dump(mode="json", exclude={"token_hash"}) for r in records]
            if args.json:
                print(dumps(rows))
            else:
                print(_token_table(rows, settings.zone))
        elif args.token_command == "allow-anonymous":
            active = await tokens.allow_anonymous()
            print(
                "loopback requests without a token act as POCKETMEM_USER again (--auth auto)"
                + (f" once the {active} active token(s) are revoked" if active else "")
                + "; the next `pocketmem token create` closes the server again",
                file=sys.stderr,
            )
        else:
            for token_id in args.token_id:
                record = await tokens.revoke(token_id)
                print(f"revoked token {record.id} of user {record.user_id!r}", file=sys.stderr)
    finally:
        await app.close()
    return 0


def _token_table(rows: list[dict[str, Any]], zone: tzinfo) -> str:
    columns = ("id", "user_id", "name", "created_at", "last_used_at", "revoked_at")
    cells = [[absolute(row[c], zone) if c.endswith("_at") and row[c] else str(row[c] or "-") for c in columns]
             for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines) if cells else "no tokens (create one with `pocketmem token create --user NAME`)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pocketmem",
        description="Long-term memory for LLM agents over MCP. Settings come from POCKETMEM_* variables.",
    )
    parser.add_argument("--version", action="version", version=f"pocketmem {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _add_serve_commands(sub)
    _add_token_commands(sub)
    _add_store_commands(sub)
    add_people_commands(sub)
    add_install_commands(sub)
    add_common_options(parser, top=True)
    finish_parser(sub)
    return parser


def _add_serve_commands(sub: Any) -> None:
    """`serve` (the MCP server) and `ui` (the management page alone)."""
    serve = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    serve.add_argument("--transport", choices=("stdio", "http", "sse"), default="stdio",
                       help="stdio (default: the client starts this process), http (streamable HTTP at /mcp) "
                       "or sse (the older HTTP+SSE transport at /sse)")
    serve.add_argument("--host", default="127.0.0.1", help="address for http/sse (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=port_number, default=8765, help="port for http/sse (default 8765; 0 picks a free one)"
    )
    serve.add_argument(
        "--auth",
        choices=("auto", "token", "none"),
        default="auto",
        help="http/sse: auto (default) needs a bearer token off loopback, and on loopback once any token exists; "
        "token always needs one; none (loopback only) accepts requests without one as POCKETMEM_USER",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="http/sse: a host name or address clients use to reach the server (Host header check against DNS "
        "rebinding); repeatable; needed with --host 0.0.0.0 and behind a reverse proxy",
    )

    serve.add_argument(
        "--ui",
        action="store_true",
        help="http/sse: also serve the memory management page under /ui (same access rules)",
    )
    serve.add_argument(
        "--stateless",
        action="store_true",
        help="http: no server-side MCP session, JSON responses; any process can answer any request "
        "(no resource subscriptions, no progress or sampling mid-call)",
    )
    serve.add_argument(
        "--workers", type=int, default=1, metavar="N",
        help="http: N server processes on one port, each stateless (default 1); see docs/speed.md",
    )
    serve.add_argument("--listen-fd", type=int, default=None, help=argparse.SUPPRESS)
    serve.add_argument("--worker-index", type=int, default=0, help=argparse.SUPPRESS)
    ui = sub.add_parser("ui", help="open the memory management page in the browser (127.0.0.1, a free port)")
    ui.add_argument("--port", type=port_number, default=0, help="port (default 0: a free one)")
    ui.add_argument("--no-browser", action="store_true", help="print the address without opening a browser")


def _add_token_commands(sub: Any) -> None:
    """`token create | list | revoke | allow-anonymous`."""
    token = sub.add_parser("token", help="manage bearer tokens of the http/sse transports (one user per token)")
    token_sub = token.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    create = token_sub.add_parser("create", help="create a token for a user and print it (only this once)")
    create.add_argument("--user", required=True, help="the user the token acts as")
    create.add_argument("--name", help="a label to recognise it by, e.g. the client or machine")
    listing = token_sub.add_parser("list", help="list tokens (never the tokens themselves)")
    listing.add_argument("--user", help="only this user's tokens")
    listing.add_argument("--all", action="store_true", help="include revoked tokens")
    listing.add_argument("--json", action="store_true", help="print JSON")
    revoke = token_sub.add_parser("revoke", help="revoke tokens by id; requests carrying them get 401 at once")
    revoke.add_argument("token_id", nargs="+", metavar="ID", help="token ids, as `pocketmem token list` shows them")
    token_sub.add_parser(
        "allow-anonymous",
        help="loopback --auth auto: serve requests without a token again once no token is active "
        "(revoking the last token alone keeps the server closed)",
    )


def _add_store_commands(sub: Any) -> None:
    """The commands that look after the store: stats, sync, doctor, reindex, maintain, export, import."""
    sub.add_parser("stats", help="print counts for POCKETMEM_USER as JSON (and the sync state, with a cloud library)")
    sub.add_parser(
        "sync",
        help="sync this notebook with the cloud library (POCKETMEM_CLOUD_URL) once, by POCKETMEM_SYNC_SCOPES",
    )
    doctor = sub.add_parser(
        "doctor", help="check the database, every stored time, the sqlite-vec extension, the schema and the embedder"
    )
    doctor.add_argument(
        "--repair", action="store_true",
        help="repair what the report lists as repairable: recreate missing tables (empty when they held data of "
        "their own), columns, indexes and triggers, rebuild the keyword and vector indexes from the memories, "
        "rewrite stored times that cannot be read back, mend rows that cannot be read or set them aside (their "
        "values kept in a set_aside event)",
    )
    sub.add_parser("reindex", help="re-embed every memory with the configured embedder (after changing it)")

    maintain = sub.add_parser("maintain", help="decay, expiry and purge now (the server also runs it on a timer)")
    maintain.add_argument("--now", type=_instant, metavar="ISO", help="run as if it were this time (default: now)")
    maintain.add_argument("--dry-run", action="store_true", help="only show what would be purged; change nothing")
    maintain.add_argument("--yes", action="store_true", help="purge without asking, even with --now in the future")

    export = sub.add_parser("export", help="write every memory, the trash, tombstones, revisions and pending as JSONL")
    export.add_argument("-o", "--output", type=Path, metavar="FILE", help="file to write (default: stdout)")
    export.add_argument("--events", action="store_true", help="include the event log")
    export.add_argument("--user", help="only this user (default: every user; with --markdown, POCKETMEM_USER, "
                        "and required when the store holds other users)")
    export.add_argument(
        "--markdown", type=Path, metavar="DIR",
        help="write the profile files instead: DIR/User.md (the user card), Persona.md, Project.md, Insights.md"
    )

    import_ = sub.add_parser("import", help="read an export file; rows already in the store are skipped")
    import_.add_argument("file", type=Path, metavar="FILE", help="a pocketmem export (JSONL), or - for stdin")
    import_.add_argument("--allow-evict", action="store_true",
                         help="import even when it pushes a user over POCKETMEM_MAX_ACTIVE "
                              "(the least important go to the trash)")


def _cause(group: BaseExceptionGroup) -> BaseException:
    """The first exception inside a (nested) group, preferring one pocketmem raised on purpose."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    return next((e for e in leaves if isinstance(e, PocketmemError)), leaves[0] if leaves else group)


def _failed(cause: BaseException, debug: bool, shown: BaseException) -> int:
    """One line on stderr naming the cause (and, for an unexpected one, how to see more); the exit code."""
    if debug:
        traceback.print_exception(shown)
    if isinstance(cause, PocketmemError):
        print(f"pocketmem: {cause}", file=sys.stderr)
        return 2
    if isinstance(cause, KeyboardInterrupt):
        return 130
    print(f"pocketmem: {_unexpected(cause)}", file=sys.stderr)
    return 1


def _unexpected(cause: BaseException) -> str:
    return (
        f"unexpected {type(cause).__name__}: {cause}. Run `pocketmem doctor` to check the store; "
        "add --debug to see the traceback"
    )


def _answer_start_failure(args: argparse.Namespace, cause: BaseException | None) -> None:
    """`serve` over stdio that failed before the protocol started: answer the host until stdin closes
    (mcp/failed_start.py), so it shows the cause rather than a closed connection. Not on a terminal."""
    if cause is None or isinstance(cause, KeyboardInterrupt) or getattr(args, "protocol_started", False):
        return
    stdio = args.command == "serve" and getattr(args, "transport", None) == "stdio"
    if not stdio or sys.stdin is None or sys.stdin.isatty():
        return
    import anyio

    from pocketmem.mcp.failed_start import answer_failed_start

    text = str(cause) if isinstance(cause, PocketmemError) else _unexpected(cause)
    try:
        anyio.run(answer_failed_start, text)
    except (Exception, KeyboardInterrupt):  # noqa: BLE001 - the host left; the exit code is already decided
        logging.getLogger(__name__).debug("answering the start-up failure over stdio stopped", exc_info=True)


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    failure: BaseException | None = None
    try:
        settings = load_settings()
        configure_logging(settings, args.verbose, args.log_level)
        warn_unknown_variables()
        commands: dict[str, Callable[[], int]] = {
            "serve": lambda: serve(settings, args),
            "stats": lambda: _run(_stats, settings),
            "sync": lambda: _run(_sync, settings),
            "doctor": lambda: asyncio.run(_doctor(settings, args)),
            "reindex": lambda: _run(_reindex, settings),
            "maintain": lambda: asyncio.run(_maintain(settings, args)),
            "export": lambda: asyncio.run(_export(settings, args)),
            "import": lambda: asyncio.run(_import(settings, args)),
            "token": lambda: asyncio.run(_token(settings, args)),
            "ui": lambda: ui(settings, args),
        }
        handler = getattr(args, "handler", None)
        code = asyncio.run(handler(settings, args)) if handler is not None else commands[args.command]()
    except PocketmemError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"pocketmem: {for_people(str(exc))}", file=sys.stderr)
        code, failure = 2, exc
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # `pocketmem export | head`: the reader left; not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    except BaseExceptionGroup as group:  # from a task group: report the cause, one line
        failure = _cause(group)
        code = _failed(failure, args.debug, group)
    except Exception as exc:  # noqa: BLE001 - the edge: one line naming the cause, the traceback only with --debug
        code, failure = _failed(exc, args.debug, exc), exc
    _answer_start_failure(args, failure)
    sys.exit(code)


