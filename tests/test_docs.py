"""The README and docs/ document the whole surface: every tool, resource and CLI command in the README,
every setting in docs/configuration.md, and every page of docs/ reachable from the README."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmem.base.config import Settings
from pocketmem.cli import build_parser
from pocketmem.mcp.resources import MEMORY_URI_TEMPLATE, REVIEW_URI, STATS_URI, USER_CARD_URI
from pocketmem.mcp.tools import TOOLS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
# A short README links one page per topic in docs/: commands may be documented there.
DOCS = README + "".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))


@pytest.mark.parametrize("name", list(TOOLS))
def test_every_tool_is_in_the_readme(name):
    assert f"| `{name}` |" in README


@pytest.mark.parametrize("uri", [USER_CARD_URI, STATS_URI, REVIEW_URI, MEMORY_URI_TEMPLATE])
def test_every_resource_is_in_the_readme(uri):
    assert f"`{uri}`" in README


def _commands() -> list[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")  # noqa: SLF001
    return list(sub.choices)


@pytest.mark.parametrize("command", _commands())
def test_every_command_is_documented(command):
    assert f"pocketmem {command}" in DOCS


@pytest.mark.parametrize("field", [f for f in Settings.model_fields if not f.startswith("llm_")])
def test_every_setting_is_in_the_configuration_page(field):
    name = f"POCKETMEM_{field.upper()}"
    page = CONFIGURATION
    assert name in page or (field.startswith("weight_") and f"_{field[7:].upper()}`" in page), name


@pytest.mark.parametrize("page", sorted(p.name for p in (ROOT / "docs").glob("*.md")))
def test_every_docs_page_is_linked_from_the_readme(page):
    assert f"](docs/{page})" in README, page


def test_the_readme_stays_short():
    assert README.count("\n") <= 260


def _quick_start() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in section.strip().splitlines()]


def test_the_quick_start_installs_from_this_checkout_and_names_real_commands():
    install, *commands = _quick_start()
    assert install == "python3 -m venv .venv && .venv/bin/pip install ."
    assert commands and all(line.startswith(".venv/bin/pocketmem ") for line in commands), commands
    for line in commands:
        assert line.split()[1] in _commands(), line  # typed as shown, each is a real subcommand


@pytest.mark.parametrize("path", ["README.md", "pyproject.toml", *sorted(
    str(p.relative_to(ROOT)) for p in [*(ROOT / "docs").glob("*.md"), *(ROOT / "examples").rglob("*.*")]
    if p.suffix in (".md", ".py")
)])
def test_no_address_the_project_cannot_show_is_real(path):
    text = (ROOT / path).read_text(encoding="utf-8")
    assert "github.com/pocketmem" not in text and "git+https" not in text and "pip install pocketmem" not in text
