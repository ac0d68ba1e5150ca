"""What cosine similarity means for the embedder in use, so one relevance threshold fits every model.

Cosine similarity has no common scale. For the built-in hash embedder unrelated texts score about
0; for small neural models 0.05–0.3; for some hosted models 0.7 and more; and a model that cannot
read a language (English-only models on Chinese) puts all of that language's texts close together.
So, once per embedder and per language (Chinese, English), pocketmem embeds two fixed reference sets:

    unrelated sentences -> baseline = the 95th percentile of their pairwise similarities
    paraphrase pairs    -> related  = the lower quartile of the similarities of pairs that mean the same
                           in other words (a modest paraphrase, not the easiest)

and rescales every similarity so that the baseline maps to 0 and a typical paraphrase to
PARAPHRASE_SCORE (core/similarity.py). When paraphrases do not stand out from unrelated texts
(related - baseline < similarity.MIN_SPAN: a lexical embedder, or a model that cannot read the language), the
scale falls back to baseline -> 0, identical -> 1, so no meaning is read into noise.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import asdict

from pocketmem.core import wordlists
from pocketmem.core.similarity import NEUTRAL, Scale, dot, fit
from pocketmem.providers.embeddings import Embedder
from pocketmem.store.base import MetaStore

LANGUAGES = ("zh", "en")

# The reference sentences, as data (core/data/calibration.json): per language, unrelated sentences (pairwise on
# different topics, short and long) and paraphrase pairs (same meaning, mostly different words).
_SENTENCES = wordlists.document("calibration.json")
UNRELATED: dict[str, list[str]] = _SENTENCES["unrelated"]
PARAPHRASES: dict[str, list[list[str]]] = _SENTENCES["paraphrases"]


async def measure(embedder: Embedder) -> dict[str, Scale]:
    scales: dict[str, Scale] = {}
    for lang in LANGUAGES:
        unrelated = await embedder.embed_many(list(UNRELATED[lang]))
        flat = [text for pair in PARAPHRASES[lang] for text in pair]
        vectors = await embedder.embed_many(flat)
        scales[lang] = fit(
            [dot(u, v) for u, v in itertools.combinations(unrelated, 2)],
            [dot(vectors[i], vectors[i + 1]) for i in range(0, len(vectors), 2)],
        )
    return scales


class Calibration:
    """The store's cached scales for its embedder (measured once, kept in store_meta)."""

    def __init__(self, store: MetaStore, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._scales: dict[str, Scale] | None = None

    @property
    def key(self) -> str:
        return f"calibration:{self.embedder.tag}"

    async def scales(self) -> dict[str, Scale]:
        if self._scales is None:
            cached = await self.store.get_meta(self.key)
            if cached is not None:
                self._scales = {lang: Scale(**value) for lang, value in json.loads(cached).items()}
            else:
                self._scales = await measure(self.embedder)
                await self.store.set_meta(self.key, json.dumps({k: asdict(v) for k, v in self._scales.items()}))
        return self._scales

    async def scale(self, lang: str) -> Scale:
        return (await self.scales()).get(lang, NEUTRAL)

    def known(self, lang: str) -> Scale | None:
        """The scale if already measured; never touches the store (safe inside a write transaction)."""
        return self._scales.get(lang) if self._scales is not None else None

    def reset(self) -> None:
        self._scales = None
