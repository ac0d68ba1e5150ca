"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def write_section(text: str, marker: str, doc: Path = DOC) -> None:
    """Replace (or append) the block between <!-- marker:begin --> and <!-- marker:end --> in docs/benchmarks.md."""
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    current = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    block = f"{begin}\n{text}\n{end}"
    if begin in current:
        current = current[: current.index(begin)] + block + current[current.index(end) + len(end) :]
    else:
        current = current.rstrip() + "\n\n" + block + "\n"
    doc.write_text(current, encoding="utf-8")
