"""What every `pocketmem` subcommand shares: descriptions and examples, -v / --log-level / --debug after the
subcommand, the logging set-up, and warnings about misspelled POCKETMEM_* variables.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from typing import Any

from pocketmem.base.config import Settings, unknown_variables

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

# Libraries whose INFO/DEBUG lines are noise for a pocketmem user (aiosqlite logs every statement at DEBUG).
THIRD_PARTY = ("aiosqlite", "asyncio", "httpx", "httpcore", "mcp", "uvicorn", "sse_starlette", "openai",
               "psycopg", "sentence_transformers", "transformers", "torch", "urllib3", "filelock", "jieba")

# Descriptions and examples of the commands defined in cli.py (the people commands carry their own).
HELP: dict[str, tuple[str, str]] = {
    "serve": (
        "Run the MCP server. stdio (default) is what Claude Desktop, Cursor and VS Code start; http and sse "
        "listen on --host/--port for clients on the network, each with a bearer token (`pocketmem token`).",
        "examples:\n  pocketmem serve\n  pocketmem serve --transport http --port 8765 -v\n"
        "  pocketmem serve --transport http --host 0.0.0.0 --allowed-host mem.example.org",
    ),
    "token": (
        "Create, list and revoke the bearer tokens of the http/sse transports. A token acts as one user.",
        "examples:\n  pocketmem token create --user alice --name laptop\n  pocketmem token list\n"
        "  pocketmem token revoke 0193c1d2e4f5",
    ),
    "token create": ("Create a token for a user and print it once; only its hash is stored.",
                     "example:\n  pocketmem token create --user alice --name laptop"),
    "token list": ("List tokens with their user, name and last use (never the tokens themselves).",
                   "examples:\n  pocketmem token list\n  pocketmem token list --user alice --all --json"),
    "token revoke": ("Revoke tokens by id; requests that carry them get 401 at once.",
                     "example:\n  pocketmem token revoke 0193c1d2e4f5"),
    "ui": ("Open the memory management page: search, filter and open memories, fix or forget one, restore from "
           "the trash, confirm pending memories. Serves on 127.0.0.1 on a free port and opens the browser; "
           "asks for a token once a token exists (docs/ui.md).",
           "examples:\n  pocketmem ui\n  pocketmem ui --no-browser --port 8790"),
    "token allow-anonymous": ("On loopback with --auth auto, serve requests without a token again once no token "
                              "is active. Revoking the last token alone keeps the server closed; the next token "
                              "created closes it again.",
                              "example:\n  pocketmem token revoke 0193c1d2e4f5\n  pocketmem token allow-anonymous"),
    "stats": ("Print counts for POCKETMEM_USER as JSON: active, core, trashed, pending, by category, and the "
              "sync state when a cloud library is set.",
              "examples:\n  pocketmem stats\n  POCKETMEM_USER=alice pocketmem stats"),
    "sync": ("Sync this SQLite notebook with the cloud library (POCKETMEM_CLOUD_URL) once: upload what changed, "
             "download what other notebooks added, by POCKETMEM_SYNC_SCOPES. Prints a JSON report.",
             "example:\n  POCKETMEM_CLOUD_URL=postgresql://me:secret@db.example.org/mem pocketmem sync"),
    "doctor": ("Check the database (integrity, schema, indexes), the sqlite-vec extension and the embedder; "
               "print a JSON report with a hint for each problem. Exit code 1 when something needs attention.",
               "example:\n  pocketmem doctor"),
    "reindex": ("Re-embed every memory with the configured embedder and rebuild the vector index. Needed after "
                "changing POCKETMEM_EMBEDDER or POCKETMEM_EMBED_MODEL: vectors of two models never mix.",
                "example:\n  POCKETMEM_EMBEDDER=local POCKETMEM_EMBED_MODEL=all-MiniLM-L6-v2 pocketmem reindex"),
    "maintain": ("Run maintenance now: decay, expiry of old episodes, the cap, and the purge of trash older than "
                 "POCKETMEM_TRASH_DAYS (the server also runs it every POCKETMEM_MAINTAIN_INTERVAL seconds). "
                 "With --now in the future it first shows what would be purged for good and asks.",
                 "examples:\n  pocketmem maintain\n  pocketmem maintain --now 2026-12-26T10:00 --dry-run\n"
                 "  pocketmem maintain --now 2026-12-26T10:00 --yes"),
    "export": ("Write every memory, the trash, tombstones, revisions and pending items as JSONL (one JSON object "
               "a line), or the user card as Markdown.",
               "examples:\n  pocketmem export -o backup.jsonl\n  pocketmem export --user alice --events > alice.jsonl\n"
               "  pocketmem export --markdown ~/notes"),
    "import": ("Read a pocketmem export. Rows already in the store (same id) are skipped. Refuses when the import "
               "would push a user over POCKETMEM_MAX_ACTIVE unless --allow-evict; prints what it did.",
               "examples:\n  pocketmem import backup.jsonl\n  pocketmem import big.jsonl --allow-evict\n"
               "  cat backup.jsonl | pocketmem import -"),
}


def port_number(text: str) -> int:
    """--port: 1..65535, or 0 for a free one (argparse names the option and exits 2 on anything else)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number: give a port 1..65535 (0: a free one)"
        ) from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: give 1..65535 (0: a free one)")
    return port


