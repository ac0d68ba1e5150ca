"""Search the ranking constants (weights, threshold, keyword saturation) on one evaluation set and
check them on the others. A development tool: its output informs the defaults in ranking.py/config.py.

    python bench/calibrate.py --tune eval_a          # search on eval_a, report eval_b with the same constants

It extracts every candidate's raw signals once per query (cosine, matched and total keyword rarity, age,
importance), then replays the ranking formula for each setting in pure Python.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

from quality import DATA, NOW, load  # noqa: E402

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.clock import FixedClock  # noqa: E402
from pocketmem.config import Settings  # noqa: E402
from pocketmem.models import Status  # noqa: E402
from pocketmem.retrieval import RecallRequest  # noqa: E402
from pocketmem.scoring import importance  # noqa: E402


@dataclass
class Row:
    key: str
    sem: float  # calibrated semantic score
    matched: float
    total: float
    age: float
    imp: float
    outdated: bool


@dataclass
class Query:
    qid: str
    type: str
    gold: set[str]
    stale: set[str]
    rows: list[Row]


async def extract(data: dict[str, Any], settings: Settings, keywords: bool) -> list[Query]:
    out = []
    async with PocketMem(settings, clock=FixedClock(NOW)) as app:
        ids = await load(app, data, keywords)
        by_id = {v: k for k, v in ids.items()}
        r = app.retrieval
        baseline = await r.baseline()
        for q in data["queries"]:
            req = RecallRequest(
                query=q["query"], context=q.get("context", []), keywords=q.get("keywords", []) if keywords else []
            )
            parsed = r._parse(req)
            vector = await r._query_vector(parsed)
            async with app.store.read() as reader:
                candidates, rar = await r._candidates(reader, "eval", parsed, vector, (Status.active,), [])
            total = sum(w * rar.get(t, 0.0) for t, w in parsed.terms.items())
            rows = []
            for c in candidates:
                m = c.memory
                if m.expires_at is not None and m.expires_at <= NOW:
                    continue
                matched = sum(w * rar.get(t, 0.0) for t, w in parsed.terms.items() if t in c.terms)
                cos = c.cosine if c.cosine is not None else 0.0
                sem = min(1.0, max(0.0, (cos - baseline) / (1 - baseline)))
                rows.append(
                    Row(
                        by_id[m.id], sem, matched, total, (NOW - m.valid_from).total_seconds() / 86400,
                        importance(m.scores, m.last_active_at or m.created_at, NOW)[2], m.status == Status.superseded,
                    )
                )
            out.append(Query(q["id"], q["type"], set(q["gold"]), set(q.get("stale", [])), rows))
    return out


def kw_score(row: Row, sat: float, cov_weight: float) -> float:
    if row.matched <= 0 or row.total <= 0:
        return 0.0
    return row.matched / (row.matched + sat) * ((1 - cov_weight) + cov_weight * row.matched / row.total)


def replay(queries: list[Query], p: dict[str, float]) -> dict[str, float]:
    hit3 = n = neg_ok = neg = conflict_ok = conflicts = hit1 = 0
    rel_w = p["ws"] + p["wk"]
    for q in queries:
        scored = []
        for row in q.rows:
            kw = kw_score(row, p["sat"], p["cov"])
            rel = (p["ws"] * row.sem + p["wk"] * kw) / rel_w
            if rel < p["thr"]:
                continue
            score = p["ws"] * row.sem + p["wk"] * kw + p["wf"] * math.exp(-row.age / p["fd"]) + p["wi"] * row.imp
            scored.append((score, row.key))
        scored.sort(reverse=True)
        got = [k for _, k in scored[:5]]
        if not q.gold:
            neg += 1
            neg_ok += not got
            continue
        n += 1
        ranks = [i for i, k in enumerate(got) if k in q.gold]
        hit3 += bool(ranks) and ranks[0] < 3
        hit1 += bool(ranks) and ranks[0] == 0
        if q.type == "conflict":
            conflicts += 1
            stale = [i for i, k in enumerate(got) if k in q.stale]
            conflict_ok += bool(ranks) and ranks[0] < 3 and (not stale or stale[0] > ranks[0])
    return {
        "hit@1": hit1 / n,
        "hit@3": hit3 / n,
        "neg": neg_ok / max(neg, 1),
        "conflict": conflict_ok / max(conflicts, 1),
    }


GRID = {
    "ws": [0.55],
    "wk": [0.30, 0.45, 0.6],
    "wf": [0.05, 0.10, 0.15],
    "wi": [0.0, 0.05],
    "fd": [30.0, 90.0, 180.0],
    "sat": [0.25, 0.5, 1.0],
    "cov": [0.3, 0.5, 0.7],
    "thr": [0.10, 0.12, 0.14, 0.16, 0.18, 0.20, 0.22, 0.25, 0.28],
}


def objective(m: dict[str, float]) -> float:
    # hit@3 matters most; negatives and conflicts must stay high.
    return m["hit@3"] + 0.5 * m["neg"] + 0.3 * m["conflict"] + 0.2 * m["hit@1"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tune", default="eval_a")
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--embed-model")
    args = parser.parse_args()
    sets = sorted(p.stem for p in DATA.glob("eval_*.json"))
    extracted: dict[tuple[str, bool], list[Query]] = {}
    for name in sets:
        data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
        for keywords in (True, False):
            with tempfile.TemporaryDirectory() as tmp:
                settings = Settings(home=Path(tmp), tz="Asia/Shanghai", max_active=100_000,
                                    embedder=args.embedder, embed_model=args.embed_model, relevance_threshold=0.0)
                extracted[(name, keywords)] = asyncio.run(extract(data, settings, keywords))
    best: list[tuple[float, dict[str, float]]] = []
    keys = list(GRID)
    for values in itertools.product(*(GRID[k] for k in keys)):
        p = dict(zip(keys, values, strict=True))
        m_kw = replay(extracted[(args.tune, True)], p)
        m_no = replay(extracted[(args.tune, False)], p)
        best.append((objective(m_kw) + 0.5 * objective(m_no), p))
    best.sort(key=lambda x: -x[0])
    for score, p in best[:8]:
        print(f"{score:.3f} {p}")
        for name in sets:
            for keywords in (True, False):
                m = replay(extracted[(name, keywords)], p)
                tag = "kw" if keywords else "no-kw"
                print(f"    {name:7s} {tag:5s} " + " ".join(f"{k} {v:.3f}" for k, v in m.items()))


if __name__ == "__main__":
    main()
