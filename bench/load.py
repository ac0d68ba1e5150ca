"""Load on one HTTP server: N concurrent MCP clients running a recall / add mix.

    python bench/load.py                     # N = 1, 8, 32, 15 s each; prints the table
    python bench/load.py --write             # ... and updates docs/benchmarks.md
    python bench/load.py --clients 4 --seconds 5 --add-share 0.5

Setup: a fresh store in a temporary folder; one user and one bearer token per client, each user
holding the first `--memories` memories of bench/data/eval_a.json (written in process before the
server starts). Then `pocketmem serve --transport http` runs as its own process and every client
opens its own MCP session (streamable HTTP, the 2025-11-25 handshake hosts use) with its token.
Each client loops until time is up: with probability `--add-share` an add_memory of new content,
otherwise a recall_memories of an evaluation query with its keywords. Latency is measured around
each call as the client sees it; throughput is completed calls per second over all clients.
The clients share one process (and the machine) with nothing else but the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx2  # after common, which puts the package on the path
from common import DATA, machine, percentile, write_section
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pocketmem.app import PocketMem
from pocketmem.base.config import Settings
from pocketmem.base.models import Category
from pocketmem.service.lifecycle import AddRequest
from pocketmem.service.tokens import TokenService

MARKER = "load"
ANNOUNCE = re.compile(r"pocketmem: MCP over .* at (http://\S+)")


@dataclass
class Tally:
    recall: list[float] = field(default_factory=list)
    add: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def prepare(home: Path, users: int, memories: int) -> list[str]:
    """Each user gets the same evaluation memories; returns one token per user."""
    data = json.loads((DATA / "eval_a.json").read_text(encoding="utf-8"))["memories"][:memories]
    settings = Settings(home=home, tz="Asia/Shanghai")
    tokens = []
    async with PocketMem(settings) as app:
        now = app.clock.now()
        for n in range(users):
            user = f"user{n:02d}"
            for memory in sorted(data, key=lambda m: -m["days_ago"]):
                await app.lifecycle.add(user, AddRequest(
                    content=memory["content"],
                    category=Category(memory["category"]),
                    keywords=memory.get("keywords", []),
                    scores={"persistence": memory["persistence"]} if "persistence" in memory else None,
                    created_at=now - timedelta(days=memory["days_ago"]),
                ))
            tokens.append((await TokenService(app.store, app.clock).create(user, "load benchmark")).token)
    return tokens


def start_server(home: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    log = home / "server.log"
    env = {"PATH": os.environ.get("PATH", ""), "POCKETMEM_HOME": str(home), "POCKETMEM_TZ": "Asia/Shanghai"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pocketmem", "serve", "--transport", "http", "--port", "0"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = ANNOUNCE.search(log.read_text(encoding="utf-8", errors="replace"))
        if found:
            return proc, found.group(1), log
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"the server did not start:\n{log.read_text(errors='replace')}")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process (Linux /proc), to tell whether the server was saturated."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


async def client_loop(url: str, token: str, queries: list[dict[str, Any]], add_share: float, start: asyncio.Event,
                      stop_at: list[float], rng: random.Random, tally: Tally, name: str) -> None:
    timeout = httpx2.Timeout(60, read=300)
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            await start.wait()
            n = 0
            while time.perf_counter() < stop_at[0]:
                query = rng.choice(queries)
                if rng.random() < add_share:
                    kind, tool = "add", "add_memory"
                    args = {"content": f"{query['query']}（{name} 的第 {n} 条笔记）", "keywords": query["keywords"][:4]}
                else:
                    kind, tool = "recall", "recall_memories"
                    args = {"query": query["query"], "context": query.get("context", [])[:3],
                            "keywords": query["keywords"][:6]}
                began = time.perf_counter()
                try:
                    result = await client.call_tool(tool, args)
                except Exception as exc:  # noqa: BLE001 - counted and shown, not fatal
                    tally.errors.append(f"{tool}: {type(exc).__name__}: {exc}")
                    continue
                elapsed = time.perf_counter() - began
                if result.is_error:
                    tally.errors.append(f"{tool}: {result.content[0].text}")
                else:
                    getattr(tally, kind).append(elapsed)
                n += 1


async def run_level(url: str, tokens: list[str], clients: int, seconds: float, add_share: float, seed: int,
                    server_pid: int) -> dict[str, Any]:
    queries = json.loads((DATA / "eval_a.json").read_text(encoding="utf-8"))["queries"]
    tally = Tally()
    start = asyncio.Event()
    stop_at = [float("inf")]
    tasks = [
        asyncio.create_task(client_loop(url, tokens[i], queries, add_share, start, stop_at,
                                        random.Random(seed * 1000 + i), tally, f"c{i}"))
        for i in range(clients)
    ]
    await asyncio.sleep(1.0 + clients * 0.05)  # let every session open before the clock starts
    cpu_before = cpu_seconds(server_pid)
    own_before = time.process_time()
    began = time.perf_counter()
    stop_at[0] = began + seconds
    start.set()
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - began
    cpu_after = cpu_seconds(server_pid)
    own_cpu = (time.process_time() - own_before) / wall
    everything = sorted(tally.recall + tally.add)
    recall, add = sorted(tally.recall), sorted(tally.add)
    return {
        "clients": clients,
        "seconds": round(wall, 2),
        "calls": len(everything),
        "throughput": len(everything) / wall,
        "recall": (len(recall), percentile(recall, 0.50), percentile(recall, 0.95)),
        "add": (len(add), percentile(add, 0.50), percentile(add, 0.95)),
        "all": (percentile(everything, 0.50), percentile(everything, 0.95)),
        "server_cpu": (cpu_after - cpu_before) / wall if cpu_before is not None and cpu_after is not None else None,
        "client_cpu": own_cpu,
        "errors": tally.errors,
    }


def ms(value: float) -> str:
    return f"{value * 1000:.0f}"


def table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        "## Load on one HTTP server",
        "",
        f"Generated by `python bench/load.py --write` on {machine()}.",
        f"One `pocketmem serve --transport http` process; {args.seconds:g} s per level; mix "
        f"{100 - round(args.add_share * 100)}% recall_memories / {round(args.add_share * 100)}% add_memory; one user "
        f"and token per client, each holding {args.memories} memories (bench/data/eval_a.json) plus what it adds; "
        "built-in `hash` embedder; latencies are per call as the client sees them (ms).",
        "Server CPU is the server process's share of one core during the run (client CPU likewise for the",
        "process running every client): near 100% means calls queue for the server's one event loop, so",
        "latency grows with the number of clients while throughput stays level.",
        "",
        "| clients | calls/s | recall p50 | recall p95 | add p50 | add "
        "p95 | all p50 | all p95 | server CPU | client CPU | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cpu = f"{r['server_cpu'] * 100:.0f}%" if r["server_cpu"] is not None else "n/a"
        lines.append(
            f"| {r['clients']} | {r['throughput']:.1f} | {ms(r['recall'][1])} | {ms(r['recall'][2])} | "
            f"{ms(r['add'][1])} | {ms(r['add'][2])} | {ms(r['all'][0])} | {ms(r['all'][1])} | {cpu} | "
            f"{r['client_cpu'] * 100:.0f}% | "
            f"{len(r['errors'])} |"
        )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    levels = args.clients or [1, 8, 32]
    with tempfile.TemporaryDirectory(prefix="pocketmem-load-") as tmp:
        home = Path(tmp) / "home"
        print(f"preparing {max(levels)} users x {args.memories} memories ...", file=sys.stderr)
        tokens = await prepare(home, max(levels), args.memories)
        proc, url, log = start_server(home)
        try:
            rows = []
            for clients in levels:
                row = await run_level(url, tokens, clients, args.seconds, args.add_share, args.seed, proc.pid)
                rows.append(row)
                print(f"N={clients}: {row['throughput']:.1f} calls/s, p50 {ms(row['all'][0])} ms, "
                      f"p95 {ms(row['all'][1])} ms, errors {len(row['errors'])}", file=sys.stderr)
                for error in row["errors"][:5]:
                    print(f"  error: {error}", file=sys.stderr)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        if "Traceback" in log.read_text(errors="replace"):
            print(log.read_text(errors="replace")[-3000:], file=sys.stderr)
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--clients", type=int, action="append", help="concurrent clients (repeatable; default 1, 8, 32)"
    )
    parser.add_argument("--seconds", type=float, default=15.0, help="measured time per level")
    parser.add_argument("--add-share", type=float, default=0.2, help="share of add_memory calls (default 0.2)")
    parser.add_argument("--memories", type=int, default=100, help="memories per user before the run")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    rows = asyncio.run(main_async(args))
    text = table(rows, args)
    print(text)
    if args.write:
        write_section(text, MARKER)


if __name__ == "__main__":
    main()
