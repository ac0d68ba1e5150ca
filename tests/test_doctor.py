"""The doctor never fails: whatever it meets is a line of its report with the repair it suggests; a keyword index
dropped under a running server does not stop writes; memories the keyword index has no row for are found and
indexed again by `doctor --repair`."""

from __future__ import annotations

import random
import shutil
import sqlite3

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest

from .helpers import START, doctor

pytestmark = [pytest.mark.anyio]


async def test_a_keyword_index_dropped_while_serving_does_not_stop_writes(app, client, settings):
    assert not (await client.call_tool("add_memory", {"content": "用户的猫叫小白"})).is_error
    with sqlite3.connect(settings.db_path) as conn:
        conn.execute("drop table memories_fts")
    added = await client.call_tool("add_memory", {"content": "用户每周三去游泳"})
    assert not added.is_error, added.content[0].text
    for query, fact in (("小白", "用户的猫叫小白"), ("游泳", "用户每周三去游泳")):
        recalled = await client.call_tool("recall_memories", {"query": query})
        assert fact in [m["content"] for m in recalled.structured_content["memories"]]
    report = await app.doctor()
    assert report["ok"], report["problems"]
    assert report["repaired"] == ["table memories_fts was missing: rebuilt from the memories"]
    assert report["store"]["keyword_rows"] == 2



THREE = ("用户喜欢的颜色编号45308", "用户住在杭州", "用户的猫叫小白")


async def keyword_index(app: PocketMem) -> list[tuple]:
    """Everything the keyword index is made of, for a before/after comparison."""
    async with app.store.read() as r:
        if app.settings.database_url is None:
            rows = await r.fetch_all("select rowid, terms, keywords from memories_fts order by rowid")
            terms = await r.fetch_all("select user_id, term, docs from user_terms order by 1, 2")
        else:
            rows = await r.fetch_all("select id, lexemes::text from memories order by id")
            terms = await r.fetch_all(
                "select user_id, term, sum(delta) from memory_user_term_counts group by 1, 2 order by 1, 2"
            )
    return [tuple(row) for row in [*rows, *terms]]


async def empty_the_keyword_index(settings) -> None:
    """The keyword index emptied behind the store's back; the memories stay."""
    if settings.database_url is None:
        with sqlite3.connect(settings.db_path) as db:
            db.execute("delete from memories_fts")
        return
    import psycopg

    async with await psycopg.AsyncConnection.connect(settings.database_url.get_secret_value()) as conn:
        await conn.execute("update memories set lexemes = ''::tsvector")
        await conn.commit()


async def recalled(settings, query: str) -> list[str]:
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        result = await app.retrieval.recall("global", RecallRequest(query=query))
        return [m.content for m in result.memories]


@pytest.mark.backends
async def test_memories_without_a_keyword_row_are_reported_and_repair_indexes_them(settings, capsys):
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        for text in THREE:
            await app.writing.add("global", AddRequest(content=text))
        before = await keyword_index(app)
    assert await recalled(settings, "编号45308") == [THREE[0]]
    await empty_the_keyword_index(settings)
    assert await recalled(settings, "编号45308") == []

    code, report = await doctor(settings, capsys)
    assert code == 1 and not report["ok"]
    assert (report["store"]["memories"], report["store"]["keyword_rows"], report["store"]["keyword_gaps"]) == (3, 0, 3)
    assert report["problems"] == [
        "3 of 3 memories have no keyword row (a recall by an exact word misses them): run `pocketmem doctor --repair`"
    ]

    code, report = await doctor(settings, capsys, repair=True)
    assert code == 0 and report["ok"], report["problems"]
    assert report["repaired"] == ["3 memories had no keyword row: indexed again from their text"]
    assert (report["store"]["keyword_rows"], report["store"]["keyword_gaps"]) == (3, 0)
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        assert await keyword_index(app) == before  # the same rows and term counts as written, nothing else
    assert await recalled(settings, "编号45308") == [THREE[0]]
    code, report = await doctor(settings, capsys, repair=True)
    assert code == 0 and report["repaired"] == []


