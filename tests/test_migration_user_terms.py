"""m006_user_terms / pg003_user_terms: an existing store gains per-user term counts and its keyword index is
re-split by the segmenter and stemmer, without losing a row."""

from __future__ import annotations

import pytest

from pocketmem.app import PocketMem
from pocketmem.core.text import indexed_text
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.store.sqlite.driver import connect as sqlite_connect

pytestmark = [pytest.mark.anyio, pytest.mark.backends]

ROWS = {
    "alice": ["用户下个月要去张家界旅游。", "The user sold the old Subaru.", "用户不喜欢香菜。"],
    "bob": ["用户喜欢张家界的山。"],
}
OLD_STYLE = "张 家 界 张家 家界"  # what the index held before: characters and pairs, no whole words


async def make_old_store(settings, clock, backend) -> None:
    async with PocketMem(settings, clock=clock) as app:
        for user, texts in ROWS.items():
            for text in texts:
                await app.writing.add(user, AddRequest(content=text))
        if backend.name == "postgres":
            async with app.store.write() as tx:
                await tx._exec("drop function pm_count_user_terms() cascade")  # noqa: SLF001
                await tx._exec("drop table memory_user_term_counts")  # noqa: SLF001
                await tx._exec("update memories set terms = %s", (OLD_STYLE,))  # noqa: SLF001
                await tx._exec("delete from schema_migrations where name = 'pg003_user_terms'")  # noqa: SLF001
            return
    db = sqlite_connect(str(settings.db_path), load_vectors=True)
    db.execute("drop table user_terms")
    db.execute("update memories_fts set terms = ?", (OLD_STYLE,))
    db.execute("delete from schema_migrations where name = 'm006_user_terms'")
    db.commit()
    db.close()


async def test_an_existing_store_is_recounted_and_reindexed_without_losing_rows(settings, clock, backend):
    await make_old_store(settings, clock, backend)
    async with PocketMem(settings, clock=clock) as app:
        health = await app.store.health()
        assert health["schema_current"] and health["memories"] == 4
        async with app.store.read() as reader:
            counts, total = await reader.user_term_counts("alice", ["张家界", "sell", "香菜", "山"])
            assert total == 3 and counts == {"张家界": 1, "sell": 1, "香菜": 1}
            assert (await reader.user_term_counts("bob", ["张家界", "香菜"])) == ({"张家界": 1}, 1)
        hits = (await app.retrieval.recall("alice", RecallRequest(query="张家界门票多少钱", record=False))).memories
        assert [h.content for h in hits] == ["用户下个月要去张家界旅游。"]
        async with app.store.read() as reader:
            ids = [h.id for h in hits]
            indexed = await reader.indexed_terms("alice", ids)
        assert indexed[ids[0]].terms == indexed_text("用户下个月要去张家界旅游。", [])[0]


async def test_counts_follow_writes_updates_and_purges(app, backend):
    first = await app.writing.add("carol", AddRequest(content="用户喜欢张家界。"))
    await app.writing.add("carol", AddRequest(content="用户的猫叫小白。"))
    async with app.store.read() as reader:
        assert await reader.user_term_counts("carol", ["张家界", "小白"]) == ({"张家界": 1, "小白": 1}, 2)
    async with app.store.write() as tx:
        assert await tx.remove_memory("carol", first.memory_id)
    async with app.store.read() as reader:
        assert await reader.user_term_counts("carol", ["张家界", "小白"]) == ({"小白": 1}, 1)
