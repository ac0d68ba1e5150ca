"""Progress of long runs (import, export, reindex, maintenance, sync), for a front end to draw.

A service calls `progress(done, total)` as work finishes; total is None when unknown. The default does nothing.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[int, int | None], None]


def no_progress(done: int, total: int | None) -> None:
    """The default: nobody is watching."""
