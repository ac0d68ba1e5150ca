"""Sync of a core memory patched on two devices before either synced (docs/postgres-and-sync.md, scope `memory`).

Appends on both sides are both kept, in one text every device ends with; a replace on either side lets the later
version win and the report lists the conflict. Either way every patch stays in the revisions everywhere, and a
second sync changes nothing. Two SQLite notebooks and one PostgreSQL library, all real (tests/pg.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import anyio
import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.service.recall.retrieval import RecallRequest

from .helpers import START, USER, add, device, rows, synced

pytestmark = pytest.mark.anyio
PEANUTS = "我对花生过敏"
MANGO = "（2026-11-26：也对芒果过敏）"
KIWI = "（2026-11-26：猕猴桃也不行）"
SHRIMP = "（2026-11-26：吃虾会起疹子）"


async def texts(name: str, *apps: PocketMem) -> list[str]:
    """The memory's text in each notebook, then in the library."""
    stores = [app.store for app in apps] + [apps[0].library]
    return [(await rows(store))[name] for store in stores]


async def revision_ids(name: str, *apps: PocketMem) -> list[set[str]]:
    out = []
    for store in [app.store for app in apps] + [apps[0].library]:
        async with store.read() as r:
            out.append({rev.id for rev in await r.list_revisions(USER, name)})
    return out


async def settled(*apps: PocketMem) -> None:
    """Another round on every device changes nothing and reports nothing."""
    for app in apps:
        again = await synced(app)
        assert again.uploaded == 0 and again.conflicts == 0, again
        assert sum(u.downloaded + u.tombstones_downloaded for u in again.users) == 0, again
        assert (await app.stats(USER))["sync"]["pending_uploads"] == 0


@asynccontextmanager
async def shared_core(
    make_settings, tmp_path, library_url
) -> AsyncIterator[tuple[PocketMem, PocketMem, FixedClock, FixedClock, str]]:
    """Two devices, each on its own clock, both holding one core memory (the peanut allergy) from the library."""
    ca, cb = FixedClock(START), FixedClock(START + timedelta(seconds=1))
    async with (
        device(make_settings, tmp_path, "a", library_url, ca) as a,
        device(make_settings, tmp_path, "b", library_url, cb) as b,
    ):
        name = await add(a, PEANUTS, category="fact", scores={"persistence": 1})
        await synced(a)
        await synced(b)
        yield a, b, ca, cb, name


@pytest.mark.parametrize("first", ["earlier", "later"])
async def test_appends_made_on_two_devices_are_both_kept(tmp_path, library_url, make_settings, first):
    async with shared_core(make_settings, tmp_path, library_url) as (a, b, ca, cb, name):
        # A appends twice, B once, later; neither has seen the other's patches.
        ca.advance(minutes=5)
        await a.patching.patch_core(USER, name, "也对芒果过敏", "append", None)
        ca.advance(minutes=1)
        await a.patching.patch_core(USER, name, "猕猴桃也不行", "append", None)
        cb.advance(minutes=10)
        await b.patching.patch_core(USER, name, "吃虾会起疹子", "append", None)
        # Either device may reach the library first: the later text (B's) takes A's appends, and all read in the
        # order they were made (A's two before B's later one).
        order = (a, b, a) if first == "earlier" else (b, a, b)
        reports = [await synced(app) for app in order]
        merged = PEANUTS + MANGO + KIWI + SHRIMP
        assert await texts(name, a, b) == [merged] * 3
        (conflict,) = [c for report in reports for user in report.users for c in user.conflicts]
        assert conflict == {"id": name, "where": "library", "resolution": "merged"}
        # Every patch is history everywhere, and the join is one more revision.
        here_a, here_b, there = await revision_ids(name, a, b)
        assert here_a == here_b == there and len(there) == 4
        async with a.store.read() as r:
            join = (await r.list_revisions(USER, name))[-1]
        assert (join.previous_content, join.new_content, join.mode) == (PEANUTS + SHRIMP, merged, "append")
        # Recall on A finds the mango allergy in what it injects.
        result = await a.retrieval.recall(USER, RecallRequest(query="我能吃芒果吗", keywords=["芒果"], record=False))
        assert [m.id for m in result.memories] == [name] and "芒果" in result.injection
        await settled(a, b, a, b)
        assert await texts(name, a, b) == [merged] * 3


