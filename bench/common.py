"""Helpers shared by the benchmark scripts: where the report lives and how a script updates its part."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
DATA = ROOT / "bench" / "data"

if str(ROOT / "server") not in sys.path:
    sys.path.insert(0, str(ROOT / "server"))


def write_section(text: str, marker: str, doc: Path = DOC) -> None:
    """Replace the block between `<!-- marker:begin -->` and `<!-- marker:end -->` (append it if missing)."""
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    current = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    block = f"{begin}\n{text}\n{end}"
    if begin in current:
        current = current[: current.index(begin)] + block + current[current.index(end) + len(end) :]
    else:
        current = current.rstrip() + "\n\n" + block + "\n"
    doc.write_text(current, encoding="utf-8")


def machine() -> str:
    """One line describing where the numbers were measured."""
    import os

    from pocketmem.store.sqlite.driver import sqlite_module

    module, _ = sqlite_module()
    cpu = platform.processor() or platform.machine()
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, "
        f"SQLite {module.sqlite_version}"
    )


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), round(q * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]
