"""The built-in offline embedder: signed feature hashing of Chinese characters, character pairs and words.

It downloads nothing and is deterministic across machines and Python versions (BLAKE2b, not
`hash()`). A text becomes a bag of features, each hashed to BUCKETS of `dimensions` buckets with a
sign each (spreading a feature over two buckets halves the damage of any one collision),
weighted and L2-normalised:

    Han run "不喜欢香菜"   -> characters (weight 0.5) and neighbouring pairs (weight 1.0)
    Latin word "docker"    -> the word (1.0) and, for words of 4+ letters, its character trigrams (0.25 each)
    stop words (的, 用户, the, …) weigh 0.1

Cosine similarity is then a weighted overlap of shared characters, pairs and words: it finds
paraphrases that reuse words (香菜 / 芫荽 do not meet — that is what agent-written keywords are for)
and puts unrelated texts near 0, which keeps the relevance threshold meaningful.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence

from pocketmem.core.text import EN_STOP_TERMS, ZH_STOP_TERMS, runs, stem_word
from pocketmem.providers.embeddings.base import Embedder

VERSION = "v2"  # v2: English words folded by the Snowball stemmer the keyword index uses
DEFAULT_DIMENSIONS = 512
BUCKETS = 2
CJK_CHAR_WEIGHT = 0.5
CJK_PAIR_WEIGHT = 1.0
WORD_WEIGHT = 1.0
TRIGRAM_WEIGHT = 0.25
STOP_WEIGHT = 0.1


def features(text: str) -> dict[str, float]:
    weights: dict[str, float] = {}

    def add(feature: str, weight: float) -> None:
        weights[feature] = weights.get(feature, 0.0) + weight

    for run, cjk in runs(text):
        if cjk:
            for ch in run:
                add("c:" + ch, STOP_WEIGHT if ch in ZH_STOP_TERMS else CJK_CHAR_WEIGHT)
            for i in range(len(run) - 1):
                pair = run[i : i + 2]
                add("p:" + pair, STOP_WEIGHT if pair in ZH_STOP_TERMS else CJK_PAIR_WEIGHT)
        else:
            word = stem_word(run)
            if run in EN_STOP_TERMS or word in EN_STOP_TERMS:
                add("w:" + word, STOP_WEIGHT)
                continue
            add("w:" + word, WORD_WEIGHT)
            if len(word) >= 4 and not word.isdigit():
                padded = f"#{word}#"
                for i in range(len(padded) - 2):
                    add("t:" + padded[i : i + 3], TRIGRAM_WEIGHT)
    return weights


@functools.lru_cache(maxsize=1 << 17)
def _slots(feature: str, dimensions: int) -> tuple[tuple[int, float], ...]:
    """Where a feature lands: BUCKETS (bucket, ±share) pairs. Cached: the same characters, pairs and words
    recur in every text, and hashing them is most of an embedding's cost."""
    share = BUCKETS**-0.5
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=4 * BUCKETS).digest()
    slots = []
    for i in range(BUCKETS):
        word = int.from_bytes(digest[4 * i : 4 * i + 4], "little")
        slots.append((word % dimensions, share if word >> 31 else -share))
    return tuple(slots)


class HashEmbedder(Embedder):
    kind = "hash"
    batch_size = 1024
    lexical = True

    def __init__(self, dimensions: int = DEFAULT_DIMENSIONS) -> None:
        self._dimensions = dimensions

    @property
    def model(self) -> str:
        return f"{VERSION}-{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def vector(self, text: str) -> list[float]:
        vector = [0.0] * self._dimensions
        for feature, weight in features(text).items():
            for index, signed_share in _slots(feature, self._dimensions):
                vector[index] += signed_share * weight
        return vector

    async def _embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vector(text) for text in texts]
