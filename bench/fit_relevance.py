"""Fit the relevance decision (core/relevance.py) on the fit sets and choose its operating point by cost.

    python bench/fit_relevance.py --embedder use            # fit relevance.NEURAL on FIT_SETS, choose by cost
    python bench/fit_relevance.py --embedder use --keep     # keep the words' weights in code; choose the point
    python bench/fit_relevance.py --embedder use --verify   # the chosen point, then the full benchmark per set

The fit set is eval_a to eval_f pooled (FIT_SETS; `--set` narrows it): each was held out when it was written
and has been read since; eval_g has been read too (it judged main once, docs/benchmarks.md). eval_h is held out
for the next fit and is never read here.

1. Every query of each set is run with and without its agent keywords against a store of the set's memories,
   through the real recall stages (candidates, current versions, order) with the bar at 0, so every
   shortlisted memory comes with its evidence, its core flag and its place in the order.
   Each set has its own store.
2. Gold memories are positives, every other candidate a negative (a changed fact's stale version is left
   out: it is on topic, the order decides against it). A class-balanced logistic regression with
   non-negative weights on the evidence (numpy, gradient descent, L2 0.01) gives the coefficients.
3. The operating point is chosen on the same pooled questions by the cost of what recall injects, replayed over the
   recorded candidates (each question's answer is its admitted candidates in their order, top 5):

       cost = MISS x (questions with an answer whose gold is not in the top 3)
            + CORE_MISS x (the same, for questions whose answer is a core memory: name, birthday, allergy)
            + LINE x (lines in the top 3 that are neither gold nor the stale version of a changed fact)

   summed over both modes (with and without keywords), among the points whose negative precision (no line
   for a question with no answer) holds in both modes: messages unrelated to everything still get nothing.
   It holds when the one-sided CONFIDENCE (90%) Clopper-Pearson lower bound of the pooled negative precision
   is at least NEGATIVE_PRECISION, not the share itself (eval_a alone has only 28 questions with no answer,
   and 24 of 28 bounds the true rate only above 0.73; the six sets pooled have 205). The cheapest point wins;
   a tie goes to the stricter point. What is chosen: for `hash` (relevance.LEXICAL), B0 and the core
   memories' own bar (`core_lift`); for an embedder that captures meaning (relevance.NEURAL), the words
   part's B0, the meaning part's intercept and slope over the calibrated similarity, and `core_lift`, on the
   grid NEURAL_GRID. The replay leaves out the two steps after the order (shadowing, the current fact),
   so `--verify` runs the full benchmark at the chosen point.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import pickle
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))
sys.path.insert(0, str(ROOT / "bench"))

from quality import DATA, NOW, USER, bench_settings, evaluate, load, summarise  # noqa: E402

from pocketmem.app import PocketMem  # noqa: E402
from pocketmem.base.clock import FixedClock  # noqa: E402
from pocketmem.base.models import Status  # noqa: E402
from pocketmem.core import relevance  # noqa: E402
from pocketmem.core.ranking import TIMED_CATEGORIES, rank  # noqa: E402
from pocketmem.service.recall import fallback, versions  # noqa: E402
from pocketmem.service.recall.candidates import gather_candidates  # noqa: E402
from pocketmem.service.recall.retrieval import RecallRequest  # noqa: E402

NAMES = ("strongest", "matched", "coverage", "semantic", "length")
NON_NEGATIVE = (True, True, True, True, False)
THRESHOLD = 0.40  # Settings.relevance_threshold
MISS, CORE_MISS, LINE = 1.0, 5.0, 0.1  # the cost of a miss, of a missed core memory, of an unrelated line
NEGATIVE_PRECISION = 0.85  # the floor for the lower bound below, in each mode
CONFIDENCE = 0.90  # one-sided
CUTS = np.round(np.arange(-1.0, 1.5, 0.025), 3)  # logit cuts around the fitted 0.40 point
CORE_LIFTS = (0.0, 0.5, 1.0, 1.5, 2.0)
FIT_SETS = ("eval_a", "eval_b", "eval_c", "eval_d", "eval_e", "eval_f")  # eval_g read once since; eval_h held out
NEURAL_GRID = {  # the words part's B0 around the base's (rounded to 0.25); the meaning part's slope and intercept
    "b0_offset": np.arange(-2.5, 0.76, 0.25),
    "meaning_slope": (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 14.0),
    "meaning_b0": np.round(np.arange(-6.0, -0.9, 0.25), 3),
}
K, SHOWN = 5, 3


@dataclass
class Line:
    """One candidate of one question, as recall orders it with the bar at 0."""

    key: str
    features: tuple[float, ...]
    complete: bool
    core: bool
    dated: bool  # an episode or event dated inside the window the question names: admitted by its date


@dataclass
class Question:
    gold: set[str]
    stale: set[str]
    core: bool  # its answer is a core memory
    lines: list[Line]


async def collect(data: dict[str, Any], keywords: bool, embedder: str) -> list[Question]:
    questions: list[Question] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = bench_settings(Path(tmp), embedder, relevance_threshold=0.0)
        async with PocketMem(settings, clock=FixedClock(NOW)) as app:
            ids = await load(app, data, keywords)
            keys = {v: k for k, v in ids.items()}
            core = {m["key"] for m in data["memories"] if m.get("persistence", 0.0) >= 1.0}
            r = app.retrieval
            for q in data["queries"]:
                user = q.get("user", USER)
                parsed = r.parse(
                    RecallRequest(
                        query=q["query"],
                        context=q.get("context", []),
                        keywords=q.get("keywords", []) if keywords else [],
                    )
                )
                health = fallback.Health()
                encoding = r.vectors(parsed, await r.scale(parsed, health), health)
                async with app.store.read() as reader:
                    found = await gather_candidates(
                        reader, user, parsed, encoding, versions.SEARCHED, health, r.rules, NOW
                    )
                    found = await versions.bring_current(reader, user, found, (Status.active,))
                ranked = rank(found, parsed.terms, weights=r.weights, now=NOW, temporal=parsed.time.intent)
                by_id = {c.memory.id: c for c in found}
                lines = []
                for hit in ranked:
                    c = by_id[hit.memory.id]
                    lines.append(
                        Line(
                            keys[c.memory.id],
                            c.evidence.features(),
                            c.evidence.complete,
                            c.memory.core,
                            c.in_window and c.memory.category in TIMED_CATEGORIES,
                        )
                    )
                gold = set(q["gold"])
                questions.append(Question(gold, set(q.get("stale", [])), bool(gold & core), lines))
    return questions


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


def lower_bound(successes: int, n: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided Clopper-Pearson (exact binomial) lower bound of a proportion: the p at which `successes`
    or more of `n` have probability 1 - confidence (the beta quantile Beta(1 - confidence; x, n - x + 1)),
    found by bisection over the binomial tail, which grows with p."""
    if successes <= 0:
        return 0.0
    alpha = 1.0 - confidence

    def tail(p: float) -> float:
        return sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(successes, n + 1))

    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if tail(mid) < alpha else (low, mid)
    return low


