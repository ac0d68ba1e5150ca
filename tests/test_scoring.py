import math
from datetime import UTC, datetime, timedelta

import pytest

from pocketmem.base.models import Category, Memory, Scores, Status
from pocketmem.core.scoring import (
    CATEGORY_DEFAULTS,
    fill_scores,
    importance,
    importance_now,
    info_importance,
    time_coef,
)


def test_info_importance_formula():
    s = Scores(emotion=0.5, info=1.0, persistence=0.25, judge=0.75)
    assert info_importance(s) == pytest.approx(0.4 * 1.0 + 0.2 * 0.5 + 0.2 * 0.25 + 0.2 * 0.75)


@pytest.mark.parametrize(
    ("p", "days", "expected"),
    [
        (1.0, 0, 1.0),
        (1.0, 10_000, 1.0),  # core memories never decay
        (0.5, 0, 1.0),
        (0.5, 10, math.exp(-0.01 * 0.5 * 10)),
        (0.1, 20, math.exp(-0.01 * 0.9 * 20)),
        (0.0, 100, 0.8),  # the floor
        (0.9, 5000, 0.8),
    ],
)
def test_time_coef(p, days, expected):
    assert time_coef(p, days) == pytest.approx(expected)


def test_importance_uses_days_since_last_active():
    s = Scores(emotion=0.2, info=0.8, persistence=0.5, judge=0.6)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    info, coef, imp = importance(s, t0, t0 + timedelta(days=10))
    assert coef == pytest.approx(math.exp(-0.05))
    assert imp == pytest.approx(info * coef)


def test_defaults_fill_only_missing_scores_and_never_make_core():
    filled = fill_scores(Category.preference, {"emotion": 0.9, "persistence": None})
    assert filled.emotion == 0.9
    assert filled.persistence == CATEGORY_DEFAULTS[Category.preference].persistence
    assert all(s.persistence < 1 for s in CATEGORY_DEFAULTS.values())
    assert set(CATEGORY_DEFAULTS) == set(Category)


def test_importance_now_decays_from_the_last_use_or_else_the_creation():
    created = datetime(2026, 1, 1, tzinfo=UTC)
    scores = Scores(emotion=0.3, info=0.8, persistence=0.5, judge=0.8)
    never_used = Memory(
        id="m", user_id="u", content="用户喜欢喝茶", category=Category.preference, scores=scores,
        info_importance=0.0, time_coef=1.0, importance=0.0, confidence=1.0, created_at=created, updated_at=created,
        valid_from=created, status=Status.active, content_hash="h", embed_model="hash",
    )
    used = never_used.model_copy(update={"last_active_at": created + timedelta(days=10)})
    now = created + timedelta(days=30)
    assert importance_now(never_used, now) == pytest.approx(info_importance(scores) * time_coef(0.5, 30))
    assert importance_now(used, now) == pytest.approx(info_importance(scores) * time_coef(0.5, 20))

