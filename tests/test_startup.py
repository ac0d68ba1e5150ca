"""`pocketmem serve` over stdio does nothing heavy before its handshake (docs/speed.md, *Start-up*): what only
a tool call or the warm-up after the handshake needs is not loaded when the protocol starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pocketmem.core import privacy, sameness, text, timeexpr
from pocketmem.service.recall import retrieval

from .servers import checkout_env

# Loaded by a tool call, a prompt, the management page or the warm-up, never before the handshake.
LATER = [
    "pocketmem.service.profile.context",  # the prompt's context package
    "pocketmem.service.manage.browse",  # the management page
    "pocketmem.service.manage.curation",
    "pocketmem.service.upkeep.doctor",
    "pocketmem.service.transfer.sync",  # only with a cloud library
    "jieba",  # the text tools: the warm-up
    "numpy",  # the encoder: the warm-up
    "openai",  # a configured LLM or embedding endpoint: on first use
    "jinja2",  # the management page (uvicorn and starlette come with the MCP SDK itself)
]
# Patterns compiled on first use or by the warm-up: the secrets, the time words, the same-fact rule, CJK runs.
COMPILED = [privacy.patterns, timeexpr.patterns, sameness.patterns, text.runs_pattern]
COMPILED_NAMES = [(compiled.__module__, compiled.__name__) for compiled in COMPILED]

# `pocketmem serve` as a host starts it, up to the moment the protocol would start; there, what is loaded.
SERVE = f"""
import gc, importlib, json, sys
import pocketmem.mcp.stdio

async def protocol(server):
    compiled = [getattr(importlib.import_module(module), name) for module, name in {COMPILED_NAMES!r}]
    print(json.dumps({{
        "tools": len(await server.list_tools()),
        "loaded": [name for name in {LATER!r} if name in sys.modules],
        "patterns_compiled": sum(f.cache_info().currsize for f in compiled),
        "collector_on": gc.isenabled(),
        "frozen": gc.get_freeze_count(),
    }}))

pocketmem.mcp.stdio.run_stdio = protocol
from pocketmem.cli import main
main(["serve"])
"""


def test_serve_loads_nothing_a_call_or_the_warm_up_loads_before_the_protocol_starts(tmp_path: Path) -> None:
    env = {**checkout_env(), "POCKETMEM_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", SERVE], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["tools"] == 11
    assert seen["loaded"] == []
    assert seen["patterns_compiled"] == 0  # they compile on first use or in the warm-up
    # Built without the cyclic collector; what start-up made is frozen, and the collector is on for serving.
    assert seen["collector_on"] is True
    assert seen["frozen"] > 10_000


def test_the_warm_up_compiles_the_patterns_left_out_of_start_up() -> None:
    for compiled in COMPILED:
        compiled.cache_clear()
    retrieval.warm_up()
    assert [compiled.cache_info().currsize for compiled in COMPILED] == [1] * len(COMPILED)
