"""Recall when a part is down (docs/recall-safety.md §1, "Degradation"): which path answers, and how high its bar is.

    embedder (or vector index) down -> keyword path: the keyword index alone decides, with a bar that one
                                       distinctive shared word reaches (香菜能吃吗 finds 用户不喜欢香菜…)
    keyword index down              -> vector path: nearest vectors (also for the built-in embedder, whose
                                       normal recall reads the keyword index instead)
    both down, or a fallback path   -> the user card: who the user is and the core memories
    finding nothing

Each failure is an exception of its own class (`Failure` and its subclasses), recorded once in the call's
`Health` where it happens; which path answers follows from the classes recorded, never from a message's
text. Every failure is logged as a `retrieval_fail` event, and the recall result's `degraded` names the path
that answered and what failed. Recall never errors because an index or an endpoint is sick.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from pocketmem.base.models import Status
from pocketmem.store.roles import StoreReader

# With one kind of evidence missing, the other must decide alone; these bars are what one piece of evidence
# reaches by itself (the lexical decision, core/relevance.LEXICAL):
#   keyword path: a single distinctive query term found in one memory
#   vector path:  on the built-in (lexical) embedder a short message sharing one word with a memory scores
#                 about 0.15 on the calibrated scale (unrelated texts score 0)
# Both bars were set as 0.2 and 0.1 when the lexical B0 was -2.214; they are kept at the same logit since
# the operating point moved to B0 = -2.475 (0.2 -> 0.161, 0.1 -> 0.079), so each path decides as it did.
KEYWORD_PATH_THRESHOLD = 0.161
LEXICAL_VECTOR_PATH_THRESHOLD = 0.079
VECTOR_PATH_NEIGHBOURS = 64

KEYWORD_PATH = "keyword path"
VECTOR_PATH = "vector path"
CARD_ONLY = "user card only"


class Failure(Exception):
    """Something recall could not use this time; recall degrades on it, never fails. `label` names it in
    `degraded` and in the `retrieval_fail` event; `loses` says which evidence it takes away."""

    label = "recall"
    loses: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return f"{self.label}: {self.args[0]}" if self.args else self.label


class EmbedderFailed(Failure):
    label = "embedder"
    loses = frozenset({"vectors", "semantic"})


class VectorsPending(Failure):
    """The store is being re-embedded for a new embedder (service/writing/embed_queue.py): no vectors yet."""

    label = "vectors"
    loses = frozenset({"vectors", "semantic"})


class VectorsOfAnotherModel(Failure):
    """The store keeps another embedder's vectors (service/writing/vectors.py): this one's cannot be compared."""

    label = "vectors"
    loses = frozenset({"vectors", "semantic"})


class VectorIndexFailed(Failure):
    """The nearest-vector search failed; the shortlist's similarities can still be read."""

    label = "vector index"
    loses = frozenset({"vectors"})


class VectorScoringFailed(Failure):
    label = "vector scoring"
    loses = frozenset({"vectors", "semantic"})


class KeywordIndexFailed(Failure):
    label = "keyword index"
    loses = frozenset({"keywords"})


class StoreDamaged(Failure):
    label = "store damaged"


class LibraryFailed(Failure):
    """The cloud library could not answer this call's question (service/recall/library.py): its hits are
    missing, not just fewer; the notebook's own answer stands."""

    label = "cloud library"


class BookkeepingFailed(Failure):
    """A write recall makes on the side (reinforcing the memories the agent used) failed."""

    label = "store"


class ProfileFilesFailed(Failure):
    """The profile's Markdown files could not be read or written (their folder's permissions): a person's edit is
    not taken in, nothing else is missing."""

    label = "profile files"


@dataclass
class Health:
    """What recall can use in this call: decided by the failures recorded as they happen."""

    failures: list[Failure] = field(default_factory=list)
    vectors: bool = True  # a query vector and the vector index
    keywords: bool = True  # the keyword index
    semantic: bool = True  # similarities for the shortlist (a query vector, and scoring worked)

    def fail(self, failure: Failure) -> None:
        self.failures.append(failure)
        self.vectors = self.vectors and "vectors" not in failure.loses
        self.keywords = self.keywords and "keywords" not in failure.loses
        self.semantic = self.semantic and "semantic" not in failure.loses

    @property
    def path(self) -> str | None:
        if self.vectors and self.keywords:
            return None
        if self.keywords:
            return KEYWORD_PATH
        if self.vectors:
            return VECTOR_PATH
        return CARD_ONLY

    def describe(self) -> str | None:
        """The recall result's `degraded`: the path that answered, then what failed (None when nothing did)."""
        failed = "; ".join(str(f) for f in self.failures)
        if self.path is None:
            return failed or None
        return f"{self.path} — {failed}"

    def messages(self) -> list[str]:
        return [str(f) for f in self.failures]


def threshold(configured: float, health: Health, lexical: bool, core_lift: float = 0.0) -> float:
    """The relevance bar, the one place it is decided: the configured one when both kinds of evidence are
    available (a nearest-neighbour search that failed loses candidates, not the similarity of those found by
    keyword), lowered on a path where one kind must decide alone; a core memory's bar is lower by the
    decision's `core_lift` in logit (core/relevance.Model)."""
    bar = configured
    if not (health.semantic and health.keywords):
        if health.keywords:
            bar = min(configured, KEYWORD_PATH_THRESHOLD)
        elif lexical:
            bar = min(configured, LEXICAL_VECTOR_PATH_THRESHOLD)
    if core_lift and 0.0 < bar < 1.0:
        bar = 1.0 / (1.0 + math.exp(-(math.log(bar / (1.0 - bar)) - core_lift)))
    return bar


async def vector_path(
    reader: StoreReader, user_id: str, vector: Sequence[float], statuses: tuple[Status, ...], health: Health
) -> dict[str, float]:
    """Nearest memories by vector, for when the keyword index failed (the built-in embedder's recall otherwise
    skips the vector index: its similarity is shared wording, which the keyword index enumerates)."""
    try:
        return dict(await reader.vector_neighbours(user_id, vector, VECTOR_PATH_NEIGHBOURS, statuses))
    except Exception as exc:  # noqa: BLE001 - a sick index degrades recall, never fails it
        health.fail(VectorIndexFailed(exc))
        return {}
