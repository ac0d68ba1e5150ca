"""Recall when a part is down (docs/recall-safety.md §1, "Degradation"): which path answers, and how high its bar is.

    embedder (or vector index) down -> keyword path: the keyword index alone decides, with a bar that one
                                       distinctive shared word reaches (香菜能吃吗 finds 用户不喜欢香菜…)
    keyword index down              -> vector path: nearest vectors (also for the built-in embedder, whose
                                       normal recall reads the keyword index instead)
    both down, or a fallback path   -> the user card: who the user is and the core memories
    finding nothing

Every failure is logged as a `retrieval_fail` event, and the recall result's `degraded` names the path
that answered and what failed. Recall never errors because an index or an endpoint is sick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pocketmem.base.models import Status
from pocketmem.store.roles import StoreReader

# The full relevance is a noisy-or of semantic and keyword evidence. With one of them missing, the other
# must decide alone; these bars are what one piece of evidence reaches by itself:
#   keyword path: a single query term found in one memory only scores 1 / (1 + KEYWORD_SATURATION) = 0.33
#   vector path:  on the built-in (lexical) embedder a short message sharing one word with a memory scores
#                 about 0.15 on the calibrated scale (unrelated texts score 0)
# Both bars were set as 0.2 and 0.1 when relevance.B0 was -2.214; they are kept at the same logit when the
# operating point moved to B0 = -2.475 (a 0.261 shift: 0.2 -> 0.161, 0.1 -> 0.079), so each path decides
# exactly as it did (docs/ranking.md, *The operating point*).
KEYWORD_PATH_THRESHOLD = 0.161
LEXICAL_VECTOR_PATH_THRESHOLD = 0.079
VECTOR_PATH_NEIGHBOURS = 64

KEYWORD_PATH = "keyword path"
VECTOR_PATH = "vector path"
CARD_ONLY = "user card only"


@dataclass(frozen=True)
class Health:
    """What recall could use this time."""

    vectors: bool  # a query vector and the vector index
    keywords: bool  # the keyword index
    semantic: bool = True  # similarities for the shortlist (a query vector, and scoring worked)

    @classmethod
    def of(cls, failures: Sequence[str], has_vector: bool) -> Health:
        keyword_failed = any(f.startswith("keyword index") for f in failures)
        vector_failed = not has_vector or any(f.startswith("vector") for f in failures)
        scoring_failed = not has_vector or any(f.startswith("vector scoring") for f in failures)
        return cls(vectors=not vector_failed, keywords=not keyword_failed, semantic=not scoring_failed)

    @property
    def path(self) -> str | None:
        if self.vectors and self.keywords:
            return None
        if self.keywords:
            return KEYWORD_PATH
        if self.vectors:
            return VECTOR_PATH
        return CARD_ONLY


def threshold(configured: float, semantic_ok: bool, keywords_ok: bool, lexical: bool) -> float:
    """The relevance bar for this recall: the configured one when both kinds of evidence are available (a
    nearest-neighbour search that failed loses candidates, not the similarity of those found by keyword)."""
    if semantic_ok and keywords_ok:
        return configured
    if keywords_ok:
        return min(configured, KEYWORD_PATH_THRESHOLD)
    if lexical:
        return min(configured, LEXICAL_VECTOR_PATH_THRESHOLD)
    return configured


def describe(path: str, failures: Sequence[str]) -> str:
    """The recall result's `degraded`: the path that answered, then what failed."""
    return f"{path} — " + "; ".join(failures)


async def vector_path(
    reader: StoreReader, user_id: str, vector: Sequence[float], statuses: tuple[Status, ...], failures: list[str]
) -> dict[str, float]:
    """Nearest memories by vector, for when the keyword index failed (the built-in embedder's recall otherwise
    skips the vector index: its similarity is shared wording, which the keyword index enumerates)."""
    try:
        return dict(await reader.vector_neighbours(user_id, vector, VECTOR_PATH_NEIGHBOURS, statuses))
    except Exception as exc:  # noqa: BLE001 - a sick index degrades recall, never fails it
        failures.append(f"vector index: {exc}")
        return {}
