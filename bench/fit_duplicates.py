"""Fit the same-fact threshold of the default embedder (`use`) for add_memory's near-duplicate rule.

    python bench/fit_duplicates.py

Per language, on `bench/data/distinct_facts.jsonl` (320 distinct facts, which must all be stored): the highest
cosine similarity of two distinct facts of that language that agree on numbers, negations and entities (the only
pairs the similarity rule is ever asked about, core/sameness.facts_agree), plus MARGIN. The threshold is the
lowest that keeps every distinct fact apart with that margin; `bench/data/rewordings.jsonl` (committed before
this fit) then says how many rewordings it catches. The printed thresholds are service/shared/sameness.py's FITTED.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATA

from pocketmem.core.sameness import facts_agree
from pocketmem.providers.embeddings.universal import MODEL, shared_model

MARGIN = 0.02


def main() -> None:
    rows = [json.loads(line) for line in (DATA / "distinct_facts.jsonl").read_text(encoding="utf-8").splitlines()]
    rewordings = [json.loads(line) for line in (DATA / "rewordings.jsonl").read_text(encoding="utf-8").splitlines()]
    model = shared_model()
    fitted: dict[str, float] = {}
    for lang in ("zh", "en"):
        texts = [r["text"] for r in rows if r["kind"] == "distinct" and r["lang"] == lang]
        sims = model.encode(texts) @ model.encode(texts).T
        closest, pair = max(
            (float(sims[i, j]), (texts[i], texts[j]))
            for i, j in itertools.permutations(range(len(texts)), 2)
            if facts_agree(texts[i], texts[j])
        )
        fitted[lang] = round(closest + MARGIN, 3)
        ours = [r for r in rewordings if r["lang"] == lang]
        caught = [
            r for r in ours
            if facts_agree(r["reworded"], r["stored"])
            and float(model.encode([r["stored"]])[0] @ model.encode([r["reworded"]])[0]) >= fitted[lang]
        ]
        print(f"{lang}: closest distinct facts {closest:.3f} ({pair[0]} / {pair[1]}) -> threshold {fitted[lang]}; "
              f"rewordings above it {len(caught)}/{len(ours)}")
    print(json.dumps({f"use:{MODEL}": fitted}))


if __name__ == "__main__":
    main()