def negatives_hold(counts: dict[str, float]) -> bool:
    return lower_bound(int(counts["empty"]), int(counts["negatives"])) >= NEGATIVE_PRECISION


@dataclass
class Table:
    """One mode's recorded lines as arrays, in question order, so that a point is replayed in a few array
    operations (the grid has thousands of points and the pooled sets tens of thousands of lines)."""

    x: np.ndarray  # (lines, features)
    full: np.ndarray  # the full-match rule applies (complete, matched >= FULL_MATCH_RARITY)
    core: np.ndarray
    dated: np.ndarray
    question: np.ndarray  # each line's question
    first: np.ndarray  # each question's first line (its line count where it has none)
    gold: np.ndarray
    other: np.ndarray  # neither gold nor the stale version of a changed fact
    answered: np.ndarray  # per question: it has an answer
    core_question: np.ndarray  # per question: its answer is a core memory

    @classmethod
    def of(cls, questions: list[Question]) -> Table:
        lines = [(i, q, line) for i, q in enumerate(questions) for line in q.lines]
        x = np.array([line.features for _, _, line in lines], dtype=float).reshape(len(lines), len(NAMES))
        question = np.array([i for i, _, _ in lines], dtype=int)
        return cls(
            x=x,
            full=np.array([line.complete for _, _, line in lines], dtype=bool)
            & (x[:, NAMES.index("matched")] >= relevance.FULL_MATCH_RARITY),
            core=np.array([line.core for _, _, line in lines], dtype=bool),
            dated=np.array([line.dated for _, _, line in lines], dtype=bool),
            question=question,
            first=np.searchsorted(question, np.arange(len(questions))),
            gold=np.array([line.key in q.gold for _, q, line in lines], dtype=bool),
            other=np.array([line.key not in q.gold and line.key not in q.stale for _, q, line in lines], dtype=bool),
            answered=np.array([bool(q.gold) for q in questions]),
            core_question=np.array([q.core for q in questions]),
        )

    def probability(self, model: relevance.Model) -> np.ndarray:
        """relevance.Model.probability for every line at once."""
        w = np.array([getattr(model, name) for name in NAMES])
        p = 1 / (1 + np.exp(-np.clip(model.b0 + self.x @ w, -60, 60)))
        p = np.where(self.full, np.maximum(p, relevance.FULL_MATCH_RELEVANCE), p)
        if model.meaning_slope > 0.0:
            semantic = self.x[:, NAMES.index("semantic")]
            meaning = 1 / (1 + np.exp(-np.clip(model.meaning_b0 + model.meaning_slope * semantic, -60, 60)))
            p = 1 - (1 - p) * (1 - meaning)
        return p


