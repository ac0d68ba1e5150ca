"""Both backends hand back the same records: a memory row and a pending row, written and read back through the
store, come out as the same values and types (aware UTC datetimes to the millisecond, lists, dicts, enums)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from pocketmem.base.models import Category, DeleteReason, Memory, PendingItem, PendingStatus, Scores, Status
from pocketmem.store.types import IndexedText, MemoryFilter

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "types"
# Given in +08:00 with microseconds: the store keeps UTC to the millisecond.
WHEN = datetime(2026, 3, 1, 9, 30, 15, 123456, tzinfo=timezone(timedelta(hours=8)))
STORED = datetime(2026, 3, 1, 1, 30, 15, 123000, tzinfo=UTC)


def _memory() -> Memory:
    return Memory(
        id="m-types",
        user_id=USER,
        content="用户每周三去游泳",
        category=Category.preference,
        keywords=["游泳", "周三"],
        scores=Scores(emotion=0.2, info=0.7, persistence=0.6, judge=0.5),
        info_importance=0.55,
        time_coef=0.9,
        importance=0.5,
        confidence=0.8,
        source="test",
        source_ref="ref-1",
        created_at=WHEN,
        updated_at=WHEN,
        valid_from=WHEN,
        valid_until=WHEN + timedelta(days=30),
        last_active_at=WHEN,
        use_count=2,
        status=Status.active,
        supersedes=None,
        expires_at=WHEN + timedelta(days=60),
        due_at=WHEN + timedelta(days=1),
        remind_at=WHEN + timedelta(hours=20),
        content_hash="hash-types",
        embed_model="hash-64",
    )


def _pending() -> PendingItem:
    return PendingItem(
        id="p-types",
        user_id=USER,
        candidate={"content": "用户养了一只猫", "keywords": ["猫"], "content_hash": "hash-cat", "nested": {"n": 1}},
        confidence=0.6,
        status=PendingStatus.snoozed,
        cooldown_until=WHEN,
        created_at=WHEN,
        updated_at=WHEN,
    )


def _is_utc(value: object) -> bool:
    return isinstance(value, datetime) and value.utcoffset() == timedelta(0)


async def test_a_memory_row_reads_back_the_same_on_both_backends(app):
    memory = _memory()
    vector = [1.0] + [0.0] * (app.embedder.dimensions - 1)
    async with app.store.write() as tx:
        await tx.ensure_user(USER, WHEN)
        await tx.insert_memory(memory, vector, IndexedText(terms="游泳 周三", keyword_terms="游泳 周三"))
    async with app.store.read() as r:
        by_id = await r.get_memory(USER, memory.id)
        listed, total = await r.list_memories(USER, MemoryFilter(statuses=(Status.active,)))
        by_hash = await r.find_by_hash(USER, memory.content_hash, (Status.active,))
        user = await r.get_user(USER)
        stats = await r.stats(USER)
    expected = memory.model_dump() | {
        "created_at": STORED,
        "updated_at": STORED,
        "valid_from": STORED,
        "last_active_at": STORED,
        "valid_until": STORED + timedelta(days=30),
        "expires_at": STORED + timedelta(days=60),
        "due_at": STORED + timedelta(days=1),
        "remind_at": STORED + timedelta(hours=20),
    }
    assert total == 1 and by_id is not None and by_hash is not None
    for found in (by_id, listed[0], by_hash):
        assert found.model_dump() == expected
        assert isinstance(found.keywords, list) and isinstance(found.category, Category)
        assert all(_is_utc(getattr(found, name)) for name in ("created_at", "updated_at", "valid_from", "due_at"))
    assert user is not None and user["created_at"] == "2026-03-01T01:30:15.123Z" and user["identity_confirmed"] is False
    assert _is_utc(stats.oldest) and stats.oldest == STORED and stats.by_status == {"active": 1}


async def test_a_memory_written_then_changed_reads_back_the_same_on_both_backends(app):
    memory = _memory()
    vector = [1.0] + [0.0] * (app.embedder.dimensions - 1)
    later = WHEN + timedelta(days=2)
    async with app.store.write() as tx:
        await tx.ensure_user(USER, WHEN)
        await tx.insert_memory(memory, None, IndexedText(terms="游泳", keyword_terms=""))
        await tx.update_memory(USER, memory.id, keywords=["游泳馆"], category=Category.fact, completed_at=later)
        await tx.replace_content(
            USER,
            memory.id,
            content="用户每周四去游泳",
            content_hash="hash-thursday",
            keywords=["游泳", "周四"],
            vector=vector,
            text=IndexedText(terms="游泳 周四", keyword_terms="游泳 周四"),
            updated_at=later,
        )
        await tx.touch(USER, [memory.id], later, by=3)
        await tx.set_status(
            USER, memory.id, Status.trashed, updated_at=later, deleted_at=later, delete_reason=DeleteReason.user_delete
        )
    async with app.store.read() as r:
        found = await r.get_memory(USER, memory.id)
    assert found is not None
    assert found.keywords == ["游泳", "周四"] and found.category is Category.fact
    assert found.content == "用户每周四去游泳" and found.content_hash == "hash-thursday"
    assert found.use_count == 5 and found.status is Status.trashed and found.delete_reason is DeleteReason.user_delete
    stored_later = STORED + timedelta(days=2)
    assert (found.updated_at, found.last_active_at, found.deleted_at, found.completed_at) == (stored_later,) * 4
    assert all(_is_utc(t) for t in (found.updated_at, found.deleted_at, found.completed_at))


async def test_a_pending_row_reads_back_the_same_on_both_backends(app):
    item = _pending()
    async with app.store.write() as tx:
        await tx.ensure_user(USER, WHEN)
        await tx.insert_pending(item)
        await tx.record_operation(USER, "op-1", "req-hash", {"ids": ["a", "b"], "n": 2, "名": "值"}, WHEN)
    async with app.store.read() as r:
        by_id = await r.get_pending(USER, item.id)
        listed, total = await r.list_pending(USER, (PendingStatus.snoozed,), 10)
        due = await r.due_pending(USER, WHEN + timedelta(seconds=1), 10)
        by_hash = await r.find_pending_by_hash(USER, "hash-cat")
        operation = await r.operation_result(USER, "op-1")
    expected = item.model_dump() | {"created_at": STORED, "updated_at": STORED, "cooldown_until": STORED}
    assert total == 1 and by_id is not None and by_hash is not None and len(due) == 1
    for found in (by_id, listed[0], due[0], by_hash):
        assert found.model_dump() == expected
        assert isinstance(found.candidate, dict) and isinstance(found.status, PendingStatus)
        assert _is_utc(found.created_at) and _is_utc(found.cooldown_until)
    assert operation == ("req-hash", {"ids": ["a", "b"], "n": 2, "名": "值"})

    async with app.store.write() as tx:
        await tx.update_pending(USER, item.id, status=PendingStatus.confirmed, memory_id="m-1", updated_at=WHEN)
    async with app.store.read() as r:
        changed = await r.get_pending(USER, item.id)
    assert changed is not None and changed.status is PendingStatus.confirmed and changed.memory_id == "m-1"
    assert changed.updated_at == STORED and _is_utc(changed.updated_at)
