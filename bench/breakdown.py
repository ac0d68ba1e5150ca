"""Where a recall's and an add's time goes, in process (no MCP, no stdio): the service, split by store call.

    python bench/breakdown.py                      # 1,000 and 10,000 memories
    python bench/breakdown.py --sizes 100000
    python bench/breakdown.py --write              # ... and update docs/benchmarks.md

speed.py measures what a client sees; this measures the same synthetic store from inside the server
process, so the difference between the two is the MCP layer (JSON-RPC over stdio, argument and result
validation on both sides). Each store call of a recall is timed as the service awaits it: its SQL on the
connection's thread plus the hop to and from that thread ("touch" and "add_event" count the hits as
used, as the server does). "rest" is everything else: parsing the query, embedding it, ranking, shaping
the result, opening and committing the transactions. Adds run through the write path (`Writing.add`, a durable
commit each) on the filled store.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import pstats
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

from common import machine, percentile, write_section  # noqa: E402
from speed import fill, synthetic_memories, synthetic_queries  # noqa: E402

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.base.config import Settings  # noqa: E402
from pocketmem.service.recall.retrieval import RecallRequest  # noqa: E402
from pocketmem.service.writing.add_request import AddRequest  # noqa: E402
from pocketmem.store.sqlite import store as sqlite_store  # noqa: E402

# The store calls a recall makes (service/recall/candidates.py, retrieval.py), in the order it makes them.
RECALL_CALLS = (
    "memories_between",
    "user_term_counts",
    "keyword_hits",
    "core_similarities",
    "important_similarities",
    "vector_neighbours",
    "similarities_and_terms",
    "similarities",
    "get_memories",
    "pairwise_similarities",
    "newest_holders",
    "due_pending",
    "open_todos",
    "touch",
    "add_event",
)


def timed(spent: dict[str, float], name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await method(*args, **kwargs)
        finally:
            spent[name] += (time.perf_counter() - started) * 1000

    return wrapper


class Profiles:
    """cProfile over the measured recalls and adds: where the Python time goes, by function."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.recall = cProfile.Profile()
        self.add = cProfile.Profile()

    @contextmanager
    def on(self, profile: cProfile.Profile) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        profile.enable()
        try:
            yield
        finally:
            profile.disable()