async def test_repair_indexes_only_the_memories_without_a_row(settings, capsys):
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        ids = [(await app.writing.add("global", AddRequest(content=text))).memory_id for text in THREE]
        before = await keyword_index(app)
    with sqlite3.connect(settings.db_path) as db:
        db.execute("delete from memories_fts where rowid = (select rowid from memories where id = ?)", (ids[0],))
    code, report = await doctor(settings, capsys)
    assert (code, report["store"]["keyword_rows"], report["store"]["keyword_gaps"]) == (1, 2, 1)
    assert report["problems"] == [
        "1 of 3 memories has no keyword row (a recall by an exact word misses it): run `pocketmem doctor --repair`"
    ]
    code, report = await doctor(settings, capsys, repair=True)
    assert code == 0 and report["repaired"] == ["1 memory had no keyword row: indexed again from its text"]
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        assert await keyword_index(app) == before
    assert await recalled(settings, "编号45308") == [THREE[0]]


@pytest.mark.backends
async def test_a_healthy_store_reports_no_keyword_gap(settings, capsys):
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        for text in THREE:
            await app.writing.add("global", AddRequest(content=text))
        trashed = await app.writing.add("global", AddRequest(content="用户在学吉他"))
        await app.trash.forget("global", trashed.memory_id, None)  # a trashed memory keeps its keyword row
    code, report = await doctor(settings, capsys)
    assert code == 0 and report["ok"], report["problems"]
    assert (report["store"]["memories"], report["store"]["keyword_rows"], report["store"]["keyword_gaps"]) == (4, 4, 0)
    code, report = await doctor(settings, capsys, repair=True)
    assert code == 0 and report["repaired"] == []


async def test_a_file_with_40_flipped_bytes_gets_a_report_never_an_error(tmp_path, capsys, make_settings):
    made = make_settings(tmp_path / "made")
    async with PocketMem(made, clock=FixedClock(START)) as app:
        for i in range(30):
            await app.writing.add("alice", AddRequest(content=f"第{i}条：用户的猫叫小白，喜欢喝乌龙茶 {i * 7}"))
    original = made.db_path.read_bytes()
    broken = 0
    for seed in range(12):
        settings = make_settings(tmp_path / f"seed{seed}")
        settings.home.mkdir(parents=True)
        data = bytearray(original)
        rng = random.Random(seed)
        for _ in range(40):
            data[rng.randrange(len(data))] ^= 0xFF
        settings.db_path.write_bytes(bytes(data))
        for repair in (False, True):
            code, report = await doctor(settings, capsys, repair)
            assert code in (0, 1) and report["ok"] == (code == 0) and isinstance(report["problems"], list)
            for line in report["problems"]:
                assert "unexpected" not in line and ("pocketmem" in line or "restore" in line), line
        broken += code == 1
        shutil.rmtree(settings.home)
    assert broken >= 6  # most of the 12 damaged files are found damaged


async def test_repair_mends_keyword_orphans_active_counts_and_the_vector_index(settings, capsys):
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        for text in THREE:
            await app.writing.add("global", AddRequest(content=text))
        before = await keyword_index(app)
        async with app.store.open_write() as tx:
            await tx.execute("insert into memories_fts (rowid, terms, keywords) values (999999, '孤 儿', '')")
            await tx.execute("update memory_counts set active = 7")
            await tx.execute("delete from memory_vectors where rowid = (select min(rowid) from memories)")
    code, report = await doctor(settings, capsys)
    store = report["store"]
    assert (code, store["keyword_orphans"], store["count_mismatches"], store["vector_mismatches"]) == (1, 1, 1, 1)
    assert report["problems"] == ["the indexes disagree with the memories table: run `pocketmem doctor --repair`"]
    code, report = await doctor(settings, capsys, repair=True)
    assert code == 0 and report["ok"], report["problems"]
    assert report["repaired"] == [
        "1 keyword row without a memory removed",
        "the active count of 1 user recounted",
        "the vector index disagreed with the memories: rebuilt from the vectors they keep",
    ]
    async with PocketMem(settings, clock=FixedClock(START)) as app:
        assert await keyword_index(app) == before
        async with app.store.open_write() as tx:  # its chunks overwritten: the index cannot be read
            await tx.execute("update memory_vectors_vector_chunks00 set vectors = zeroblob(10)")
    code, report = await doctor(settings, capsys, repair=True)
    assert report["repaired"] == ["the vector index disagreed with the memories: rebuilt from the vectors they keep"]
    code, report = await doctor(settings, capsys)
    assert code == 0 and report["ok"], report["problems"]
    assert await recalled(settings, "编号45308") == [THREE[0]]