def replay(table: Table, model: relevance.Model, threshold: float = THRESHOLD) -> dict[str, float]:
    """Each question's answer under `model` at `threshold` (a core memory at its own bar): its admitted lines
    in their order, top K, of which the top SHOWN are shown. Returns hit@3, negative precision and the cost's
    three counts."""
    health = fallback.Health()
    bar = np.where(
        table.core,
        fallback.threshold(threshold, health, False, model.core_lift),
        fallback.threshold(threshold, health, False),
    )
    admitted = table.dated | (table.probability(model) >= bar)
    seen = np.cumsum(admitted)
    before = np.r_[0, seen][table.first]  # admitted lines of the questions before each question
    shown = admitted & (seen - before[table.question] <= SHOWN)
    n = len(table.answered)
    any_admitted = np.bincount(table.question, weights=admitted, minlength=n) > 0
    hit = np.bincount(table.question, weights=shown & table.gold, minlength=n) > 0
    missed = table.answered & ~hit
    return {
        "answered": int(table.answered.sum()),
        "hit3": int((table.answered & hit).sum()),
        "negatives": int((~table.answered).sum()),
        "empty": int((~table.answered & ~any_admitted).sum()),
        "misses": int((missed & ~table.core_question).sum()),
        "core_misses": int((missed & table.core_question).sum()),
        "lines": int((shown & table.other).sum()),
    }


def cost(counts: dict[str, float]) -> float:
    return MISS * counts["misses"] + CORE_MISS * counts["core_misses"] + LINE * counts["lines"]


def choose(modes: dict[bool, Table], points: list[relevance.Model]) -> tuple[relevance.Model, dict]:
    """The cheapest point whose negative precision holds in both modes (negatives_hold); a tie: the stricter
    (earlier) point."""
    best: float | None = None
    chosen, detail = points[0], {}
    for model in points:
        counts = {kw: replay(table, model) for kw, table in modes.items()}
        if not all(negatives_hold(c) for c in counts.values()):
            continue
        total = sum(cost(c) for c in counts.values())
        if best is None or total < best - 1e-9:
            best, chosen, detail = total, model, counts
            print(
                f"{model}: cost {total:.1f} "
                + " | ".join(
                    f"{'kw' if kw else 'no kw'} hit@3 {c['hit3'] / c['answered']:.3f} "
                    f"neg {c['empty'] / c['negatives']:.3f} "
                    f"(bound {lower_bound(int(c['empty']), int(c['negatives'])):.3f}) "
                    f"misses {c['misses']}+{c['core_misses']} "
                    f"lines {c['lines']}"
                    for kw, c in counts.items()
                ),
                file=sys.stderr,
            )
    return chosen, detail


def grid(base: relevance.Model, lexical: bool) -> list[relevance.Model]:
    """The points to weigh, strictest first."""
    if lexical:  # the fitted model says "relevant" at logit >= cut; B0 moves so that is relevance >= 0.40
        b0s = sorted({round(base.b0 - float(c), 3) for c in CUTS})
        return [replace(base, b0=b0, core_lift=lift) for lift in CORE_LIFTS for b0 in b0s]
    b0s = sorted({round(float(b) * 4) / 4 for b in base.b0 + NEURAL_GRID["b0_offset"]})
    return [
        replace(base, b0=b0, meaning_slope=slope, meaning_b0=float(mb0), core_lift=lift)
        for lift in CORE_LIFTS
        for b0 in b0s
        for slope in NEURAL_GRID["meaning_slope"]
        for mb0 in NEURAL_GRID["meaning_b0"]
    ]