def hot_functions(profile: cProfile.Profile, calls: int, top: int) -> list[tuple[str, float, float]]:
    """(function, own ms per call, cumulative ms per call) of the `top` functions by own time.

    The event loop's wait (select/epoll) is where the loop sits while SQLite works on its thread.
    """
    stats = pstats.Stats(profile)
    rows = []
    for (filename, line, name), (_, _, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = filename.split("/server/")[-1].split("site-packages/")[-1]
        label = f"{where}:{line} {name}" if line else name
        rows.append((label, own * 1000 / calls, cumulative * 1000 / calls))
    rows.sort(key=lambda r: -r[1])
    return rows[:top]


async def measure(
    home: Path, cap: int, queries: int, adds: int, profiles: Profiles | None = None
) -> dict[str, Any]:
    profiles = profiles or Profiles(False)
    spent: dict[str, float] = defaultdict(float)
    originals = {name: getattr(sqlite_store.SQLiteTx, name) for name in RECALL_CALLS}
    settings = Settings(home=home, max_active=cap, maintain_interval=0)
    per_call: dict[str, list[float]] = defaultdict(list)
    totals: list[float] = []
    try:
        for name, method in originals.items():
            setattr(sqlite_store.SQLiteTx, name, timed(spent, name, method))
        async with PocketMem(settings) as app:
            app.retrieval.uses.deferred = True  # as the server runs it: use counts written after answering
            pool = synthetic_queries(queries + 20)
            for q in pool[:20]:
                await app.retrieval.recall("global", RecallRequest(query=q["query"], keywords=q["keywords"]))
            for q in pool[20:]:
                spent.clear()
                started = time.perf_counter()
                with profiles.on(profiles.recall):
                    await app.retrieval.recall("global", RecallRequest(query=q["query"], keywords=q["keywords"]))
                total = (time.perf_counter() - started) * 1000
                totals.append(total)
                for name in RECALL_CALLS:
                    per_call[name].append(spent.get(name, 0.0))
                per_call["rest"].append(total - sum(spent.values()))
            add_ms = []
            for i, req in enumerate(synthetic_memories(adds, seed=99)):
                started = time.perf_counter()
                with profiles.on(profiles.add):
                    await app.writing.add(
                        "global",
                        AddRequest(content=f"{req.content}（新{i}）", category=req.category, keywords=req.keywords),
                    )
                add_ms.append((time.perf_counter() - started) * 1000)
    finally:
        for name, method in originals.items():
            setattr(sqlite_store.SQLiteTx, name, method)
    return {
        "recall_p50": statistics.median(totals),
        "recall_p95": percentile(sorted(totals), 0.95),
        "parts": {name: statistics.mean(values) for name, values in per_call.items()},
        "add_p50": statistics.median(add_ms),
        "add_p95": percentile(sorted(add_ms), 0.95),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--adds", type=int, default=200)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also profile (cProfile) and list the N functions with the most own time")
    args = parser.parse_args()
    rows = []
    profiled: list[tuple[int, str, list[tuple[str, float, float]]]] = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(dir=ROOT / "bench") as tmp:
            cap = max(800, size + args.adds + 100)
            asyncio.run(fill(Path(tmp), size, cap))
            profiles = Profiles(args.profile > 0)
            row = {"size": size, **asyncio.run(measure(Path(tmp), cap, args.queries, args.adds, profiles))}
        rows.append(row)
        if args.profile:
            for kind, profile, calls in (("recall", profiles.recall, args.queries), ("add", profiles.add, args.adds)):
                hot = hot_functions(profile, calls, args.profile)
                profiled.append((size, kind, hot))
                print(f"{size:>7} memories, {kind}: own ms per call (cumulative)", file=sys.stderr)
                for label, own, cumulative in hot:
                    print(f"    {own:7.3f} ({cumulative:7.3f})  {label}", file=sys.stderr)
        parts = ", ".join(f"{k} {v:.2f}" for k, v in row["parts"].items())
        print(
            f"{size:>7} memories: recall p50 {row['recall_p50']:.1f} ms p95 {row['recall_p95']:.1f} ms "
            f"({parts}) | add p50 {row['add_p50']:.1f} ms p95 {row['add_p95']:.1f} ms",
            file=sys.stderr,
        )
    if args.write:
        parts = [*RECALL_CALLS, "rest"]
        lines = [
            f"Generated by `python bench/breakdown.py --write` on {machine()}.",
            f"In process, the stores of speed.py; {args.queries} "
            f"recalls (mean ms per part) and {args.adds} adds per size.",
            "",
            "| memories | recall p50 | recall p95 | " + " | ".join(parts) + " | add p50 | add p95 |",
            "|---|---|---|" + "---|" * len(parts) + "---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['size']:,} | {r['recall_p50']:.1f} ms | {r['recall_p95']:.1f} ms | "
                + " | ".join(f"{r['parts'].get(p, 0.0):.2f}" for p in parts)
                + f" | {r['add_p50']:.1f} ms | {r['add_p95']:.1f} ms |"
            )
        write_section("\n".join(lines), "breakdown")
        if profiled:
            text = [
                f"Generated by `python bench/breakdown.py --profile {args.profile} --write` on {machine()} "
                "(2-core sandbox, shared with other work).",
                "cProfile over the measured calls (profiling slows Python code about 1.5-2x, SQLite not at all):",
                "the functions with the most own time, in ms per recall or add (cumulative in brackets).",
                "`poll of select.epoll` is the event loop waiting, mostly for SQLite on its connection's thread.",
            ]
            for size, kind, hot in profiled:
                text += ["", f"**{kind}, {size:,} memories**", "", "| own ms | cumulative ms | function |",
                         "|---|---|---|"]
                text += [f"| {own:.3f} | {cumulative:.3f} | `{label}` |" for label, own, cumulative in hot]
            write_section("\n".join(text), "speed-profile")


if __name__ == "__main__":
    main()