async def test_an_append_over_a_merge_it_has_not_seen_keeps_every_part_in_the_order_made(
    tmp_path, library_url, make_settings
):
    """A merge put A's earlier append before B's; B, not yet holding the merge, appends again: the merge's parts
    are still joined in, each where it was made."""
    async with shared_core(make_settings, tmp_path, library_url) as (a, b, ca, cb, name):
        ca.advance(minutes=5)
        await a.patching.patch_core(USER, name, "也对芒果过敏", "append", None)
        cb.advance(minutes=10)
        await b.patching.patch_core(USER, name, "吃虾会起疹子", "append", None)
        await synced(b)
        await synced(a)  # the library joins A's mango before B's shrimp, and A takes it
        assert (await texts(name, a, b))[0] == PEANUTS + MANGO + SHRIMP
        cb.advance(minutes=10)
        await b.patching.patch_core(USER, name, "猕猴桃也不行", "append", None)  # B never saw the merge
        for app in (b, a):
            await synced(app)
        assert await texts(name, a, b) == [PEANUTS + MANGO + SHRIMP + KIWI] * 3
        await settled(a, b, a, b)


async def test_a_replace_on_one_device_wins_when_later_and_is_reported(
    tmp_path, library_url, make_settings
):
    async with shared_core(make_settings, tmp_path, library_url) as (a, b, ca, cb, name):
        ca.advance(minutes=5)
        await a.patching.patch_core(USER, name, "也对芒果过敏", "append", None)
        cb.advance(minutes=10)
        await b.patching.patch_core(USER, name, "我对花生和芒果都过敏", "replace", None)
        on_a, on_b, on_a_again = [await synced(app) for app in (a, b, a)]
        # The deliberate rewrite is kept as it is, and both devices are told.
        assert await texts(name, a, b) == ["我对花生和芒果都过敏"] * 3
        assert on_a.conflicts == 0
        assert on_b.users[0].conflicts == [{"id": name, "where": "library", "resolution": "later_wins"}]
        assert on_a_again.users[0].conflicts == [{"id": name, "where": "notebook", "resolution": "later_wins"}]
        # The append that lost is history on every device.
        here_a, here_b, there = await revision_ids(name, a, b)
        assert here_a == here_b == there and len(there) == 2
        await settled(a, b)


@pytest.mark.parametrize("first", ["earlier", "later"])
async def test_a_later_append_over_an_earlier_replace_wins_and_is_reported(
    tmp_path, library_url, make_settings, first
):
    async with shared_core(make_settings, tmp_path, library_url) as (a, b, ca, cb, name):
        ca.advance(minutes=5)
        await a.patching.patch_core(USER, name, "我对花生和芒果都过敏", "replace", None)
        cb.advance(minutes=10)
        await b.patching.patch_core(USER, name, "吃虾会起疹子", "append", None)
        reports = [await synced(app) for app in ((a, b, a) if first == "earlier" else (b, a, b))]
        assert await texts(name, a, b) == [PEANUTS + SHRIMP] * 3
        # B's push meets A's replace in the library, and A's pull meets B's append in A's notebook; or A's push
        # meets B's append in the library, which sends it on with A's replace in its revisions.
        met = [(c["where"], c["resolution"]) for r in reports for u in r.users for c in u.conflicts]
        if first == "earlier":
            assert met == [("library", "later_wins"), ("notebook", "later_wins")]
        else:
            assert met == [("library", "later_wins")]
        here_a, here_b, there = await revision_ids(name, a, b)
        assert here_a == here_b == there and len(there) == 2
        await settled(a, b)


@pytest.mark.slow
async def test_the_cli_says_which_core_memory_was_patched_on_two_devices(
    tmp_path, library_url, backend, make_settings
):
    from .servers import server_env

    ca, cb = FixedClock(START), FixedClock(START + timedelta(seconds=1))
    # Device B is the notebook in tmp_path/home that `pocketmem sync` opens.
    b_settings = make_settings(tmp_path, cloud_url=library_url, sync_interval=0)
    async with device(make_settings, tmp_path, "a", library_url, ca) as a:
        name = await add(a, PEANUTS, category="fact", scores={"persistence": 1})
        await synced(a)
        async with PocketMem(b_settings, clock=cb) as b:
            await synced(b)
            cb.advance(minutes=10)
            await b.patching.patch_core(USER, name, "吃虾会起疹子", "append", None)
        ca.advance(minutes=5)
        await a.patching.patch_core(USER, name, "也对芒果过敏", "append", None)
        await synced(a)
    env = server_env(backend, tmp_path / "home", POCKETMEM_CLOUD_URL=library_url)
    with anyio.fail_after(120):
        out = await anyio.run_process([sys.executable, "-m", "pocketmem", "sync"], env=env, check=False)
    stderr = out.stderr.decode()
    assert out.returncode == 0, stderr
    (user,) = json.loads(out.stdout)["users"]
    assert user["conflicts"] == [{"id": name, "where": "library", "resolution": "merged"}]
    assert "ok, 1 core memory patched on two devices" in stderr
    assert f"core memory {name} of user 'global' patched on two devices; both sides' appends are kept" in stderr
    async with PocketMem(b_settings, clock=cb) as b:
        assert (await rows(b.store))[name] == PEANUTS + MANGO + SHRIMP  # A's append was made first
