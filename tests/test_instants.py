"""The store's time codec (core/instants.py): what `encode` writes, `decode` reads back exactly, and the direct
reading of that form agrees with the general one, which takes every offset and precision."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmem.core import instants

STORED = st.datetimes(
    min_value=datetime(instants.MIN_YEAR, 1, 2), max_value=datetime(instants.STORED_MAX_YEAR, 12, 30)
).map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=UTC))


@given(STORED, st.integers(min_value=-14 * 60, max_value=14 * 60))
def test_the_stored_form_and_any_offset_of_it_read_as_the_same_instant(when: datetime, minutes: int):
    text = instants.encode(when)
    assert instants.decode(text) == when and instants.decode(text).tzinfo == UTC
    shifted = when.astimezone(timezone(timedelta(minutes=minutes))).isoformat()  # the general reading
    assert instants.decode(shifted) == when and instants.decode(text.replace("Z", "+00:00")) == when


@pytest.mark.parametrize("text", ["0000-01-01T00:00:00.000Z", "2026-13-01T00:00:00.000Z", "2026-01-01T25:00:00.000Z"])
def test_what_the_direct_reading_refuses_the_general_one_decides(text: str):
    with pytest.raises(instants.UnreadableInstant):
        instants.decode(text)