def add_common_options(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """-v, --log-level and --debug, before or after the subcommand; on a subcommand they default to nothing, so they
    never undo the top-level ones."""
    default: Any = None if top else argparse.SUPPRESS
    if not top:
        parser.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                            help="more logging on stderr: -v info, -vv debug, -vvv also libraries")
    parser.add_argument("--log-level", type=str.upper, choices=LEVELS, default=default,
                        help="log level on stderr (default POCKETMEM_LOG_LEVEL, WARNING)")
    parser.add_argument("--debug", action="store_true", default=False if top else argparse.SUPPRESS,
                        help="on a failure, print the full traceback instead of one line")


def finish_parser(sub: Any) -> None:
    """Give every subcommand (and nested action) a description, an example and the common options."""
    for name, parser in _walk(sub, ""):
        description, epilog = HELP.get(name, (None, None))
        if description and not parser.description:
            parser.description = description
        if epilog and not parser.epilog:
            parser.epilog = epilog
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        # argparse has no public list of a parser's options; _actions is the documented-by-use way.
        if not any("--log-level" in action.option_strings for action in parser._actions):  # noqa: SLF001
            add_common_options(parser)


def _walk(sub: Any, prefix: str) -> list[tuple[str, argparse.ArgumentParser]]:
    found = []
    for name, parser in sub.choices.items():
        full = f"{prefix}{name}"
        found.append((full, parser))
        for action in parser._actions:  # noqa: SLF001
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                found += _walk(action, full + " ")
    return found


SDK_SERVER_LOGGER = "mcp.server.mcpserver.server"
HIDDEN = "<hidden: set POCKETMEM_LOG_CONTENT=1 to log it>"


class HidePeerText(logging.Filter):
    """The SDK's INFO lines for a failed tool or resource quote the error, which may quote an argument value
    ("Tool 'forget_memory' failed: ... no memory with id 'sk-proj-…'"), and a resource's URI. Without
    POCKETMEM_LOG_CONTENT only a tool's name stays; warnings and errors pass as they are."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING and isinstance(record.args, tuple) and record.args:
            message = str(record.msg)
            if "rejected arguments" in message:  # field names only (the SDK leaves the values out)
                return True
            keep = 1 if message.startswith("Tool ") else 0
            record.args = (*record.args[:keep], *(HIDDEN for _ in record.args[keep:]))
        return True


def configure_logging(settings: Settings, verbose: int, level_name: str | None) -> None:
    """pocketmem's own loggers at the asked level; libraries at WARNING unless -vvv.

    Library DEBUG output can carry request bodies (memory text), so it needs POCKETMEM_LOG_CONTENT=1 too.
    """
    if level_name:
        level = getattr(logging, level_name)
    elif verbose:
        level = logging.DEBUG if verbose > 1 else logging.INFO
    else:
        level = getattr(logging, settings.log_level)
    libraries = logging.WARNING
    if verbose >= 3:
        libraries = logging.DEBUG if settings.log_content else logging.INFO
    logging.basicConfig(stream=sys.stderr, level=libraries, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(libraries)
    for name in THIRD_PARTY:
        logging.getLogger(name).setLevel(libraries)
    sdk = logging.getLogger(SDK_SERVER_LOGGER)
    for old in [f for f in sdk.filters if isinstance(f, HidePeerText)]:
        sdk.removeFilter(old)
    if not settings.log_content:
        sdk.addFilter(HidePeerText())
    logging.getLogger("pocketmem").setLevel(level)


def warn_unknown_variables(environ: Any = None) -> None:
    for message in unknown_variables(environ):
        logging.getLogger("pocketmem").warning("%s", message)


# The services word their hints for the agent (tool calls); a person at the terminal gets the command instead.
FOR_PEOPLE = (
    (re.compile(r"restore\(memory_id\)"), "`pocketmem restore ID`"),
    (re.compile(r"list_memories\(status='pending'\)"), "`pocketmem pending`"),
    (re.compile(r"list_memories\(category='todo'\)"), "`pocketmem list --category todo`"),
    (re.compile(r"list_memories or recall_memories"), "`pocketmem list` or `pocketmem search`"),
    (re.compile(r"(?<![`\w])list_memories(?![\w(])"), "`pocketmem list`"),
    (re.compile(r"(?<![`\w])list_trash(?![\w(])"), "`pocketmem trash`"),
    (re.compile(r"then call confirm_pending with action confirm, reject or snooze"),
     "then run `pocketmem pending confirm ID` or `pocketmem pending reject ID`"),
    (re.compile(r"\(confirm_pending\)"), "(`pocketmem pending`)"),
)


def for_people(text: str, memory_id: str | None = None) -> str:
    """A service message with its tool-call hints turned into pocketmem commands (ID filled in when known)."""
    for pattern, command in FOR_PEOPLE:
        text = pattern.sub(command, text)
    return text.replace("pocketmem restore ID", f"pocketmem restore {memory_id}") if memory_id else text
