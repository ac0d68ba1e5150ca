"""Where a candidate memory goes by its confidence (design "Write path"). Pure; the one place the thresholds
are compared, for add_memory, batch steps and extraction's operations alike:

    confidence >= store_threshold (0.85), POCKETMEM_CONFIRM_ALL off -> "store"
    confidence >= pending_threshold (0.60)                          -> "pending": the user confirms or rejects it
    otherwise                                                       -> "discard": logged, not stored

POCKETMEM_CONFIRM_ALL (docs/profile.md, "confirm everything") sends even confidence 1 to "pending".
"""

from __future__ import annotations

from typing import Literal

from pocketmem.base.config import Settings

Route = Literal["store", "pending", "discard"]
PLAIN_CONFIDENCE = 0.9  # what the rubric asks for a plain statement when the store threshold asks no more


def route(confidence: float, settings: Settings) -> Route:
    if confidence < settings.pending_threshold:
        return "discard"
    if confidence < settings.store_threshold or settings.confirm_all:
        return "pending"
    return "store"


def plain_confidence(settings: Settings) -> float:
    """The confidence the extraction rubric asks for what the user said plainly: 0.9, or the store threshold
    when that is higher, so that a plain statement is stored."""
    return max(PLAIN_CONFIDENCE, settings.store_threshold)


def routing_rule(settings: Settings) -> str:
    """`route` in words, for the add tool's description (it changes with the settings as the rule does)."""
    if settings.confirm_all:
        return (
            f"confidence >= {settings.pending_threshold:g} waits for the user's yes (every memory is confirmed "
            "first), lower is dropped."
        )
    return (
        f"confidence >= {settings.store_threshold:g} stores, >= {settings.pending_threshold:g} waits for the "
        "user's yes, lower is dropped."
    )
