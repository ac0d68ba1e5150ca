"""Sync of deletes against edits (docs/postgres-and-sync.md, scope `memory`): a delete beats every edit made where it
was not yet known, whatever the edit's time; only a restore brings the memory back, and that travels too.

Two SQLite notebooks on their own clocks and one PostgreSQL library, all real (tests/pg.py).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from pocketmem.base.clock import FixedClock
from pocketmem.base.models import Category, Status

from .helpers import START, USER, add, device, rows, synced

pytestmark = pytest.mark.anyio


async def test_an_edit_made_after_a_delete_it_had_not_seen_does_not_bring_it_back(
    tmp_path, library_url, make_settings
):
    ca, cb = FixedClock(START), FixedClock(START)
    async with (
        device(make_settings, tmp_path, "a", library_url, ca) as a,
        device(make_settings, tmp_path, "b", library_url, cb) as b,
    ):
        todo = await add(a, "周五前交房租", category=Category.todo)
        for app in (a, b):
            await synced(app)
        # B forgets it; a second later A, which has not seen the forget, completes it.
        cb.advance(minutes=1)
        await b.trash.forget(USER, todo, "不用了")
        ca.advance(minutes=1, seconds=1)
        await a.todos.set_done(USER, todo, True)
        for app in (b, a, b):
            await synced(app)
        for store in (a.store, b.store, a.library):
            assert todo not in await rows(store), store
            assert todo in await rows(store, Status.trashed), store

        # A restore, made where the delete is known, brings it back everywhere; nothing more moves afterwards.
        ca.advance(minutes=1)
        await a.trash.restore(USER, todo)
        for app in (a, b):
            await synced(app)
        for store in (a.store, b.store, a.library):
            assert todo in await rows(store), store
        for app in (a, b):
            again = await synced(app)
            assert again.uploaded == 0
            assert sum(u.downloaded + u.tombstones_downloaded for u in again.users) == 0


async def test_a_restore_travels_and_a_delete_after_it_wins_again(
    tmp_path, library_url, make_settings
):
    """The restore is explicit wherever it is made; a later delete (a second tombstone) wins over it again."""
    ca, cb = FixedClock(START), FixedClock(START + timedelta(seconds=1))
    async with (
        device(make_settings, tmp_path, "a", library_url, ca) as a,
        device(make_settings, tmp_path, "b", library_url, cb) as b,
    ):
        cat = await add(a, "用户养了一只叫年糕的猫")
        for app in (a, b):
            await synced(app)
        ca.advance(minutes=1)
        await a.trash.forget(USER, cat, None)
        await synced(a)
        await synced(b)
        cb.advance(minutes=2)
        await b.trash.restore(USER, cat)
        await synced(b)
        await synced(a)
        assert cat in await rows(a.store) and cat in await rows(a.library)

        # Deleted again on A after the restore: it stays deleted on every side.
        ca.advance(minutes=5)
        await a.trash.forget(USER, cat, None)
        for app in (a, b, a):
            await synced(app)
        for store in (a.store, b.store, a.library):
            assert cat in await rows(store, Status.trashed), store
