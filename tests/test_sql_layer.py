"""The queries written once for both backends (store/sql/) return the same types: aware UTC datetimes,
decoded JSON, in the same order, for events, revisions, tombstones, usage and profile rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from pocketmem.base.models import DeleteReason, EventKind, ProfileRevision, Revision, Tombstone, Usage
from pocketmem.store.sql.sync import change_key, parse_key

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "u-sql"
# An instant given in another zone, with microseconds: the store keeps it as UTC to the millisecond.
WHEN = datetime(2026, 3, 1, 20, 30, 15, 123456, tzinfo=timezone(timedelta(hours=8)))
STORED = datetime(2026, 3, 1, 12, 30, 15, 123000, tzinfo=UTC)


def is_utc(value: datetime | None) -> bool:
    return isinstance(value, datetime) and value.utcoffset() == timedelta(0)


async def test_events_come_back_decoded_with_utc_times(app):
    async with app.store.write() as w:
        await w.add_event(USER, EventKind.created, WHEN, memory_id="m1", payload={"城市": "杭州", "n": 1})
        await w.add_event(USER, EventKind.deleted, WHEN + timedelta(seconds=1), memory_id="m1")
    async with app.store.read() as r:
        listed = await r.list_events(USER, 10, kinds=[EventKind.created, EventKind.deleted])
        only_added = await r.list_events(USER, 10, kinds=[EventKind.created])
        after = await r.events_after(USER, 0, 10)
        of_memory = await r.memory_events(USER, "m1", 10)
        latest = await r.latest_event_id(USER)
    assert [e.kind for e in listed] == [EventKind.deleted, EventKind.created]  # newest first
    assert [e.kind for e in only_added] == [EventKind.created]
    assert [e.id for e in after] == sorted(e.id for e in listed)
    assert [e.id for e in of_memory] == [e.id for e in listed]
    assert latest == listed[0].id
    added = listed[1]
    assert added.payload == {"城市": "杭州", "n": 1} and listed[0].payload == {}
    assert added.created_at == STORED and all(is_utc(e.created_at) for e in after)


async def test_revisions_and_tombstones_round_trip(app):
    revision = Revision(
        id="r1", memory_id="m1", user_id=USER, previous_content="旧", new_content="新", mode="replace",
        reason="correction", created_at=WHEN,
    )
    tombstone = Tombstone(
        tombstone_id="t1", memory_id="m1", user_id=USER, deleted_at=WHEN, purge_at=WHEN + timedelta(days=30),
        reason=DeleteReason.user_delete, payload_hash="h",
    )
    async with app.store.write() as w:
        await w.insert_revision(revision)
        assert not await w.import_revision(revision)  # already there
        await w.insert_tombstone(tombstone)
        assert not await w.import_tombstone(tombstone)
        await w.mark_tombstones_restored(USER, "m1", WHEN + timedelta(hours=1))
    async with app.store.read() as r:
        revisions = await r.list_revisions(USER, "m1")
        every = await r.all_revisions(USER)
        tombstones = await r.list_tombstones(USER)
        for_memory = await r.tombstones_for(USER, ["m1", "other"])
    assert revisions == every and revisions[0].created_at == STORED and is_utc(revisions[0].created_at)
    (t,) = tombstones
    assert for_memory == tombstones
    assert t.deleted_at == STORED and is_utc(t.purge_at) and is_utc(t.restored_at)
    assert t.cloud_synced_at is None and t.purged_at is None


async def test_usage_and_profile_rows_have_the_same_shape(app):
    async with app.store.write() as w:
        await w.add_uses(USER, ["m1", "m1", "m2"], WHEN)
        await w.add_uses(USER, ["m1"], WHEN)
        await w.put_usage(Usage(user_id=USER, memory_id="m3", used_count=4, last_used_at=WHEN, used_mark=2))
        await w.put_profile(USER, "persona", {"名字": "小明"}, WHEN)
        await w.insert_profile_revision(
            ProfileRevision(id="p1", user_id=USER, section="persona", previous={}, new={"名字": "小明"},
                            source="user", created_at=WHEN)
        )
        await w.put_profile_file(USER, "USER.md", "# 小明", "hash", ["earlier"], WHEN)
    async with app.store.read() as r:
        usage = await r.usage(USER)
        some = await r.usage(USER, ["m1"])
        none = await r.usage(USER, [])
        profile = await r.get_profile(USER)
        revisions = await r.list_profile_revisions(USER, 5)
        written = await r.get_profile_file(USER, "USER.md")
    assert usage["m1"].used_count == 2 and usage["m2"].used_count == 1 and usage["m3"].used_count == 4
    assert set(some) == {"m1"} and none == {}
    assert usage["m1"].last_used_at == STORED and is_utc(usage["m3"].last_used_at)
    assert profile == {"persona": {"名字": "小明"}}
    assert revisions[0].new == {"名字": "小明"} and revisions[0].created_at == STORED
    assert written == ("# 小明", "hash", ["earlier"])


def test_change_keys_sort_as_their_positions():
    keys = [change_key(9, "b"), change_key(10, "a"), change_key(10, "b")]
    assert sorted(keys) == keys
    assert parse_key(keys[1]) == (10, "a") and parse_key(None) == (-1, "")
