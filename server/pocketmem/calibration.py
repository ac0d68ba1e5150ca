"""How similar unrelated texts look to a given embedder, so one relevance threshold fits every model.

Cosine similarity has no common scale: for the built-in hash embedder unrelated texts score
about 0, for small neural models 0.1–0.3, for some hosted models 0.7 and more. We embed a fixed
set of mutually unrelated sentences once per embedder, take a high percentile of their pairwise
similarities as the "unrelated" baseline, and rescale every similarity so that the baseline
maps to 0 and identical texts to 1 (ranking.semantic_score).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from .embeddings import Embedder
from .store import Store

BASELINE_PERCENTILE = 0.95

# Pairwise unrelated on purpose: different topics, both languages, short and long.
UNRELATED_SENTENCES = (
    "用户不喜欢香菜，吃到会很反感。",
    "明天上午十点要去银行办信用卡。",
    "The Docker build needs the corporate proxy to reach the registry.",
    "她家的猫叫小白，今年三岁了。",
    "I am planning a hiking trip to the Alps next summer.",
    "季度报告周五前要交给王经理。",
    "Prefers TypeScript strict mode and functional composition over inheritance.",
    "最近胃炎，医生让暂时不要吃辣。",
    "Our wedding anniversary is on the fourteenth of March.",
    "周末喜欢去公园跑步，一般跑五公里。",
    "The PostgreSQL migration failed because of a missing index on orders.",
    "上次聊到想换工作，去一家做游戏的公司。",
    "My daughter starts kindergarten in September.",
    "家里的洗衣机坏了，需要找人来修。",
    "Learning to play the piano, practicing scales every evening.",
    "对花生过敏，吃了会起疹子。",
    "The quarterly budget meeting was moved to Thursday afternoon.",
    "喜欢看科幻小说，最近在读三体。",
    "Allergic to cats, so visits to friends with pets are hard.",
    "下个月要搬家到浦东，离公司近一些。",
)


async def unrelated_baseline(embedder: Embedder, sentences: Sequence[str] = UNRELATED_SENTENCES) -> float:
    vectors = await embedder.embed_many(list(sentences))
    sims = sorted(sum(a * b for a, b in zip(u, v, strict=True)) for u, v in itertools.combinations(vectors, 2))
    index = min(len(sims) - 1, int(BASELINE_PERCENTILE * len(sims)))
    return max(0.0, min(0.95, sims[index]))


class Calibration:
    """The store's cached baseline for its embedder (computed once, kept in store_meta)."""

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._baseline: float | None = None

    async def baseline(self) -> float:
        if self._baseline is None:
            key = f"calibration:{self.embedder.tag}"
            cached = await self.store.get_meta(key)
            if cached is not None:
                self._baseline = float(cached)
            else:
                self._baseline = await unrelated_baseline(self.embedder)
                await self.store.set_meta(key, repr(self._baseline))
        return self._baseline

    @property
    def known(self) -> float | None:
        """The baseline if already computed; never touches the store (safe inside a write transaction)."""
        return self._baseline

    def reset(self) -> None:
        self._baseline = None
