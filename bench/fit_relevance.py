"""Fit the relevance model (core/relevance.py) on ONE evaluation set and print its coefficients.

    python bench/fit_relevance.py                 # fits on eval_a; never on eval_b, eval_c or the small stores
    python bench/fit_relevance.py --set eval_a --write-free   # just print; coefficients are pasted into code

1. Every query of the set is run with and without its agent keywords against a store of the set's memories,
   with the relevance threshold at 0, so every shortlisted memory comes back with its evidence.
2. Gold memories are positives, every other candidate a negative (a changed fact's stale version is left
   out: it is on topic, ranking decides against it). A logistic regression with non-negative weights on
   the evidence (numpy, plain gradient descent, L2 0.01) gives the coefficients.
3. The operating point (the intercept B0, and the weak-word factor) is then chosen on the same set by an
   objective that weighs both goals, measured by the full benchmark (bench/quality.py's evaluate) with and
   without keywords, in this order:

       a. targets = min(hit@3 with keywords / 0.92, negative precision with keywords / 0.85,
                        negative precision without keywords / 0.85)             (the targets as ratios)
       b. balanced = sum over both modes of (hit@3 + negative precision)         (ties of a.)

   The no-keyword hit@3 target (0.70) is left out of a.: no cut reaches it on the set, so it would only
   ever pull towards the laxest cut; it counts in b. eval_a has 28 questions without an answer, so both
   scores are step functions of B0: each point's scores are averaged over the grid points within SMOOTH
   of it (same factor), so the choice is not a cut at the edge of a step, one question from another answer;
   an exact tie after that goes to the stricter B0.

       python bench/fit_relevance.py                          # fit, then choose B0 and the factor
       python bench/fit_relevance.py --keep                   # keep the coefficients in code; choose only
       python bench/fit_relevance.py --keep --factors 0.3 --b0 -2.425,-2.45,-2.475,-2.5,-2.525
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

from quality import DATA, NOW, bench_settings, evaluate, load, summarise  # noqa: E402

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.base.clock import FixedClock  # noqa: E402
from pocketmem.base.models import Status  # noqa: E402
from pocketmem.core import relevance  # noqa: E402
from pocketmem.core.similarity import NEUTRAL  # noqa: E402
from pocketmem.core.text import guess_language  # noqa: E402
from pocketmem.service.retrieval import RecallRequest  # noqa: E402

NAMES = ("B_STRONGEST", "B_MATCHED", "B_COVERAGE", "B_SEMANTIC", "B_LENGTH")
NON_NEGATIVE = (True, True, True, True, False)
THRESHOLD = 0.40
TARGETS = {"hit@3": 0.92, "negative precision": 0.85}
FACTORS = (0.2, 0.3, 0.4, 0.5)  # WEAK_WORD_FACTOR candidates
CUTS = np.round(np.arange(-0.2, 0.6, 0.025), 3)  # logit cuts around the fitted 0.40 point (B0 = w0 - cut + logit)
SMOOTH = 0.05


async def features(data: dict, keywords: bool) -> tuple[list[tuple[float, ...]], list[int]]:
    xs: list[tuple[float, ...]] = []
    ys: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = bench_settings(Path(tmp), relevance_threshold=0.0)
        async with PocketMem(settings, clock=FixedClock(NOW)) as app:
            ids = await load(app, data, keywords)
            keys = {v: k for k, v in ids.items()}
            r = app.retrieval
            for q in data["queries"]:
                req = RecallRequest(query=q["query"], context=q.get("context", []),
                                    keywords=q.get("keywords", []) if keywords else [])
                parsed = r.parse(req)
                vector, own = await r.query_vectors(parsed)
                scale = await r.scale(guess_language(parsed.message)) if vector else NEUTRAL
                async with app.store.read() as reader:
                    candidates, _ = await r.candidates(
                        reader, "eval", parsed, vector, (Status.active,), [], scale, own
                    )
                gold, stale = set(q["gold"]), set(q.get("stale", []))
                for c in candidates:
                    key = keys[c.memory.id]
                    if key in stale or c.evidence is None:
                        continue
                    xs.append(c.evidence.features())
                    ys.append(int(key in gold))
    return xs, ys


def fit(x: np.ndarray, y: np.ndarray, steps: int = 20000, lr: float = 0.5, l2: float = 0.01) -> np.ndarray:
    """Weighted logistic regression (classes balanced), projected so evidence weights stay >= 0."""
    xb = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(xb.shape[1])
    sample = np.where(y == 1, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    mask = np.array([False, *NON_NEGATIVE])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-xb @ w))
        grad = xb.T @ (sample * (p - y)) / len(y) + l2 * np.r_[0, w[1:]]
        w -= lr * grad
        w[mask] = np.maximum(w[mask], 0)
    return w


def objective(detail: dict) -> tuple[float, float]:
    """(the with-keyword targets as ratios, their minimum; hit@3 + negative precision over both modes)."""
    targets = min(detail[True][0] / TARGETS["hit@3"], detail[True][1] / TARGETS["negative precision"],
                  detail[False][1] / TARGETS["negative precision"])
    return round(targets, 4), round(sum(hit3 + negative for hit3, negative, _ in detail.values()), 4)


def smoothed(results: dict[tuple[float, float], tuple[float, float]]) -> tuple[float, float]:
    """The (factor, B0) whose objective, averaged over the grid points within SMOOTH of its B0, is best."""
    def around(factor: float, b0: float) -> tuple[float, float]:
        near = [v for (f, b), v in results.items() if f == factor and abs(b - b0) <= SMOOTH + 1e-9]
        return sum(v[0] for v in near) / len(near), sum(v[1] for v in near) / len(near)
    return max(results, key=lambda point: (*around(*point), -point[1]))  # an exact tie: the stricter B0


def score(data: dict) -> tuple[tuple[float, float], dict]:
    out = {}
    for keywords in (True, False):
        with tempfile.TemporaryDirectory() as tmp:
            rows = summarise(asyncio.run(evaluate(data, bench_settings(Path(tmp)), keywords)))
        out[keywords] = (rows["all non-negative"]["hit@3"], rows["negative"]["negative_precision"],
                         rows["conflict"]["conflict_accuracy"])
    return objective(out), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="eval_a")
    parser.add_argument("--keep", action="store_true", help="keep the coefficients in code; choose the point only")
    parser.add_argument("--factors", help="comma-separated WEAK_WORD_FACTOR values (default FACTORS)")
    parser.add_argument("--b0", help="comma-separated B0 values (default: the fitted intercept moved by CUTS)")
    args = parser.parse_args()
    data = json.loads((DATA / f"{args.set}.json").read_text(encoding="utf-8"))
    logit = math.log(THRESHOLD / (1 - THRESHOLD))
    if args.keep:
        w = np.array([relevance.B0 - logit, *(getattr(relevance, n) for n in NAMES)])
    else:
        xs, ys = [], []
        for keywords in (True, False):
            x, y = asyncio.run(features(data, keywords))
            xs += x
            ys += y
        x, y = np.array(xs), np.array(ys, dtype=float)
        print(f"{len(y)} candidates, {int(y.sum())} relevant", file=sys.stderr)
        w = fit(x, y)
    for name, value in zip(NAMES, w[1:], strict=True):
        setattr(relevance, name, round(float(value), 3))
    factors = [float(v) for v in args.factors.split(",")] if args.factors else list(FACTORS)
    # the fitted model says "relevant" at logit >= cut; the intercept moves so that is relevance >= 0.40
    b0s = [float(v) for v in args.b0.split(",")] if args.b0 else [round(float(w[0] - c + logit), 3) for c in CUTS]
    results = {}
    for factor in factors:
        relevance.WEAK_WORD_FACTOR = factor
        for b0 in b0s:
            relevance.B0 = b0
            results[(factor, b0)], detail = score(data)
            print(f"factor {factor} B0 {b0:+.3f}: {results[(factor, b0)]} {detail}", file=sys.stderr)
    factor, b0 = smoothed(results)
    print(json.dumps({"B0": b0, "WEAK_WORD_FACTOR": factor, **{n: getattr(relevance, n) for n in NAMES}}, indent=1))


if __name__ == "__main__":
    main()
