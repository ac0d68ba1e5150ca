"""Load on the HTTP server: N concurrent MCP clients running a recall / add mix, beside the SDK's floor.

    python bench/load.py                     # N = 1, 8, 32; 1 and 2 workers; SQLite and PostgreSQL; 15 s each
    python bench/load.py --write             # ... and updates docs/benchmarks.md
    python bench/load.py --clients 4 --seconds 5 --add-share 0.5 --workers 1 --backend sqlite

For each backend and worker count a server runs (`--workers N`, stateless JSON responses when N > 1;
`--stateless` makes a single process stateless too). The floor is a bare SDK server whose one tool does
nothing (bench/floor_server.py), driven by the same clients in the same run: its calls/s are what the
protocol and this machine allow, so pocketmem's share of it is what its own work costs.

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
from common import DATA, ROOT, machine, percentile, write_section
from floor import floor_http
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pocketmem.app import PocketMem
from pocketmem.base.config import Settings
from pocketmem.base.models import Category
from pocketmem.service.manage.tokens import TokenService
from pocketmem.service.writing.add_request import AddRequest

MARKER = "load"
WARM_UP_CALLS = 3
ANNOUNCE = re.compile(r"pocketmem: MCP over .* at (http://\S+)")


@dataclass
class Tally:
    recall: list[float] = field(default_factory=list)
    add: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def prepare(home: Path, users: int, memories: int, database_url: str | None = None) -> list[str]:
    """Each user gets the same evaluation memories; returns one token per user."""
    data = json.loads((DATA / "eval_a.json").read_text(encoding="utf-8"))["memories"][:memories]
    settings = Settings(home=home, tz="Asia/Shanghai", database_url=database_url)
    tokens = []
    async with PocketMem(settings) as app:
        now = app.clock.now()
        for n in range(users):
            user = f"user{n:02d}"
            for memory in sorted(data, key=lambda m: -m["days_ago"]):
                await app.writing.add(user, AddRequest(
                    content=memory["content"],
                    category=Category(memory["category"]),
                    keywords=memory.get("keywords", []),
                    scores={"persistence": memory["persistence"]} if "persistence" in memory else None,
                    created_at=now - timedelta(days=memory["days_ago"]),
                ))
            tokens.append((await TokenService(app.store, app.clock).create(user, "load benchmark")).token)
    return tokens


def server_env(home: Path, database_url: str | None) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""), "POCKETMEM_HOME": str(home), "POCKETMEM_TZ": "Asia/Shanghai",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "server"), os.environ.get("PYTHONPATH")])),
        **({"POCKETMEM_DATABASE_URL": database_url} if database_url else {}),
    }


def start_server(home: Path, workers: int = 1, stateless: bool = False,
                 database_url: str | None = None) -> tuple[subprocess.Popen[bytes], str, Path]:
    home.mkdir(parents=True, exist_ok=True)
    log = home / f"server-{workers}.log"
    extra = ["--workers", str(workers)] if workers > 1 else (["--stateless"] if stateless else [])
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pocketmem", "serve", "--transport", "http", "--port", "0", *extra],
            env=server_env(home, database_url), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out,
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
    """User + system CPU time of a process and its children (Linux /proc): the server, or all its workers."""
    total, found = 0.0, False
    for candidate in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{candidate}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(candidate) == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            found = True
    return total if found else None


async def client_loop(url: str, token: str | None, queries: list[dict[str, Any]], add_share: float,
                      start: asyncio.Event, stop_at: list[float], rng: random.Random, tally: Tally, name: str,
                      opened: list[str]) -> None:
    timeout = httpx2.Timeout(60, read=300)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            for _ in range(WARM_UP_CALLS):  # every worker that will answer has started and is warm
                await client.call_tool("noop" if token is None else "recall_memories",
                                       {"query": queries[0]["query"]})
            opened.append(name)
            await start.wait()
            n = 0
            while time.perf_counter() < stop_at[0]:
                query = rng.choice(queries)
                if token is None:  # the floor: the same arguments, to a tool that does nothing
                    kind, tool, args = "recall", "noop", {"query": query["query"]}
                elif rng.random() < add_share:
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


async def run_level(url: str, tokens: list[str | None], clients: int, seconds: float, add_share: float, seed: int,
                    server_pid: int) -> dict[str, Any]:
    queries = json.loads((DATA / "eval_a.json").read_text(encoding="utf-8"))["queries"]
    tally = Tally()
    opened: list[str] = []
    start = asyncio.Event()
    stop_at = [float("inf")]
    tasks = [
        asyncio.create_task(client_loop(url, tokens[i], queries, add_share, start, stop_at,
                                        random.Random(seed * 1000 + i), tally, f"c{i}", opened))
        for i in range(clients)
    ]
    deadline = time.monotonic() + 300
    while len(opened) < clients:  # the clock starts once every client has its session and has warmed up
        if time.monotonic() > deadline or any(t.done() for t in tasks):
            break
        await asyncio.sleep(0.05)
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


def table(rows: list[dict[str, Any]], floor: dict[int, dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        "## Load on the HTTP server",
        "",
        f"Generated by `python bench/load.py --write` on {machine()}, a 2-core sandbox shared with other work",
        f"(load average {os.getloadavg()[0]:.1f} at the end of the run: "
        "figures are lower and noisier than on an idle machine).",
        f"{args.seconds:g} s per level; mix {100 - round(args.add_share * 100)}% recall_memories / "
        f"{round(args.add_share * 100)}% add_memory; one user and token per client, each holding {args.memories} "
        "memories (bench/data/eval_a.json) plus what it adds; the default `use` encoder; latencies per call as the "
        "client sees them (ms). One worker is the default server (MCP sessions, SSE responses); two workers are",
        "`--workers 2` (stateless, JSON responses). PostgreSQL is a local pgserver (fsync off, as in the tests).",
        "Floor: a bare SDK server with a no-op tool, driven by the same clients in the same run; \"of floor\" is",
        "pocketmem's calls/s over the floor's at the same number of clients. Server CPU is the server's (all",
        "workers') share of one core; the clients run in one more process on the same two cores.",
        "",
        "| backend | workers | clients | calls/s | of floor | recall p50 | recall p95 | add p50 | add p95 | all p95 "
        "| server CPU | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for clients, r in sorted(floor.items()):
        lines.append(
            f"| SDK floor (no-op) | 1 | {clients} | {r['throughput']:.1f} | 100% | {ms(r['recall'][1])} | "
            f"{ms(r['recall'][2])} | – | – | {ms(r['all'][1])} | {cpu(r)} | {len(r['errors'])} |"
        )
    for r in rows:
        share = r["throughput"] / floor[r["clients"]]["throughput"] if r["clients"] in floor else float("nan")
        lines.append(
            f"| {r['backend']} | {r['workers']} | {r['clients']} | {r['throughput']:.1f} | {share:.0%} | "
            f"{ms(r['recall'][1])} | {ms(r['recall'][2])} | {ms(r['add'][1])} | {ms(r['add'][2])} | "
            f"{ms(r['all'][1])} | {cpu(r)} | {len(r['errors'])} |"
        )
    return "\n".join(lines)


def cpu(row: dict[str, Any]) -> str:
    return f"{row['server_cpu'] * 100:.0f}%" if row["server_cpu"] is not None else "n/a"


def report(row: dict[str, Any], label: str) -> None:
    print(f"{label} N={row['clients']}: {row['throughput']:.1f} calls/s, p50 {ms(row['all'][0])} ms, "
          f"p95 {ms(row['all'][1])} ms, errors {len(row['errors'])}", file=sys.stderr)
    for error in row["errors"][:5]:
        print(f"  error: {error}", file=sys.stderr)


async def measure_floor(levels: list[int], args: argparse.Namespace) -> dict[int, dict[str, Any]]:
    rows = {}
    with floor_http() as (url, pid):
        for clients in levels:
            rows[clients] = await run_level(url, [None] * clients, clients, args.seconds, 0.0, args.seed, pid)
            report(rows[clients], "floor")
    return rows


async def measure_backend(backend: str, database_url: str | None, levels: list[int],
                          args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="pocketmem-load-") as tmp:
        home = Path(tmp) / "home"
        print(f"{backend}: preparing {max(levels)} users x {args.memories} memories ...", file=sys.stderr)
        tokens: list[str | None] = list(await prepare(home, max(levels), args.memories, database_url))
        for workers in args.workers or [1, 2]:
            proc, url, log = start_server(home, workers, args.stateless, database_url)
            try:
                for clients in levels:
                    row = await run_level(url, tokens, clients, args.seconds, args.add_share, args.seed, proc.pid)
                    row.update(backend=backend, workers=workers)
                    rows.append(row)
                    report(row, f"{backend} x{workers}")
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            if "Traceback" in log.read_text(errors="replace"):
                print(log.read_text(errors="replace")[-3000:], file=sys.stderr)
    return rows


def postgres_database() -> tuple[Any, str]:
    """A fresh database on a local pgserver (as bench/postgres.py and the tests use)."""
    sys.path.insert(0, str(ROOT))
    from tests.pg import PgTestServer

    server = PgTestServer()
    name = server.database()
    return server, server.url(name)


async def main_async(
    args: argparse.Namespace, postgres_url: str | None
) -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]]]:
    levels = args.clients or [1, 8, 32]
    floor = await measure_floor(levels, args)
    rows: list[dict[str, Any]] = []
    for backend in args.backend or ["sqlite", "postgres"]:
        rows += await measure_backend(backend, postgres_url if backend == "postgres" else None, levels, args)
    return rows, floor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--clients", type=int, action="append", help="concurrent clients (repeatable; default 1, 8, 32)"
    )
    parser.add_argument("--workers", type=int, action="append", help="server processes (repeatable; default 1, 2)")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), action="append",
                        help="repeatable; default both")
    parser.add_argument("--stateless", action="store_true", help="a single worker runs stateless too")
    parser.add_argument("--seconds", type=float, default=15.0, help="measured time per level")
    parser.add_argument("--add-share", type=float, default=0.2, help="share of add_memory calls (default 0.2)")
    parser.add_argument("--memories", type=int, default=100, help="memories per user before the run")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    server, url = postgres_database() if "postgres" in (args.backend or ["postgres"]) else (None, None)
    try:
        rows, floor = asyncio.run(main_async(args, url))
    finally:
        if server is not None:
            server.stop()
    text = table(rows, floor, args)
    print(text)
    if args.write:
        write_section(text, MARKER)


if __name__ == "__main__":
    main()
