"""Everyday commands as a user runs them, timed end to end (process start included).

    PYTHONPATH=$PWD/server python bench/everyday.py [--memories 3000]

Writes nothing outside a temporary folder. Steps: `add` once, `import` of N memories from an export (hash embedder),
`list`, `search`, `maintain`, `export`; prints one Markdown row per step.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pocketmem.core.text import content_hash


def timed(home: Path, *args: str, **env: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    full = {**os.environ, "POCKETMEM_HOME": str(home), **env}
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "pocketmem", *args], env=full, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"pocketmem {' '.join(args)} failed: {out.stderr}")
    return time.perf_counter() - started, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=3000)
    n = parser.parse_args().memories
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        source = Path(tmp) / "a"
        # A real export to import: written by pocketmem itself from N adds would take long; build it from one.
        timed(source, "add", "种子")
        timed(source, "export", "-o", str(Path(tmp) / "seed.jsonl"))
        rows = [
            ("doctor (fresh store)", ("doctor",), {}),
            ("add", ("add", "我不吃香菜", "--category", "preference", "--core"), {}),
        ]
        for label, args, env in rows:
            seconds, _ = timed(home, *args, **env)
            print(f"| {label} | {seconds:.2f} s |")
        seed = [json.loads(line) for line in (Path(tmp) / "seed.jsonl").read_text().splitlines()]
        template = next(r for r in seed if r.get("type") == "memory")
        lines = [json.dumps(r, ensure_ascii=False) for r in seed if r.get("type") in ("header", "user")]
        for i in range(n):
            row = dict(template, id=f"bench{i:08d}", content=f"第{i}条：用户喜欢第{i % 97}种茶和第{i % 13}本书")
            row["content_hash"] = content_hash(row["content"])
            lines.append(json.dumps(row, ensure_ascii=False))
        (Path(tmp) / "big.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        for label, args, env in [
            (f"import {n:,} memories (cap {n + 10:,})", ("import", str(Path(tmp) / "big.jsonl")),
             {"POCKETMEM_MAX_ACTIVE": str(n + 10)}),
            ("list (50 rows)", ("list",), {"POCKETMEM_MAX_ACTIVE": str(n + 10)}),
            ("search", ("search", "喜欢什么茶"), {"POCKETMEM_MAX_ACTIVE": str(n + 10)}),
            ("maintain", ("maintain",), {"POCKETMEM_MAX_ACTIVE": str(n + 10)}),
            ("export", ("export", "-o", str(Path(tmp) / "out.jsonl")), {}),
            ("reindex (hash embedder)", ("reindex",), {}),
        ]:
            seconds, out = timed(home, *args, **env)
            print(f"| {label} | {seconds:.2f} s |")
        _, version = timed(home, "--version")
        print(f"| `python -m pocketmem --version` (interpreter start) | {_:.2f} s |")


if __name__ == "__main__":
    main()
