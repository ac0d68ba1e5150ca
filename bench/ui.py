"""How fast the management page answers: the list's first page at 10,000 and 100,000 memories.

    python bench/ui.py                      # 10,000 and 100,000 memories, SQLite
    python bench/ui.py --sizes 10000 --runs 20
    python bench/ui.py --write              # ... and update docs/benchmarks.md

A store is filled through the import path (synthetic memories shaped like bench/speed.py's, created
over the past year), then the page's ASGI app is asked in process over httpx (the full request:
access check, service, store, template) for: the first page (newest first, 50 rows), the first page
sorted by importance and by uses, a plain-text search, a recall-ranked search, one memory, and the
insights view. Each request runs --runs times after one warm-up; p50 and p95 are reported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

import httpx2  # noqa: E402
from common import machine, percentile, write_section  # noqa: E402
from speed import synthetic_memories  # noqa: E402

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.base.config import Settings  # noqa: E402
from pocketmem.core.scoring import fill_scores, importance  # noqa: E402
from pocketmem.core.text import content_hash  # noqa: E402
from pocketmem.service.manage.tokens import Anonymous  # noqa: E402
from pocketmem.service.transfer.exporting import FORMAT, VERSION  # noqa: E402
from pocketmem.web.server import make_access, ui_app  # noqa: E402

CHUNK = 10_000
USER = "global"
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def export_lines(size: int, seed: int = 5) -> list[str]:
    rnd = random.Random(seed)
    lines = [json.dumps({"type": "header", "format": FORMAT, "version": VERSION})]
    for i, req in enumerate(synthetic_memories(size)):
        created = NOW - timedelta(days=rnd.uniform(0, 365))
        scores = fill_scores(req.category, None)
        info, coef, current = importance(scores, created, NOW)
        lines.append(json.dumps({
            "type": "memory", "id": f"{i:032x}", "user_id": USER, "content": req.content,
            "category": req.category.value, "keywords": req.keywords, "scores": scores.model_dump(),
            "info_importance": info, "time_coef": coef, "importance": current, "confidence": 1.0,
            "source": req.source, "created_at": created.isoformat(), "updated_at": created.isoformat(),
            "valid_from": created.isoformat(), "use_count": rnd.choice([0, 0, 0, 1, 2, 5, 12]), "status": "active",
            "content_hash": content_hash(req.content), "embed_model": "hash",
        }, ensure_ascii=False))
    return lines


async def fill(home: Path, size: int) -> float:
    lines = export_lines(size)
    started = time.perf_counter()
    async with PocketMem(Settings(home=home, max_active=size * 2, maintain_interval=0)) as app:
        header = lines[0]
        for start in range(1, len(lines), CHUNK):
            await app.exporter.import_lines([header, *lines[start : start + CHUNK]])
    return time.perf_counter() - started


async def measure(home: Path, size: int, runs: int) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    async with PocketMem(Settings(home=home, max_active=size * 2, maintain_interval=0)) as app:
        asgi = ui_app(app, make_access(app, Anonymous.always, "127.0.0.1"))
        transport = httpx2.ASGITransport(app=asgi)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            some_id = f"{size // 2:032x}"
            requests = {
                "first page": "/ui/memories",
                "last page": f"/ui/memories?page={size // 50}",
                "by importance": "/ui/memories?sort=importance",
                "by uses": "/ui/memories?sort=uses",
                "text search": "/ui/memories?q=香菜",
                "recall search": "/ui/memories?q=香菜&mode=recall",
                "one memory": f"/ui/memories/{some_id}",
                "insights": "/ui/insights",
            }
            for name, path in requests.items():
                response = await client.get(path)
                assert response.status_code == 200, (path, response.status_code, response.text[-300:])
                times = []
                for _ in range(runs):
                    started = time.perf_counter()
                    response = await client.get(path)
                    times.append((time.perf_counter() - started) * 1000)
                times.sort()
                out[name] = (percentile(times, 0.5), percentile(times, 0.95))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the filled stores in DIR/SIZE and reuse them")
    args = parser.parse_args()
    results: dict[int, dict[str, tuple[float, float]]] = {}
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="pocketmem-ui-bench-") as folder:
            home = args.keep / str(size) if args.keep else Path(folder)
            if not (home / "memory.db").exists():
                home.mkdir(parents=True, exist_ok=True)
                took = asyncio.run(fill(home, size))
                print(f"{size:,} memories imported in {took:.0f} s", file=sys.stderr)
            results[size] = asyncio.run(measure(home, size, args.runs))
        for name, (p50, p95) in results[size].items():
            print(f"{size:>7,}  {name:<14} p50 {p50:7.1f} ms  p95 {p95:7.1f} ms")
    if args.write:
        names = list(next(iter(results.values())))
        rows = [
            f"| {name} | "
            + " | ".join(f"{results[s][name][0]:.1f} / {results[s][name][1]:.1f} ms" for s in results)
            + " |"
            for name in names
        ]
        text = "\n".join([
            "## Management page",
            "",
            f"Generated by `python bench/ui.py --write` on {machine()} (2-core sandbox, shared with other work).",
            f"Each cell is p50 / p95 of {args.runs} requests through the page's ASGI app in process (access check,",
            "service, store and template), SQLite, one user. Target: the first page under 100 ms at p50.",
            "",
            "| request | " + " | ".join(f"{s:,} memories" for s in results) + " |",
            "|---|" + "---|" * len(results),
            *rows,
            "",
            "- The list's pages read the created_at / importance indexes and count from the kept active count, so",
            "  the first and the last page stay flat from 10,000 to 100,000 memories.",
            "- **by uses** and the most-recalled list in **insights** sort on use_count, which has no index: every",
            "  row is read (each carries its vector). An index on memories (user_id, status, use_count) would make",
            "  them as flat as the importance sort; it needs a migration.",
            "- **insights** also reads every memory of the last 90 days for its category (memories per day).",
            "- **text search** (`q=香菜`, about 2% of these memories) goes through the keyword index, then reads",
            "  every match to filter and sort it: its cost follows the number of matches, not the store's size.",
        ])
        write_section(text, "ui-bench")


if __name__ == "__main__":
    main()
