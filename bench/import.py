"""Bulk import rate: `pocketmem import FILE` of N synthetic memories into a fresh store.

    python bench/import.py                         # 10,000 memories
    python bench/import.py --sizes 1000,10000,50000
    python bench/import.py --write                 # ... and update docs/benchmarks.md

The export file is made once per size (speed.py's synthetic memories, written through the bulk
path, then `pocketmem export`); each run then imports it into an empty store with the built-in
`hash` embedder (or `--embedder`). Import acknowledges rows without their vectors; the embed queue computes
them afterwards. Figures: the CLI as a user runs it (a subprocess, start-up and reading the file included,
until the import's report is printed), `Exporter.import_lines` in process (the import alone), then the
queue's rate (`EmbedQueue.run_once` in process) and recall while it fills (speed.py's questions, asked
while the queue runs and again once it is done: latency, and the share of answers that are identical).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

from common import machine, write_section  # noqa: E402
from speed import fill, synthetic_queries  # noqa: E402

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.base.config import Settings  # noqa: E402
from pocketmem.service.recall.retrieval import RecallRequest  # noqa: E402

QUESTIONS = 200


async def make_export(home: Path, size: int, out: Path) -> None:
    await fill(home, size, cap=size + 100)
    buffer = io.StringIO()
    async with PocketMem(Settings(home=home, max_active=size + 100)) as app:
        await app.exporter.export(buffer)
    out.write_text(buffer.getvalue(), encoding="utf-8")  # noqa: ASYNC240 - set-up, outside anything timed


def cli_import(home: Path, path: Path, cap: int, embedder: str) -> float:
    """Seconds from spawn until the import's report is printed (the rows acknowledged)."""
    env = {
        "PATH": os.environ.get("PATH", ""), "POCKETMEM_HOME": str(home), "POCKETMEM_MAX_ACTIVE": str(cap),
        "POCKETMEM_EMBEDDER": embedder,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "server"), os.environ.get("PYTHONPATH", "")]),
    }
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "pocketmem", "import", str(path)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    report = proc.stdout.readline()
    acknowledged = time.perf_counter() - started
    proc.communicate()
    assert proc.returncode == 0 and report.startswith(b"{"), report
    return acknowledged


async def inproc_import(home: Path, path: Path, cap: int, embedder: str) -> dict[str, float]:
    lines = path.read_text(encoding="utf-8").splitlines()  # noqa: ASYNC240 - read before the clock starts
    async with PocketMem(Settings(home=home, max_active=cap, embedder=embedder)) as app:
        started, cpu = time.perf_counter(), time.process_time()
        report = await app.exporter.import_lines(lines)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        queue = await fill_queue(app)
    return {"imported": report.imported.memory, "seconds": elapsed, "cpu": cpu, **queue}


async def fill_queue(app: PocketMem) -> dict[str, float]:
    """The embed queue's rate, and recall while it runs against recall once it is done."""
    questions = synthetic_queries(QUESTIONS)
    during: list[tuple[float, list[str]]] = []
    queue = asyncio.ensure_future(app.embed_queue.run_once())
    started = time.perf_counter()
    while not queue.done() and len(during) < len(questions):
        during.append(await timed_recall(app, questions[len(during)]))
        await asyncio.sleep(0.05)
    embedded = await queue
    seconds = time.perf_counter() - started
    after = [await timed_recall(app, q) for q in questions[: len(during)]]
    same = sum(a[1] == b[1] for a, b in zip(during, after, strict=True))
    return {
        "queue_rate": embedded / seconds, "asked": len(during),
        "during_p50": statistics.median(t for t, _ in during) if during else float("nan"),
        "after_p50": statistics.median(t for t, _ in after) if after else float("nan"),
        "same": same / len(during) if during else float("nan"),
    }


async def timed_recall(app: PocketMem, question: dict[str, Any]) -> tuple[float, list[str]]:
    started = time.perf_counter()
    result = await app.retrieval.recall("global", RecallRequest(**question, record=False))
    return (time.perf_counter() - started) * 1000, [m.id for m in result.memories]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(dir=ROOT / "bench") as tmp:
            base = Path(tmp)
            export = base / "export.jsonl"
            asyncio.run(make_export(base / "source", size, export))
            cli_s = cli_import(base / "cli", export, size + 100, args.embedder)
            row = asyncio.run(inproc_import(base / "inproc", export, size + 100, args.embedder))
            assert row["imported"] == size, (row["imported"], size)
        row.update(size=size, cli=size / cli_s, cli_s=cli_s, inproc=size / row["seconds"],
                   inproc_cpu=size / row["cpu"], load=os.getloadavg()[0])
        rows.append(row)
        print(f"{size:>7} memories: CLI {row['cli']:,.0f}/s ({cli_s:.2f} s to the report), "
              f"in process {row['inproc']:,.0f}/s ({row['inproc_cpu']:,.0f} per CPU-second); "
              f"queue {row['queue_rate']:,.0f}/s; recall while it fills p50 {row['during_p50']:.1f} ms "
              f"(after {row['after_p50']:.1f} ms, same answer {row['same']:.0%} of {row['asked']:.0f}); "
              f"load average {row['load']:.1f}", file=sys.stderr)
    if args.write:
        lines = [
            f"Generated by `python bench/import.py --write` on {machine()} (2-core sandbox, shared with other work).",
            f"`{args.embedder}` embedder; a fresh store per run. Rows are acknowledged without vectors; the embed",
            "queue computes them afterwards. Memories per second of wall time until the import's report (CLI: from",
            "spawn, start-up and reading the file included), and in process per CPU-second of the importing process",
            "(both threads: Python and SQLite), which is what the import costs when the machine is not shared. Then",
            "the queue's rate, and recall (speed.py's questions, one every 50 ms) while the queue runs against the",
            "same questions once it is done. The load average is the machine's during the run.",
            "",
            "| memories | CLI to the report | in process | in process per CPU-second | queue | recall p50 while it "
            "fills | recall p50 after | same answer | load average |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['size']:,} | {r['cli']:,.0f}/s ({r['cli_s']:.1f} s) | {r['inproc']:,.0f}/s | {r['inproc_cpu']:,.0f} "
            f"| {r['queue_rate']:,.0f}/s | {r['during_p50']:.1f} ms | {r['after_p50']:.1f} ms | {r['same']:.0%} "
            f"| {r['load']:.1f} |"
            for r in rows
        ]
        write_section("\n".join(lines), "import")


if __name__ == "__main__":
    main()
