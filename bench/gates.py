"""Can the encoder's cosine tell a question with an answer from one without, per question? (analysis only)

    python bench/gates.py                  # every read set (bench/quality.py's default list), no keywords

For every question of the read sets (each against its own user's current memories), the cosine of the message's
vector with each memory's, and a plain BM25 ranking (bench/bm25.py). A per-question gate admits the question
when its best score passes a cut; admitted questions get their top 3 by that score. Printed per score: how well
the best score separates answered from unanswered questions (AUC), hit@3 with no gate, and hit@3 at the cut that
keeps at least 85% / 70% of the unanswered questions empty. Scores: the raw cosine; the cosine less the question's (or
the memory's) mean cosine with the calibration sentences (a hubness correction, core/data/calibration.json);
the cosine less the store's mean, its z-score, less the store's 10th best; and gates where BM25's first and the
cosine's first agree. Nothing here is used by pocketmem; docs/ranking.md, section 3, says what it found.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "server"))
sys.path.insert(0, str(HERE))

from bm25 import BM25  # noqa: E402
from quality import DATA, UNREAD  # noqa: E402

from pocketmem.providers.embeddings.universal import shared_model  # noqa: E402

Row = dict[str, Any]


def encode(texts: list[str]) -> np.ndarray:
    v = np.asarray(shared_model().encode(texts), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def rows_of(name: str, generic: np.ndarray) -> list[Row]:
    data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    stale = {m["supersedes"] for m in data["memories"] if m.get("supersedes")}
    mems = [m for m in data["memories"] if m["key"] not in stale]
    vectors = encode([m["content"] for m in mems])
    hub = (vectors @ generic.T).mean(1)
    out = []
    for q, qv in zip(data["queries"], encode([q["query"] for q in data["queries"]]), strict=True):
        user = q.get("user", "eval")
        idx = [i for i, m in enumerate(mems) if m.get("user", "eval") == user]
        keys = [mems[i]["key"] for i in idx]
        bm25 = BM25((mems[i]["key"], mems[i]["content"]) for i in idx).search([q["query"]], 20)
        out.append({"gold": set(q["gold"]), "keys": keys, "cos": vectors[idx] @ qv, "bm25": bm25,
                    "qhub": float((generic @ qv).mean()), "mhub": hub[idx]})
    return out


def report(label: str, rows: list[Row], score: Callable[[Row], np.ndarray],
           agree: Callable[[Row, list[str]], bool] | None = None) -> None:
    answered = np.array([bool(r["gold"]) for r in rows])
    best, hit = [], []
    for r in rows:
        s = score(r)
        order = [r["keys"][i] for i in np.argsort(-s)]
        ok = agree(r, order) if agree else True
        best.append(float(s.max()) if ok else -10.0)  # below any cosine: never admitted
        hit.append(bool(set(order[:3]) & r["gold"]))
    top, hits = np.array(best), np.array(hit)
    pos, neg = top[answered], top[~answered]
    auc = float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())
    gated = [float(((top > np.quantile(neg, q)) & hits)[answered].mean()) for q in (0.85, 0.70)]
    print(f"{label:44s} AUC {auc:.3f}   hit@3 ungated {hits[answered].mean():.3f}   "
          f"at NP 0.85 {gated[0]:.3f}   at NP 0.70 {gated[1]:.3f}")


def main() -> None:
    calibration = json.loads((HERE.parent / "server/pocketmem/core/data/calibration.json").read_text("utf-8"))
    generic = encode([*calibration["unrelated"]["zh"], *calibration["unrelated"]["en"]])
    names = sorted(p.stem for p in DATA.glob("eval_*.json") if p.stem not in UNREAD)
    rows = [row for name in names for row in rows_of(name, generic)]
    print(f"{', '.join(names)}: {sum(bool(r['gold']) for r in rows)} answered, "
          f"{sum(not r['gold'] for r in rows)} unanswered questions, no keywords")
    report("cosine", rows, lambda r: r["cos"])
    report("cosine - question's hubness", rows, lambda r: r["cos"] - r["qhub"])
    report("cosine - memory's hubness", rows, lambda r: r["cos"] - r["mhub"])
    report("cosine - both hubnesses / 2", rows, lambda r: r["cos"] - (r["qhub"] + r["mhub"]) / 2)
    report("cosine - store mean", rows, lambda r: r["cos"] - r["cos"].mean())
    report("z-score in the store", rows, lambda r: (r["cos"] - r["cos"].mean()) / (r["cos"].std() + 1e-9))
    report("cosine - store's 10th best", rows, lambda r: r["cos"] - np.sort(r["cos"])[-min(10, len(r["cos"]))])
    report("cosine, BM25's first is the cosine's first", rows, lambda r: r["cos"],
           lambda r, order: bool(r["bm25"]) and r["bm25"][0] == order[0])
    report("cosine, BM25's first in the cosine's top 2", rows, lambda r: r["cos"],
           lambda r, order: bool(r["bm25"]) and r["bm25"][0] in order[:2])


if __name__ == "__main__":
    main()
