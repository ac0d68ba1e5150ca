"""Routing by confidence (core/routing.py), the one rule add_memory, batch steps and extraction share."""

from __future__ import annotations

import pytest

from pocketmem.base.config import Settings
from pocketmem.core.routing import route


@pytest.mark.parametrize(
    ("confidence", "expected"),
    [(1.0, "store"), (0.85, "store"), (0.849, "pending"), (0.6, "pending"), (0.599, "discard"), (0.0, "discard")],
)
def test_route_by_the_default_thresholds(confidence: float, expected: str) -> None:
    assert route(confidence, Settings()) == expected


def test_confirm_all_sends_even_certain_writes_to_pending_but_still_discards_the_unsure() -> None:
    settings = Settings(confirm_all=True)
    assert route(1.0, settings) == "pending"
    assert route(0.5, settings) == "discard"


def test_thresholds_come_from_the_settings() -> None:
    settings = Settings(store_threshold=0.95, pending_threshold=0.3)
    assert [route(c, settings) for c in (0.95, 0.9, 0.3, 0.29)] == ["store", "pending", "pending", "discard"]
