"""The size rules docs/architecture.md states: no module over 600 lines and no function over 80, migrations aside."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "server" / "pocketmem"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "migrations.py")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_and_its_functions_stay_small(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 600, f"{path.name} has {len(text.splitlines())} lines"
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > 80
    ]
    assert not long, f"functions over 80 lines in {path.name}: {long}"
