"""Prompts before the CLI destroys anything: maintenance that would purge memories for good, and an import
that would push a user over the cap (which moves the least important memories to the trash)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta, tzinfo
from typing import Any

from pocketmem.base.errors import ConfigError
from pocketmem.core.shown_time import absolute

# --now within this much of the real time is "now", not a jump into the future.
FUTURE_SLACK = timedelta(minutes=5)


def counted(n: int, noun: str) -> str:
    """1 memory, 2 memories."""
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{n} {noun if n == 1 else plural}"


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def ask(question: str) -> bool:
    """y/N on the terminal; never asked when stdin is not one (the caller refuses instead)."""
    _say(f"{question} [y/N] ")
    answer = sys.stdin.readline().strip().casefold()
    return answer in ("y", "yes")


async def allow_maintenance(app: Any, now: datetime, args: argparse.Namespace) -> bool:
    """Show what a run at `now` would purge for good; with --now in the future, ask (or need --yes)."""
    from pocketmem.service.manage.safety import purge_preview

    doomed = await purge_preview(app.store, app.settings, now)
    shown = absolute(now, app.settings.zone)  # a time a person sees: POCKETMEM_TZ, with its offset
    total = sum(len(items) for items in doomed.values())
    future = now > datetime.now(now.tzinfo) + FUTURE_SLACK
    if total:
        _say(f"maintenance at {shown} would purge {counted(total, 'trashed memory')} for good:")
        for user_id, items in doomed.items():
            for memory in items[:20]:
                _say(f"  {user_id}  {memory.id}  {memory.delete_reason.value if memory.delete_reason else '-'}  "
                     f"{memory.content[:60]}")
            if len(items) > 20:
                _say(f"  {user_id}  … and {len(items) - 20} more")
    elif args.dry_run or future:
        _say(f"maintenance at {shown} would purge nothing")
    if args.dry_run:
        return False
    if not total or not future or args.yes:
        return True
    if not sys.stdin.isatty():
        raise ConfigError(
            f"--now {shown} is in the future and would purge {counted(total, 'memory')} for good; "
            "nothing was changed. Add --yes to go ahead, or --dry-run to only look"
        )
    what = "this memory" if total == 1 else f"these {total} memories"
    if ask(f"Purge {what} for good (restore is impossible afterwards)?"):
        return True
    _say("nothing was changed")
    return False


async def allow_import(app: Any, lines: list[str], args: argparse.Namespace) -> None:
    """Refuse an import that would evict memories to respect the cap, unless --allow-evict."""
    from pocketmem.service.manage.safety import import_overflow
    from pocketmem.service.transfer.exporting import parse

    over = await import_overflow(app.store, app.settings, parse(lines))
    if not over or args.allow_evict:
        return
    detail = "; ".join(
        f"user {o.user_id!r} has {o.active} active, the file adds {o.incoming}, the cap is {o.max_active}: "
        f"{o.over} would move to the trash" for o in over
    )
    raise ConfigError(
        f"import refused, nothing was changed: {detail}. Raise POCKETMEM_MAX_ACTIVE, or pass --allow-evict "
        "to let the least important memories go to the trash (restorable for POCKETMEM_TRASH_DAYS days)"
    )


def import_summary(report: Any) -> str:
    imported, skipped = report.imported, report.skipped
    text = (f"imported {counted(imported.memory, 'memory')}, {counted(imported.tombstone, 'tombstone')}, "
            f"{counted(imported.revision, 'revision')}, {imported.pending} pending, "
            f"{counted(imported.event, 'event')}, "
            f"{counted(imported.user, 'user')}; skipped {counted(skipped.total, 'row')} already in the store")
    if report.evicted:
        text += f"; {counted(len(report.evicted), 'memory')} moved to the trash by the cap (see `pocketmem trash`)"
    if report.refused:
        text += f"; refused {counted(len(report.refused), 'row')} (named above), not imported"
    return text


def export_summary(counts: Any, output: Any) -> str:
    """One line for the person who ran `pocketmem export` (on stderr: the data may be on stdout)."""
    where = "stdout" if output is None or str(output) == "-" else str(output)
    return (f"exported {counted(counts.memory, 'memory')} of {counted(counts.user, 'user')} "
            f"({counted(counts.tombstone, 'tombstone')}, {counted(counts.revision, 'revision')}, "
            f"{counts.pending} pending, {counted(counts.profile, 'profile')}, {counted(counts.event, 'event')}) "
            f"to {where}")


def maintenance_summary(report: Any, zone: tzinfo) -> str:
    users = report.users
    return (f"maintenance at {absolute(report.now, zone)}: {counted(len(users), 'user')}, "
            f"{sum(len(u.expired) for u in users)} expired, {sum(len(u.purged) for u in users)} purged, "
            f"{sum(u.rescored for u in users)} rescored, {sum(len(u.evicted) for u in users)} evicted")


def maintenance_failures(report: Any, damage: str | None, files: Sequence[Any] = ()) -> list[str]:
    """A line for each step that failed or skipped a row (the profile files' steps too), and for damage the store's
    check found; the exit code of `pocketmem maintain` is 1 when there is one."""
    lines = []
    for user in report.users:
        for row in user.skipped:
            if "table" in row:  # one row that cannot be read: the step left it out
                lines.append(f"maintenance of {user.user_id}: {row['step']} left out {row['table']} row {row['id']} "
                             f"({row['why']}); run `pocketmem doctor --repair`")
            else:
                lines.append(f"maintenance of {user.user_id}: {row['step']} failed: {row['why']}")
    lines += [f"profile files of {f.user_id}: {line}" for f in files for line in f.failed]
    if damage is not None:
        lines.append(f"the memory store looks damaged ({damage}): run `pocketmem doctor`")
    return lines
