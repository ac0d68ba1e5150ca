"""Small stores: 1, 5 and 20 memories (bench/data/small_stores.json). Every gold memory must be in the top 3
(or, for a question marked all_in_top, the top that many); a question without gold must recall nothing.

    python bench/small_stores.py            # prints the table; bench/quality.py --write puts it in the docs
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

from bm25 import BM25  # noqa: E402

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.base.clock import FixedClock  # noqa: E402
from pocketmem.base.config import Settings  # noqa: E402
from pocketmem.service.recall.retrieval import RecallRequest  # noqa: E402
from pocketmem.service.writing.add_request import AddRequest  # noqa: E402

DATA = ROOT / "bench" / "data" / "small_stores.json"


async def run_store(store: dict[str, Any], now: Any) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        async with PocketMem(Settings(home=Path(tmp), tz="Asia/Shanghai", maintain_interval=0),
                             clock=FixedClock(now)) as app:
            ids = []
            for text in store["memories"]:
                result = await app.writing.add("small", AddRequest(content=text))
                assert result.status == "stored", (text, result)
                ids.append(result.memory_id)
            bm25 = BM25((str(i), text) for i, text in enumerate(store["memories"]))
            for q in store["questions"]:
                top = q.get("all_in_top", 3)
                result = await app.retrieval.recall(
                    "small", RecallRequest(query=q["query"], keywords=q.get("keywords", []), top_k=max(top, 5),
                                           record=False))
                got = [m.id for m in result.memories]
                gold = {ids[i] for i in q["gold"]}
                ok = (not got) if not gold else gold <= set(got[:top])
                ref = bm25.search([q["query"], *q.get("keywords", [])], max(top, 5))
                ref_ok = (not ref) if not gold else {str(i) for i in q["gold"]} <= set(ref[:top])
                rows.append({"store": store["name"], "query": q["query"], "ok": ok, "bm25_ok": ref_ok,
                             "negative": not gold})
    return rows


def evaluate() -> dict[str, Any]:
    from quality import NOW

    data = json.loads(DATA.read_text(encoding="utf-8"))
    rows = [row for store in data["stores"] for row in asyncio.run(run_store(store, NOW))]
    summary: dict[str, Any] = {}
    for store in data["stores"]:
        mine = [r for r in rows if r["store"] == store["name"]]
        pos = [r for r in mine if not r["negative"]]
        neg = [r for r in mine if r["negative"]]
        summary[store["name"]] = {
            "memories": len(store["memories"]),
            "relevant_in_top3": f"{sum(r['ok'] for r in pos)}/{len(pos)}",
            "bm25_relevant_in_top3": f"{sum(r['bm25_ok'] for r in pos)}/{len(pos)}",
            "negatives_empty": f"{sum(r['ok'] for r in neg)}/{len(neg)}",
            "misses": [r["query"] for r in mine if not r["ok"]],
        }
    return summary


def table(summary: dict[str, Any]) -> str:
    lines = ["| store | memories | every relevant memory in the top 3 | plain BM25 "
             "| nothing recalled for unrelated questions | missed |",
             "|---|---|---|---|---|---|"]
    for name, s in summary.items():
        lines.append(f"| {name} | {s['memories']} | {s['relevant_in_top3']} | {s['bm25_relevant_in_top3']} | "
                     f"{s['negatives_empty']} | {'; '.join(s['misses'])} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(evaluate()))
