"""Commands for people: list, search, show, add, forget, restore, trash, pending (confirm / reject).

Each command makes the same service call an MCP tool makes, for the user named by --user (default
POCKETMEM_USER), and prints a readable table on stdout, or JSON with --json. Messages go to stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import tzinfo
from typing import Any

from pydantic import BaseModel

from pocketmem.base.config import USER_ID_PATTERN, Settings
from pocketmem.base.errors import InvalidInput
from pocketmem.base.models import Category
from pocketmem.cli.support import for_people
from pocketmem.core.shown_time import absolute

Handler = Callable[[Settings, argparse.Namespace], Awaitable[int]]

CATEGORIES = ", ".join(c.value for c in Category)
FULL_ID = 32  # characters of an id pocketmem makes
SHORT_ID = 8  # the shortest prefix taken for one, as git takes a short commit id


# -- output -----------------------------------------------------------------------------------------
def _console(stream: Any = None) -> Any:
    from rich.console import Console

    stream = stream or sys.stdout
    # A pipe or a file gets wide rows (ids are never cut); a terminal gets its own width.
    width = None if stream.isatty() else 160
    return Console(file=stream, soft_wrap=False, highlight=False, width=width)


def _json(value: Any) -> None:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    print(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def _say(text: str, memory_id: str | None = None) -> None:
    print(for_people(text, memory_id), file=sys.stderr)


def _day(value: Any, zone: tzinfo) -> str:
    """A stored instant as a person reads it: in POCKETMEM_TZ, with its offset (core/shown_time.py)."""
    return "-" if value is None else absolute(value, zone)


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title), title_justify="left", show_lines=False, expand=False)
    for name in columns:
        if name == "content":
            table.add_column(name, overflow="fold", min_width=12, ratio=1)
        elif name == "id":
            table.add_column(name, no_wrap=True)
        else:  # a time wraps at its spaces rather than squeezing the content out of a narrow terminal
            table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # user text is text: never rich markup
    return table


def _print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> None:
    if not rows:
        _say(empty)
        return
    console = _console()
    if console.is_terminal and "id" in columns:
        # A person types ids back as git takes short commit ids (_full_id); full ids are for pipes and --json.
        at = list(columns).index("id")
        rows = [[*row[:at], row[at][:SHORT_ID], *row[at + 1:]] for row in rows]
    console.print(_table(title, columns, rows))


# -- the app ------------------------------------------------------------------------------------------
async def _open(settings: Settings) -> Any:
    from pocketmem.app import PocketMem

    app = PocketMem(settings)
    await app.open()
    return app


async def _user(app: Any, args: argparse.Namespace) -> str:
    """--user, else POCKETMEM_USER; a hint on stderr when the store holds other users too."""
    if args.user:
        return str(args.user)
    user = str(app.settings.user)
    async with app.store.read() as reader:
        others = [u for u in await reader.user_ids() if u != user]
    if others and not args.json:
        shown = ", ".join(others[:5]) + (", …" if len(others) > 5 else "")
        _say(f"showing user {user!r}; this store also holds {shown} (choose with --user)")
    return user


def _command(fn: Callable[[Any, str, argparse.Namespace], Awaitable[int]]) -> Handler:
    async def handler(settings: Settings, args: argparse.Namespace) -> int:
        app = await _open(settings)
        try:
            user = await _user(app, args)
            for name, table in (("memory_id", "memories"), ("pending_id", "memory_pending")):
                if getattr(args, name, None):
                    setattr(args, name, await _full_id(app, user, getattr(args, name), table))
            return await fn(app, user, args)
        finally:
            await app.close()

    return handler


async def _full_id(app: Any, user: str, typed: str, table: str) -> str:
    """A unique prefix of 8 or more characters stands for the whole id, as in git; an ambiguous one is refused."""
    if not SHORT_ID <= len(typed) < FULL_ID:
        return typed
    async with app.store.read() as reader:
        found = await reader.ids_starting(user, typed, table)
    if len(found) > 1:
        raise InvalidInput("ID", f"{typed!r} starts more than one id; type more of it")
    return found[0] if found else typed


def _past_end(offset: int, total: int, status: str, user: str) -> str | None:
    """What an empty page says when --offset skipped every row there is."""
    if not offset or offset < total or not total:
        return None
    return (f"--offset {offset} is past the end: user {user!r} has {total} {status} "
            f"{'memory' if total == 1 else 'memories'} (offsets 0-{total - 1})")


# -- commands -----------------------------------------------------------------------------------------
async def _list(app: Any, user: str, args: argparse.Namespace) -> int:
    category = Category(args.category) if args.category else None
    result = await app.listing.list_memories(
        user, category=category, status=args.status, text=args.text, limit=args.limit, offset=args.offset
    )
    if args.json:
        _json(result)
        return 0
    zone = app.settings.zone
    if args.status == "pending":
        rows = [[p.pending_id, "profile change" if p.kind == "profile" else p.category.value,
                 "-" if p.kind == "profile" else f"{p.confidence:.2f}", _day(p.created_at, zone), p.content]
                for p in result.items]
        _print_table(f"pending memories of {user}", ("id", "category", "conf.", "created", "content"), rows,
                     _past_end(args.offset, result.total, "pending", user) or f"no pending memories for user {user!r}")
    else:
        rows = [[m.id, m.category.value + (" ★" if m.core else ""), f"{m.importance:.2f}",
                 _day(m.created_at, zone), m.content] for m in result.items]
        _print_table(f"{args.status} memories of {user}", ("id", "category", "imp.", "created", "content"), rows,
                     _past_end(args.offset, result.total, args.status, user)
                     or f"no {args.status} memories for user {user!r}" + (" (add one with `pocketmem add TEXT`)"
                                                                           if args.status == "active" else ""))
    if rows:
        _say(f"{len(result.items)} of {result.total} shown" + ("; ★ = core memory" if args.status != "pending" else ""))
    return 0


async def _search(app: Any, user: str, args: argparse.Namespace) -> int:
    from pocketmem.service.recall.retrieval import RecallRequest

    categories = [Category(c) for c in args.category] if args.category else None
    result = await app.retrieval.recall(
        user,
        RecallRequest(query=args.query, top_k=args.top_k, categories=categories, include_history=args.history,
                      record=False),
    )
    if args.json:
        _json(result)
        return 0
    rows = [[h.id, h.category.value + (" ★" if h.core else ""), f"{h.score:.2f}", h.age, h.content]
            for h in result.memories]
    _print_table(f"memories of {user} for {args.query!r}", ("id", "category", "score", "age", "content"), rows,
                 f"nothing relevant to {args.query!r} for user {user!r}")
    if result.degraded:
        _say(f"note: {result.degraded}")
    return 0


async def _show(app: Any, user: str, args: argparse.Namespace) -> int:
    memory = await app.get_memory(user, args.memory_id)
    if args.json:
        _json(memory)
        return 0
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    scores = memory["scores"]
    zone = app.settings.zone
    fields = [
        ("id", memory["id"]), ("content", memory["content"]), ("category", memory["category"]),
        ("status", memory["status"]), ("core", "yes" if memory["core"] else "no"),
        ("importance", f"{memory['importance']:.3f}"),
        ("scores", "E {emotion} · I {info} · P {persistence} · J {judge}".format(**scores)),
        ("keywords", ", ".join(memory["keywords"]) or "-"), ("created", _day(memory["created_at"], zone)),
        ("last used", _day(memory["last_active_at"], zone)), ("uses", str(memory["use_count"])),
    ]
    optional = ("supersedes", "due_at", "remind_at", "expires_at", "completed_at", "deleted_at", "purge_at",
                "delete_reason", "source")
    fields += [(k.replace("_", " "), _day(memory[k], zone) if k.endswith("_at") else str(memory[k]))
               for k in optional if memory.get(k)]
    fields += [("revision", f"{_day(r['created_at'], zone)} {r['mode']}: was “{r['previous_content'][:80]}”"
                + (f" ({r['reason']})" if r.get("reason") else "")) for r in memory["revisions"]]
    for name, value in fields:
        table.add_row(name, Text(value))  # user text is text: never rich markup
    _console().print(table)
    return 0


async def _add(app: Any, user: str, args: argparse.Namespace) -> int:
    from pocketmem.service.writing.add_request import AddRequest

    request = AddRequest(
        content=args.content,
        category=Category(args.category),
        keywords=args.keyword or [],
        scores={"persistence": 1.0} if args.core else None,
        confidence=1.0,
        source="cli",
    )
    result = await app.writing.add(user, request)
    if args.json:
        _json(result)
    else:
        ident = result.memory_id or result.pending_id or "-"
        print(f"{result.status} {ident}")
        _say(result.message)
        for item in result.evicted:
            _say(f"moved to the trash (cap {app.settings.max_active}): {item.id} {item.content[:60]}")
    return 0 if result.status in ("stored", "duplicate", "pending") else 1


async def _forget(app: Any, user: str, args: argparse.Namespace) -> int:
    result = await app.trash.forget(user, args.memory_id, args.reason or "forgotten with pocketmem forget")
    if args.json:
        _json(result)
    else:
        print(f"trashed {result.item.id}")
        _say(result.message, result.item.id)
    return 0


async def _restore(app: Any, user: str, args: argparse.Namespace) -> int:
    result = await app.trash.restore(user, args.memory_id)
    if args.json:
        _json(result)
    else:
        print(f"{result.memory.status.value} {result.memory.id}")
        _say(result.message)
        for item in result.evicted:
            _say(f"moved to the trash (cap {app.settings.max_active}): {item.id} {item.content[:60]}")
    return 0


async def _trash(app: Any, user: str, args: argparse.Namespace) -> int:
    result = await app.trash.list_trash(user, args.limit, args.offset)
    if args.json:
        _json(result)
        return 0
    zone = app.settings.zone
    rows = [[t.id, t.reason.value if t.reason else "-", _day(t.deleted_at, zone), _day(t.purge_at, zone), t.content]
            for t in result.items]
    _print_table(f"trash of {user}", ("id", "reason", "deleted", "purge at", "content"), rows,
                 _past_end(args.offset, result.total, "trashed", user) or f"the trash of user {user!r} is empty")
    if rows:
        _say(f"{len(rows)} of {result.total} shown; `pocketmem restore ID` brings one back until its purge time")
    return 0


async def _pending(app: Any, user: str, args: argparse.Namespace) -> int:
    action = args.pending_action
    if action is None:
        args.status, args.category, args.text = "pending", None, None
        return await _list(app, user, args)
    result = await app.pending.confirm_pending(user, args.pending_id, action, None)  # a profile change too
    if args.json:
        _json(result)
    else:
        print(f"{result.status.value} {result.memory_id or result.pending_id}")
        _say(result.message)
    return 0


# -- the parser ---------------------------------------------------------------------------------------
def _user_and_json(parser: argparse.ArgumentParser, *, nested: bool = False) -> None:
    # Nested actions (pending confirm) must not reset what was given before them: no defaults there.
    default: Any = argparse.SUPPRESS if nested else None
    parser.add_argument("--user", metavar="NAME", type=_user_id, default=default,
                        help="whose memories (default: POCKETMEM_USER)")
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS if nested else False,
                        help="print JSON instead of a table")


def _user_id(text: str) -> str:
    if not re.match(USER_ID_PATTERN, text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a user id: 1-64 letters, digits and _ . @ : -")
    return text


def _paging(parser: argparse.ArgumentParser, default: int = 50) -> None:
    parser.add_argument(
        "--limit", type=_bounded(1, 500), default=default, help=f"rows to show, 1-500 (default {default})"
    )
    parser.add_argument("--offset", type=_bounded(0, 1_000_000), default=0, help="rows to skip (default 0)")


def _bounded(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value

    return parse


def _parser(sub: Any, name: str, help_: str, description: str, epilog: str, handler: Handler) -> Any:
    parser = sub.add_parser(
        name, help=help_, description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.set_defaults(handler=handler)
    return parser


def add_people_commands(sub: Any) -> None:
    """Add list, search, show, add, forget, restore, trash and pending to the `pocketmem` subparsers."""
    _add_looking_commands(sub)
    _add_changing_commands(sub)
    _add_trash_and_pending_commands(sub)


def _add_looking_commands(sub: Any) -> None:
    """list, search, show."""
    listing = _parser(
        sub, "list", "list memories in a table (newest first)",
        "List the memories of one user, newest first: id, category (★ = core), importance, created, content.",
        "examples:\n  pocketmem list\n  pocketmem list --category preference --text 香菜\n"
        "  pocketmem list --status superseded --user alice --json",
        _command(_list),
    )
    listing.add_argument("--category", choices=[c.value for c in Category], help="only this category")
    listing.add_argument("--status", choices=("active", "superseded", "pending", "trashed"), default="active",
                         help="active (default), superseded (history), pending or trashed")
    listing.add_argument("--text", metavar="TEXT", help="only memories containing this text")
    _paging(listing)
    _user_and_json(listing)

    search = _parser(
        sub, "search", "search memories by meaning and keywords, as recall does",
        "Rank memories for a question the way recall_memories does (semantic + keyword + freshness), "
        "without counting the hits as used.",
        "examples:\n  pocketmem search 晚饭吃什么\n  pocketmem search \"coffee\" --top-k 10 --json",
        _command(_search),
    )
    search.add_argument("query", metavar="QUERY", help="what to look for, in any language")
    search.add_argument("--top-k", type=_bounded(1, 50), default=10, help="most results, 1-50 (default 10)")
    search.add_argument("--category", action="append", choices=[c.value for c in Category],
                        help="only this category (repeatable)")
    search.add_argument("--history", action="store_true", help="also superseded (outdated) memories")
    _user_and_json(search)

    show = _parser(
        sub, "show", "show one memory with its scores and revisions",
        "Show every field of one memory (any status), its E/I/P/J scores and its earlier revisions.",
        "examples:\n  pocketmem show 0193c1d2e4f5\n  pocketmem show 0193c1d2e4f5 --json",
        _command(_show),
    )
    show.add_argument("memory_id", metavar="ID", help="a memory id, as `pocketmem list` shows it")
    _user_and_json(show)


def _add_changing_commands(sub: Any) -> None:
    """add, forget, restore."""
    add = _parser(
        sub, "add", "remember something (stored at once, confidence 1)",
        "Store one memory as if the user had said it plainly: duplicates are reinforced, secrets redacted, "
        "and the cap moves the least important memories to the trash.",
        "examples:\n  pocketmem add 我不吃香菜 --category preference --core\n"
        "  pocketmem add \"Project Kestrel ships on Friday\" --category event -k kestrel -k deadline",
        _command(_add),
    )
    add.add_argument("content", metavar="TEXT", help="the memory, one or two sentences in the user's language")
    add.add_argument("--category", choices=[c.value for c in Category], default="fact",
                     help=f"one of: {CATEGORIES} (default fact)")
    add.add_argument("-k", "--keyword", action="append", metavar="WORD", help="a search term that helps find it "
                     "later (repeatable)")
    add.add_argument("--core", action="store_true", help="a core memory (persistence 1): never decays, never evicted")
    _user_and_json(add)

    forget = _parser(
        sub, "forget", "move a memory to the trash (restorable until it is purged)",
        "Move one memory to the trash. It stops being recalled at once and can be restored with "
        "`pocketmem restore ID` until it is purged (POCKETMEM_TRASH_DAYS, default 7 days).",
        "examples:\n  pocketmem forget 0193c1d2e4f5 --reason \"no longer true\"",
        _command(_forget),
    )
    forget.add_argument("memory_id", metavar="ID", help="the memory to forget")
    forget.add_argument("--reason", help="why (kept in the event log)")
    _user_and_json(forget)

    restore = _parser(
        sub, "restore", "bring a memory back from the trash",
        "Bring a trashed memory back (active again, or history when a newer memory supersedes it).",
        "examples:\n  pocketmem trash\n  pocketmem restore 0193c1d2e4f5",
        _command(_restore),
    )
    restore.add_argument("memory_id", metavar="ID", help="a memory id from `pocketmem trash`")
    _user_and_json(restore)


def _add_trash_and_pending_commands(sub: Any) -> None:
    """trash, and pending with its confirm / reject actions."""
    trash = _parser(
        sub, "trash", "list the trash (what can still be restored)",
        "List forgotten, evicted, replaced and expired memories, newest first, with the time each is purged.",
        "examples:\n  pocketmem trash\n  pocketmem trash --limit 200 --json",
        _command(_trash),
    )
    _paging(trash)
    _user_and_json(trash)

    pending = _parser(
        sub, "pending", "list memories waiting for confirmation; confirm or reject one",
        "Memories an agent was unsure of (confidence 0.60-0.85) wait here. Without an action: list them. "
        "confirm ID stores one; reject ID drops it for good.",
        "examples:\n  pocketmem pending\n  pocketmem pending confirm 0193c1d2e4f5\n"
        "  pocketmem pending reject 0193c1d2e4f5",
        _command(_pending),
    )
    _paging(pending)
    _user_and_json(pending)
    actions = pending.add_subparsers(dest="pending_action", metavar="ACTION")
    for action, text in (("confirm", "store the pending memory"), ("reject", "drop it; it is not asked again")):
        p = actions.add_parser(action, help=text, description=f"{text.capitalize()}.",
                               epilog=f"example:\n  pocketmem pending {action} 0193c1d2e4f5",
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("pending_id", metavar="ID", help="a pending id from `pocketmem pending`")
        _user_and_json(p, nested=True)

