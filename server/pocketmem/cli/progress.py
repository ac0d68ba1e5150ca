"""Progress bars on stderr for long commands (import, export, reindex, maintain, sync): drawn with rich
when stderr is a terminal, silent otherwise (logs, pipes, hosts). The command prints its own summary line."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pocketmem.base.progress import Progress, no_progress


@contextmanager
def progress_bar(label: str, unit: str, stream: Any = None) -> Iterator[Progress]:
    stream = stream or sys.stderr
    if not stream.isatty():
        yield no_progress
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    bar = Bar(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit), TimeElapsedColumn(),
        console=Console(file=stream), transient=True,
    )
    task = bar.add_task(label, total=None)

    def update(done: int, total: int | None) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield update