def recorded(name: str, keywords: bool, embedder: str, cache: Path | None) -> list[Question]:
    """One set's questions in one mode, from `cache` (a directory) when it holds them."""
    path = cache / f"{name}-{embedder}-{'kw' if keywords else 'nokw'}.pickle" if cache else None
    if path and path.exists():
        return pickle.loads(path.read_bytes())
    data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    questions = asyncio.run(collect(data, keywords, embedder))
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(questions))
    return questions


def refit(modes: dict[bool, list[Question]]) -> relevance.Model:
    """The words part's weights by class-balanced logistic regression over every recorded candidate; B0 moves
    so that the fitted model's even odds sit at THRESHOLD."""
    rows = [
        (line.features, int(line.key in q.gold))
        for qs in modes.values()
        for q in qs
        for line in q.lines
        if line.key not in q.stale
    ]
    x, y = np.array([f for f, _ in rows]), np.array([label for _, label in rows], dtype=float)
    print(f"{len(y)} candidates, {int(y.sum())} relevant", file=sys.stderr)
    w = fit(x, y)
    logit = math.log(THRESHOLD / (1 - THRESHOLD))
    return relevance.Model(round(float(w[0]) + logit, 3), *(round(float(v), 3) for v in w[1:]))


def verify(sets: list[str], name: str, chosen: relevance.Model, embedder: str) -> None:
    """The full benchmark on each fit set at the chosen point."""
    setattr(relevance, name, chosen)
    for set_name in sets:
        data = json.loads((DATA / f"{set_name}.json").read_text(encoding="utf-8"))
        for keywords in (True, False):
            with tempfile.TemporaryDirectory() as tmp:
                rows = summarise(asyncio.run(evaluate(data, bench_settings(Path(tmp), embedder), keywords)))
            print(
                f"{set_name} {'keywords' if keywords else 'no keywords'}: "
                f"hit@3 {rows['all non-negative']['hit@3']:.3f} "
                f"negative precision {rows['negative']['negative_precision']:.3f} "
                f"conflict {rows['conflict']['conflict_accuracy']:.3f}",
                file=sys.stderr,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", action="append", choices=FIT_SETS, help="a fit set (repeat; default: all)")
    parser.add_argument("--embedder", default="use", help="use (fits relevance.NEURAL) or hash (relevance.LEXICAL)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the words part's weights in code (LEXICAL's); choose the point only"
    )
    parser.add_argument("--verify", action="store_true", help="then run the full benchmark at the chosen point")
    parser.add_argument("--cache", type=Path, help="keep the recorded candidates in this directory and reuse them")
    parser.add_argument("--thresholds", help="bars, comma-separated: the decision in code replayed at each "
                        "(POCKETMEM_RELEVANCE_THRESHOLD), hit@3 / negative precision with and without keywords; no fit")
    args = parser.parse_args()
    sets = args.set or list(FIT_SETS)
    lexical = args.embedder == "hash"
    name = "LEXICAL" if lexical else "NEURAL"
    modes = {kw: [q for s in sets for q in recorded(s, kw, args.embedder, args.cache)] for kw in (True, False)}
    if args.thresholds:
        tables = {kw: Table.of(qs) for kw, qs in modes.items()}
        for threshold in (float(t) for t in args.thresholds.split(",")):
            counts = [replay(tables[kw], getattr(relevance, name), threshold) for kw in (True, False)]
            print(f"| {threshold:.2f} | "
                  + " | ".join(f"{c['hit3'] / c['answered']:.3f} / {c['empty'] / c['negatives']:.3f}" for c in counts)
                  + " |")
        return
    base = relevance.LEXICAL if args.keep else refit(modes)  # the words part: LEXICAL's weights, or refitted
    chosen, detail = choose({kw: Table.of(qs) for kw, qs in modes.items()}, grid(base, lexical))
    result = {"model": name, "sets": sets, **{k: round(v, 3) for k, v in chosen.__dict__.items()}, "counts": detail}
    print(json.dumps(result, indent=1))
    if args.verify:
        verify(sets, name, chosen, args.embedder)


if __name__ == "__main__":
    main()
