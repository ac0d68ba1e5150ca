"""Every recall answer of the evaluation sets and the scale questions, to tell whether a change moved any.

    python bench/answers.py --dump before.json               # on the old code (e.g. a `git worktree` of main)
    python bench/answers.py --dump after.json                # on the new code
    python bench/answers.py --compare before.json after.json

The dump holds, for every query of bench/data/eval_*.json (loaded as bench/quality.py loads them, with and
without memory keywords; recalled with and without the agent's keywords, top 5 and top 12) and for
bench/scale.py's questions at the sizes asked (its cached stores), the ids, scores and explain breakdowns
recall answered. A speed change must leave them identical. Scale stores run on the real clock, so their
freshness (and with it the score) moves between runs: only their ids and relevance are compared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

import quality  # noqa: E402
import scale  # noqa: E402

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.base.clock import FixedClock  # noqa: E402
from pocketmem.base.config import Settings  # noqa: E402
from pocketmem.base.results import RecallResult  # noqa: E402
from pocketmem.service.recall.retrieval import RecallRequest  # noqa: E402


def answer(result: RecallResult, keys: dict[str, str] | None = None) -> list[Any]:
    rows: list[Any] = [
        [(keys or {}).get(m.id, m.id), m.score, m.breakdown.model_dump() if m.breakdown else None]
        for m in result.memories
    ]
    return [*rows, result.degraded]


async def set_answers(out: dict[str, Any]) -> None:
    for path in sorted(quality.DATA.glob("eval_*.json")):
        if path.stem in quality.UNREAD:
            continue  # held out: never run before the change it judges
        data = json.loads(path.read_text())
        for stored_keywords in (True, False):
            with tempfile.TemporaryDirectory() as tmp:
                async with PocketMem(quality.bench_settings(Path(tmp)), clock=FixedClock(quality.NOW)) as app:
                    ids = await quality.load(app, data, stored_keywords)
                    keys = {v: k for k, v in ids.items()}
                    for q in data["queries"]:
                        for keywords in (q.get("keywords", []), []) if stored_keywords else ([],):
                            for top in (5, 12):
                                req = RecallRequest(query=q["query"], context=q.get("context", []), keywords=keywords,
                                                    top_k=top, record=False, explain=True)
                                result = await app.retrieval.recall("eval", req)
                                name = f"{path.stem}/{stored_keywords}/{q['id']}/{bool(keywords)}/{top}"
                                out[name] = answer(result, keys)


async def scale_answers(out: dict[str, Any], sizes: list[int]) -> None:
    for size in sizes:
        home, _ = await scale.build(size)
        asked = scale.questions(scale.memories(size), 200)
        async with PocketMem(Settings(home=home, max_active=size * 2, maintain_interval=0)) as app:
            for text, _ in asked:
                req = RecallRequest(query=text, top_k=10, record=False, explain=True)
                out[f"scale{size}/{text}"] = answer(await app.retrieval.recall(scale.USER, req))


def comparable(name: str, rows: list[Any]) -> list[Any]:
    if not name.startswith("scale"):
        return rows
    return [[r[0], r[2]["relevance"] if r[2] else None] if isinstance(r, list) else r for r in rows]


def compare(before: dict[str, Any], after: dict[str, Any]) -> int:
    common = sorted(set(before) & set(after))
    moved = [n for n in common if comparable(n, before[n]) != comparable(n, after[n])]
    for name in moved[:10]:
        print(f"moved: {name}\n  before {before[name][:3]}\n  after  {after[name][:3]}")
    print(f"{len(common)} answers compared ({len(before)} before, {len(after)} after): {len(moved)} moved")
    return 1 if moved or len(common) != len(before) else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump", metavar="FILE")
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(Path(p).read_text()) for p in args.compare)
        sys.exit(compare(before, after))
    if not args.dump:
        parser.error("--dump FILE or --compare BEFORE AFTER")
    out: dict[str, Any] = {}
    asyncio.run(set_answers(out))
    asyncio.run(scale_answers(out, args.sizes))
    Path(args.dump).write_text(json.dumps(out, ensure_ascii=False))
    print(f"{len(out)} answers written to {args.dump}")


if __name__ == "__main__":
    main()
