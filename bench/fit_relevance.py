"""Fit the relevance model (core/relevance.py) on ONE evaluation set and print its coefficients.

    python bench/fit_relevance.py                 # fits on eval_a; never on eval_b, eval_c or the small stores
    python bench/fit_relevance.py --set eval_a --write-free   # just print; coefficients are pasted into code

1. Every query of the set is run with and without its agent keywords against a store of the set's memories,
   with the relevance threshold at 0, so every shortlisted memory comes back with its evidence.
2. Gold memories are positives, every other candidate a negative (a changed fact's stale version is left
   out: it is on topic, ranking decides against it). A logistic regression with non-negative weights on
   the evidence (numpy, plain gradient descent, L2 0.01) gives the coefficients.
3. The intercept is then moved so that the product's 0.40 threshold sits at the lowest cut (the most
   recall) whose negative precision, with and without keywords, reaches the 0.85 target on the same set,
   measured by the full benchmark (bench/quality.py's evaluate).
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
from pocketmem.core.text import guess_language  # noqa: E402
from pocketmem.service.calibration import NEUTRAL  # noqa: E402
from pocketmem.service.retrieval import RecallRequest  # noqa: E402

NAMES = ("B_STRONGEST", "B_MATCHED", "B_COVERAGE", "B_SEMANTIC", "B_LENGTH")
NON_NEGATIVE = (True, True, True, True, False)
THRESHOLD = 0.40
NEGATIVE_TARGET = 0.85


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


def score(data: dict) -> tuple[float, dict]:
    out = {}
    for keywords in (True, False):
        with tempfile.TemporaryDirectory() as tmp:
            rows = summarise(asyncio.run(evaluate(data, bench_settings(Path(tmp)), keywords)))
        out[keywords] = (rows["all non-negative"]["hit@3"], rows["negative"]["negative_precision"],
                         rows["conflict"]["conflict_accuracy"])
    return sum(v[0] + v[1] for v in out.values()), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="eval_a")
    args = parser.parse_args()
    data = json.loads((DATA / f"{args.set}.json").read_text(encoding="utf-8"))
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
    logit = math.log(THRESHOLD / (1 - THRESHOLD))
    best = None
    for cut in np.arange(-0.5, 2.01, 0.25):
        # the fitted model says "relevant" at logit >= cut; move the intercept so that is relevance >= 0.40
        relevance.B0 = round(float(w[0] - cut + logit), 3)
        total, detail = score(data)
        print(f"cut {cut:+.2f} B0 {relevance.B0:+.3f}: {total:.3f} {detail}", file=sys.stderr)
        # The most recall within the precision target: the lowest cut whose negative precision reaches
        # NEGATIVE_TARGET with and without keywords.
        if min(detail[True][1], detail[False][1]) >= NEGATIVE_TARGET:
            best = (total, relevance.B0)
            break  # higher cuts only trade recall away
    assert best is not None
    print(json.dumps({"B0": best[1], **{n: getattr(relevance, n) for n in NAMES}}, indent=1))


if __name__ == "__main__":
    main()
