"""What a cosine similarity means on the embedder's calibrated scale. Pure: numbers in, numbers out.

`fit` turns two lists of measured similarities (unrelated texts, paraphrase pairs) into a `Scale`;
service/shared/calibration.py measures them with the embedder in use and caches the result in the store.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

BASELINE_PERCENTILE = 0.95
PARAPHRASE_SCORE = 0.7
MIN_SPAN = 0.25


@dataclass(frozen=True)
class Scale:
    """Maps a cosine similarity onto 0..1: `baseline` -> 0, `top` -> 1 (see service/shared/calibration.py)."""

    baseline: float
    top: float = 1.0

    def score(self, cosine: float) -> float:
        return min(1.0, max(0.0, (cosine - self.baseline) / (self.top - self.baseline)))

    def cosine_for(self, score: float) -> float:
        """The cosine whose score is `score`."""
        return self.baseline + score * (self.top - self.baseline)


NEUTRAL = Scale(baseline=0.0)


def dot(u: Sequence[float], v: Sequence[float]) -> float:
    return sum(a * b for a, b in zip(u, v, strict=True))


def fit(unrelated: Sequence[float], paraphrases: Sequence[float]) -> Scale:
    """The scale from the pairwise similarities of unrelated texts and of paraphrase pairs.

    baseline = the BASELINE_PERCENTILE of the unrelated similarities; related = the lower quartile of the
    paraphrase similarities. When related - baseline < MIN_SPAN (no meaning stands out from noise), the scale
    is baseline -> 0, identical -> 1.
    """
    sims = sorted(unrelated)
    baseline = max(0.0, min(0.95, sims[min(len(sims) - 1, int(BASELINE_PERCENTILE * len(sims)))]))
    related = statistics.quantiles(paraphrases, n=4)[0]
    if related - baseline >= MIN_SPAN:
        top = baseline + (related - baseline) / PARAPHRASE_SCORE
        return Scale(baseline=baseline, top=min(1.0, top))
    return Scale(baseline=baseline)
