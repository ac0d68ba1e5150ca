"""A store an older release wrote, opened by this one: todos, episodes and contexts it kept as core are given their
category's persistence by a migration (m013_short_lived_not_core / pg009_short_lived_not_core), with an event each,
and then decay and expire as their category does; the doctor finds none left, and `--repair` mends one an import
brings in later. Both backends; the old store is made by writing what the older release wrote (persistence 1) and
taking back the migration's record."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.models import Category, EventKind
from pocketmem.core.scoring import CATEGORY_DEFAULTS
from pocketmem.service.shared.usercard import render_user_card
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.sqlite.driver import connect as sqlite_connect

from .helpers import START, USER, doctor

pytestmark = [pytest.mark.anyio, pytest.mark.backends]

TODO, EPISODE, CONTEXT = "每天早上吃降压药。", "今天聊了很多关于工作的压力。", "Currently debugging the payment flow."
FACT = "用户对青霉素过敏。"


async def old_store(settings, backend) -> dict[str, str]:
    """The rows a release before the core rule wrote: a todo, an episode and a context with persistence 1 beside a
    core fact, in a store without the migration's record. Their ids by content."""
    ids = {}
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        for content, category in ((TODO, Category.todo), (EPISODE, Category.episode), (CONTEXT, Category.context)):
            ids[content] = (await app.writing.add(USER, AddRequest(content=content, category=category))).memory_id
        core = AddRequest(content=FACT, category=Category.preference, scores={"persistence": 1.0})
        ids[FACT] = (await app.writing.add(USER, core)).memory_id
        if backend.name == "postgres":
            async with app.store.write() as tx:
                await tx.execute("update memories set persistence = 1, time_coef = 1")
                await tx.execute("delete from schema_migrations where name = 'pg009_short_lived_not_core'")
            return ids
    db = sqlite_connect(str(settings.db_path), load_vectors=True)
    db.execute("update memories set persistence = 1, time_coef = 1")
    db.execute("delete from schema_migrations where name = 'm013_short_lived_not_core'")
    db.commit()
    db.close()
    return ids


async def test_core_todos_episodes_and_contexts_get_their_categorys_persistence(settings, backend, capsys):
    ids = await old_store(settings, backend)
    async with PocketMem(settings, clock=FixedClock(START + timedelta(days=1))) as app:
        card = await render_user_card(app.store, USER, app.settings, app.clock.now(), lang="en")
        core_part, todo_part = card.split("Open todos")
        assert FACT in core_part and TODO not in core_part and EPISODE not in card and CONTEXT not in card
        assert card.count(TODO) == 1 and TODO in todo_part
        for content, category in ((TODO, Category.todo), (EPISODE, Category.episode), (CONTEXT, Category.context)):
            memory = await app.get_memory(USER, ids[content])
            assert memory["scores"]["persistence"] == CATEGORY_DEFAULTS[category].persistence
            assert memory["core"] is False
        assert (await app.get_memory(USER, ids[FACT]))["core"] is True
        async with app.store.read() as reader:
            events = await reader.list_events(USER, kinds=[EventKind.rescored])
        assert sorted(e.memory_id for e in events) == sorted(ids[c] for c in (TODO, EPISODE, CONTEXT))
        migration = "pg009_short_lived_not_core" if backend.name == "postgres" else "m013_short_lived_not_core"
        assert {e.payload["by"] for e in events} == {f"migration {migration}"}
    # the episode's 14 days are over: it expires, as a new episode would
    async with PocketMem(settings, clock=FixedClock(START + timedelta(days=60))) as app:
        report = await app.maintenance.run()
        assert report.users[0].expired == [ids[EPISODE]]
    code, report = await doctor(settings, capsys)
    assert code == 0 and report["store"]["short_lived_core"] == 0, report["problems"]


async def test_the_doctor_lists_and_repairs_a_core_todo_brought_in_after_the_migration(settings, backend, capsys):
    ids = await old_store(settings, backend)
    async with PocketMem(settings, clock=FixedClock(START)) as app:  # migrated here
        async with app.store.write() as tx:  # as an import of an old export writes it
            placeholder = "%s" if backend.name == "postgres" else "?"
            await tx.execute(f"update memories set persistence = 1 where id = {placeholder}", (ids[TODO],))
    code, report = await doctor(settings, capsys)
    assert code == 1 and report["store"]["short_lived_core"] == 1
    assert any("todo, episode or context memories are core" in p for p in report["problems"])
    code, report = await doctor(settings, capsys, repair=True)
    assert code == 0, report["problems"]
    assert any(ids[TODO] in line for line in report["repaired"])
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        assert (await app.get_memory(USER, ids[TODO]))["scores"]["persistence"] == 0.3
