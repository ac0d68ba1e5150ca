"""The rules the store's SQL applies come from core/scoring.py: eviction order, the core rule, expiry."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.models import Category
from pocketmem.core import scoring
from pocketmem.service.writing.add_request import AddRequest

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"

# (content, persistence, info, days since last active): importance orders differ from info importance orders
# once time has passed, and one memory sits exactly at the core threshold.
ROWS = [
    ("用户住在杭州", 0.9, 0.9, 200),
    ("用户喜欢爬山", 0.1, 0.9, 200),
    ("用户的猫叫小白", 0.5, 0.6, 5),
    ("用户在学钢琴", 0.2, 0.7, 40),
    ("用户下周去上海", 0.0, 0.8, 100),
    ("用户不吃香菜", scoring.CORE_PERSISTENCE, 0.5, 300),
]


async def fill(app: PocketMem, clock) -> dict[str, str]:
    ids = {}
    start = clock.now()
    for content, persistence, info, days in ROWS:
        clock.set(start - timedelta(days=days))
        scores = {"persistence": persistence, "info": info, "emotion": 0.3, "judge": 0.5}
        result = await app.writing.add(USER, AddRequest(content=content, category=Category.fact, scores=scores))
        ids[content] = result.memory_id
    clock.set(start)
    return ids


async def test_eviction_order_is_the_current_importance_of_scoring_py(app, clock):
    ids = await fill(app, clock)
    now = clock.now()
    async with app.store.read() as r:
        memories = await r.get_memories(USER, list(ids.values()))
        candidates = await r.eviction_candidates(USER, 10, now, exclude=[])
    expected = sorted(
        (m for m in memories if not scoring.is_core(m.scores)),
        key=lambda m: scoring.importance(m.scores, m.last_active_at or m.created_at, now)[2],
    )
    assert [m.id for m in candidates] == [m.id for m in expected]
    assert ids["用户不吃香菜"] not in {m.id for m in candidates}  # core: never evicted
    # Time matters: the order is not that of the stored info importance alone.
    by_info = sorted(expected, key=lambda m: m.info_importance)
    assert [m.id for m in by_info] != [m.id for m in expected]


async def test_a_memory_dated_centuries_ago_is_evicted_not_an_error(app, clock):
    """The decay of a memory from the year 1000 is the floor on both backends (PostgreSQL's exp underflowed)."""
    from datetime import UTC, datetime

    old = await app.writing.add(USER, AddRequest(content="很久以前的事", created_at=datetime(1000, 1, 2, tzinfo=UTC)))
    await app.writing.add(USER, AddRequest(content="用户最近在学吉他"))
    async with app.store.read() as r:
        [candidate] = await r.eviction_candidates(USER, 1, clock.now(), exclude=[])
    assert candidate.id == old.memory_id


async def test_the_core_rule_is_scorings(app, clock):
    ids = await fill(app, clock)
    async with app.store.read() as r:
        core = await r.core_memories(USER, 10)
        stats = await r.stats(USER)
    assert [m.id for m in core] == [ids["用户不吃香菜"]]
    assert stats.core == 1


@pytest.mark.postgres_only
async def test_postgres_writes_lock_the_user_they_are_opened_for(app, clock, backend):
    from pocketmem.store.postgres.tx import USER_LOCK_SPACE

    async def user_locks(tx) -> int:
        row = await tx.fetch_one(
            "select count(*) from pg_locks where locktype = 'advisory' and classid = %s and pid = pg_backend_pid()",
            (USER_LOCK_SPACE,),
        )
        return row[0]

    async with app.store.write(user_id="alice") as tx:
        assert await user_locks(tx) == 1  # taken when the transaction opens, before any statement of its own
        await tx.get_memory("alice", "nope")
        assert await user_locks(tx) == 1
    async with app.store.write() as tx:
        await tx.get_memory("alice", "nope")  # not opened for a user: the method calls lock nothing
        assert await user_locks(tx) == 0
        await tx.lock_users(["bob", "carol", "bob"])  # a transaction for several users names them
        assert await user_locks(tx) == 2
        await tx.lock_user("carol")  # each user once per transaction
        assert await user_locks(tx) == 2
    async with app.store.read() as r:
        await r.lock_user("dave")  # reads take no lock
        assert await user_locks(r) == 0


async def test_token_rows_read_back_the_same_on_both_backends(app, clock):
    """One set of token queries (store/sql/tokens.py) over each backend's dialect."""
    from pocketmem.base.models import ApiToken

    created = clock.now()
    token = ApiToken(id="t1", user_id="alice", name="laptop", token_hash="h" * 64, created_at=created)
    async with app.store.write() as tx:
        await tx.insert_token(token)
        await tx.insert_token(token.model_copy(update={"id": "t2", "user_id": "bob", "name": None}))
    clock.advance(minutes=5)
    async with app.store.write() as tx:
        await tx.touch_token("t1", clock.now())
        assert await tx.revoke_token("t2", clock.now()) is True
        assert await tx.revoke_token("t2", clock.now()) is False  # once
    async with app.store.read() as r:
        got = await r.get_token("t1")
        assert got == token.model_copy(update={"last_used_at": clock.now()})
        assert got is not None and got.created_at.tzinfo is not None
        assert [t.id for t in await r.list_tokens()] == ["t1"]
        assert [t.id for t in await r.list_tokens("bob", include_revoked=True)] == ["t2"]
        assert await r.count_active_tokens() == 1
        assert await r.get_token("nope") is None
