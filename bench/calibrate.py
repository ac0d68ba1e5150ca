"""Search the ranking constants on one evaluation set and show how they carry over to the others.
A development tool: its output informs the defaults in ranking.py and config.py.

    python bench/calibrate.py --tune eval_a

Every query's candidates (with cosine, keyword terms, window flag) are extracted once through the real
retrieval code; then each setting is replayed through the real `ranking.rank` and `ranking.shadow_older`
with the module constants patched, so what is tuned is exactly what ships.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

from quality import DATA, NOW, bench_settings, load  # noqa: E402

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.base.clock import FixedClock  # noqa: E402
from pocketmem.base.models import Status  # noqa: E402
from pocketmem.core import ranking  # noqa: E402
from pocketmem.core.similarity import NEUTRAL  # noqa: E402
from pocketmem.core.text import guess_language  # noqa: E402
from pocketmem.service.retrieval import RecallRequest  # noqa: E402


@dataclass
class Case:
    qid: str
    type: str
    gold: set[str]
    stale: set[str]
    candidates: list[ranking.Candidate]
    terms: dict[str, float]
    rarities: dict[str, float]
    temporal: bool
    scale: Any


@dataclass
class Extracted:
    cases: list[Case]
    keys: dict[str, str]  # memory id -> dataset key
    pairs: dict[tuple[str, str], float]


async def extract(data: dict[str, Any], settings: Any, keywords: bool) -> Extracted:
    async with PocketMem(settings, clock=FixedClock(NOW)) as app:
        ids = await load(app, data, keywords)
        keys = {v: k for k, v in ids.items()}
        r = app.retrieval
        scales = await r.calibration.scales()
        async with app.store.read() as reader:
            pairs = await reader.pairwise_similarities("eval", list(ids.values()))
        cases = []
        for q in data["queries"]:
            req = RecallRequest(
                query=q["query"], context=q.get("context", []), keywords=q.get("keywords", []) if keywords else []
            )
            parsed = r.parse(req)
            vector, own = await r.query_vectors(parsed)
            scale = scales.get(guess_language(parsed.message), NEUTRAL)
            async with app.store.read() as reader:
                candidates, rarities = await r.candidates(
                    reader, "eval", parsed, vector, (Status.active,), [], scale, own
                )
            # Candidates with no signal at all can never pass a positive threshold: drop them once here.
            candidates = [
                c for c in candidates
                if (c.memory.expires_at is None or c.memory.expires_at > NOW)
                and (c.in_window or (c.cosine or 0.0) > scale.baseline or c.terms.intersection(rarities))
            ]
            cases.append(
                Case(q["id"], q["type"], set(q["gold"]), set(q.get("stale", [])), candidates, parsed.terms,
                     rarities, parsed.time.intent, scale)
            )
    return Extracted(cases, keys, pairs)


def replay(ex: Extracted, p: dict[str, float]) -> dict[str, float]:
    for name in ("KEYWORD_SATURATION", "COVERAGE_WEIGHT", "FRESHNESS_DAYS", "TEMPORAL_BONUS", "WINDOW_BONUS",
                 "SHADOW_SIMILARITY", "SHADOW_OVERLAP", "SHADOW_FACTOR"):
        setattr(ranking, name, p[name])
    weights = ranking.Weights(p["ws"], p["wk"], p["wf"], p["wi"])
    hit1 = hit3 = n = neg_ok = neg = conflict_ok = conflicts = 0
    for case in ex.cases:
        ranked = ranking.rank(case.candidates, case.terms, case.rarities, scale=case.scale, weights=weights,
                              threshold=p["thr"], now=NOW, temporal=case.temporal)
        ranked = ranking.shadow_older(ranked[:12], ex.pairs, case.scale)
        got = [ex.keys[x.memory.id] for x in ranked[:5]]
        if not case.gold:
            neg += 1
            neg_ok += not got
            continue
        n += 1
        ranks = [i for i, k in enumerate(got) if k in case.gold]
        hit3 += bool(ranks) and ranks[0] < 3
        hit1 += bool(ranks) and ranks[0] == 0
        if case.type == "conflict":
            conflicts += 1
            stale = [i for i, k in enumerate(got) if k in case.stale]
            conflict_ok += bool(ranks) and ranks[0] < 3 and (not stale or stale[0] > ranks[0])
    return {
        "hit@1": hit1 / n, "hit@3": hit3 / n, "neg": neg_ok / max(neg, 1), "conflict": conflict_ok / max(conflicts, 1)
    }


GRID = {
    "ws": [0.55],
    "wk": [0.6, 0.8],
    "wf": [0.15],
    "wi": [0.0],
    "FRESHNESS_DAYS": [30.0],
    "KEYWORD_SATURATION": [0.5, 1.0, 2.0, 3.0],
    "COVERAGE_WEIGHT": [0.2, 0.4, 0.6],
    "TEMPORAL_BONUS": [0.2],
    "WINDOW_BONUS": [0.15],
    "SHADOW_SIMILARITY": [0.45],
    "SHADOW_OVERLAP": [0.5],
    "SHADOW_FACTOR": [0.8],
    "thr": [0.16, 0.2, 0.24, 0.28, 0.32, 0.36, 0.4, 0.45],
}


def objective(m: dict[str, float]) -> float:
    # hit@3 first; negatives and conflicts count too, since wrong memories cost as much as missing ones.
    return m["hit@3"] + 0.6 * m["neg"] + 0.4 * m["conflict"] + 0.2 * m["hit@1"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tune", default="eval_a")
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--embed-model")
    parser.add_argument("--samples", type=int, default=3000, help="random settings from the grid")
    args = parser.parse_args()
    sets = sorted(p.stem for p in DATA.glob("eval_*.json"))
    extracted: dict[tuple[str, bool], Extracted] = {}
    for name in sets:
        data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
        for keywords in (True, False):
            with tempfile.TemporaryDirectory() as tmp:
                settings = bench_settings(Path(tmp), args.embedder, args.embed_model, relevance_threshold=0.0)
                extracted[(name, keywords)] = asyncio.run(extract(data, settings, keywords))
    keys = list(GRID)
    space = list(itertools.product(*(GRID[k] for k in keys)))
    random.Random(0).shuffle(space)
    scored = []
    for values in space[: args.samples]:
        p = dict(zip(keys, values, strict=True))
        total = objective(replay(extracted[(args.tune, True)], p)) + 0.5 * objective(
            replay(extracted[(args.tune, False)], p)
        )
        scored.append((total, p))
    scored.sort(key=lambda x: -x[0])
    for total, p in scored[:6]:
        print(f"{total:.3f} {p}")
        for name in sets:
            for keywords in (True, False):
                m = replay(extracted[(name, keywords)], p)
                figures = " ".join(f"{k} {v:.3f}" for k, v in m.items())
                print(f"    {name:7s} {'kw' if keywords else 'no-kw':5s} " + figures)


if __name__ == "__main__":
    main()
