"""Export -> import round trips a store; importing twice adds nothing; the Markdown card is written atomically."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.errors import InvalidInput
from pocketmem.base.files import write_atomically
from pocketmem.base.models import Category, Status
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest

from .helpers import START, dump
from .servers import checkout_env

pytestmark = [pytest.mark.anyio]
USER = "global"


async def populate(app: PocketMem, clock: FixedClock) -> dict[str, str]:
    """A store with every kind of row: active, core, superseded, trashed, purged, pending, revisions, usage."""
    add = app.writing.add
    ids: dict[str, str] = {}
    ids["core"] = (await add(USER, AddRequest(content="你很爱吃辣。", scores={"persistence": 1},
                                               keywords=["辣"]))).memory_id
    await app.patching.patch_core(USER, ids["core"], "最近胃炎，暂时不吃辣", "append", "体检")
    ids["old"] = (await add(USER, AddRequest(content="用户的博客用 Hexo 搭建", keywords=["博客"]))).memory_id
    clock.advance(days=1)
    ids["new"] = (await add(USER, AddRequest(content="用户的博客换成了 Astro", keywords=["博客"],
                                              supersedes=ids["old"]))).memory_id
    ids["todo"] = (await add(USER, AddRequest(content="周五交报告", category=Category.todo,
                                               due_at=START + timedelta(days=3)))).memory_id
    ids["done"] = (await add(USER, AddRequest(content="取快递", category=Category.todo))).memory_id
    await app.todos.set_done(USER, ids["done"], True)
    ids["episode"] = (await add(USER, AddRequest(content="聊了面试和游戏", category=Category.episode))).memory_id
    ids["purged"] = (await add(USER, AddRequest(content="用户想学滑雪", category=Category.goal))).memory_id
    await app.trash.forget(USER, ids["purged"], None)
    clock.advance(days=7)
    await app.maintenance.run()  # purges it: only its tombstone is left
    ids["trashed"] = (await add(USER, AddRequest(content="用户喜欢喝冰美式", category=Category.preference))).memory_id
    await app.trash.forget(USER, ids["trashed"], "changed taste")
    ids["pending"] = (await add(USER, AddRequest(content="用户可能在学吉他", confidence=0.7))).pending_id
    await app.retrieval.recall(USER, RecallRequest(query="吃辣", keywords=["辣"], used=[ids["new"]]))
    await app.writing.add("someone-else", AddRequest(content="另一个用户喜欢猫"))
    return ids


async def export_text(app: PocketMem, **kw) -> str:
    buffer = io.StringIO()
    await app.exporter.export(buffer, **kw)
    return buffer.getvalue()


async def test_a_memory_edited_in_the_export_is_imported_with_its_new_contents_hash(tmp_path, clock, make_settings):
    """A person edits a line of an export before importing it: the old content is not a duplicate of the new."""
    async with PocketMem(make_settings(tmp_path, db=tmp_path / "a.db"), clock=clock) as source:
        await source.writing.add(USER, AddRequest(content="用户喜欢猫"))
        text = await export_text(source)
    edited = text.replace("用户喜欢猫", "用户养了一条狗叫旺财")
    async with PocketMem(make_settings(tmp_path, db=tmp_path / "b.db"), clock=clock) as target:
        assert (await target.exporter.import_lines(edited.splitlines())).imported.total >= 1
        again = await target.writing.add(USER, AddRequest(content="用户喜欢猫"))
        assert again.status == "stored", again
        same = await target.writing.add(USER, AddRequest(content="用户养了一条狗叫旺财。"))
        assert same.status == "duplicate"


@pytest.mark.backends
async def test_export_then_import_into_an_empty_store_reproduces_it(tmp_path, clock, make_settings):
    async with PocketMem(make_settings(tmp_path, db=tmp_path / "a.db"), clock=clock) as source:
        ids = await populate(source, clock)
        text = await export_text(source, events=True)
        original = await dump(source)
    counts = {k: len(v) for k, v in original[USER].items() if isinstance(v, list | dict)}
    assert counts == {"user": 6, "memories": 7, "usage": 1, "tombstones": 2, "revisions": 1, "pending": 1,
                      "events": counts["events"]} and counts["events"] > 15
    kinds = [json.loads(line)["type"] for line in text.splitlines()]
    assert kinds[0] == "header" and {"user", "memory", "tombstone", "revision", "pending", "event"} <= set(kinds)
    assert "embedding" not in text

    async with PocketMem(make_settings(tmp_path, db=tmp_path / "b.db"), clock=clock) as target:
        report = await target.exporter.import_lines(text.splitlines())
        assert report.skipped.total == 0 and report.evicted == []
        assert await dump(target) == original
        # Acknowledged without vectors: keyword search finds the rows at once, the embed queue embeds them.
        health = await target.store.health()
        assert health["keyword_rows"] == health["memories"] and not health["vector_rows"]  # (SQLite: no index yet)
        hits = await target.retrieval.recall(USER, RecallRequest(query="博客用什么搭的", keywords=["博客"]))
        assert [m.id for m in hits.memories] == [ids["new"]]
        assert await target.embed_queue.run_once() == health["memories"]
        health = await target.store.health()
        assert health["keyword_rows"] == health["memories"] == health["vector_rows"]
        assert health["keyword_orphans"] == 0 and health["vector_mismatches"] == 0

        # The imported store works: recall finds by vector and keyword, history and trash behave.
        hits = await target.retrieval.recall(USER, RecallRequest(query="博客用什么搭的", keywords=["博客"]))
        assert [m.id for m in hits.memories] == [ids["new"]]
        restored = await target.trash.restore(USER, ids["trashed"])
        assert restored.memory.status == Status.active
        assert [t.memory_id for t in (await target.trash.list_trash(USER, 50, 0)).items] == []

        again = await target.exporter.import_lines(text.splitlines())
        assert again.imported.total == 0 and again.skipped.total == report.imported.total
        async with target.store.read() as r:
            assert await r.get_memory(USER, ids["purged"]) is None


@pytest.mark.backends
async def test_import_never_brings_back_a_purged_memory(tmp_path, clock, make_settings):
    async with PocketMem(make_settings(tmp_path, db=tmp_path / "a.db"), clock=clock) as app:
        gone = (await app.writing.add(USER, AddRequest(content="用户的旧地址在西湖区"))).memory_id
        before = await export_text(app)  # taken while the memory was still active
        await app.trash.forget(USER, gone, None)
        clock.advance(days=7)
        await app.maintenance.run()
        report = await app.exporter.import_lines(before.splitlines())
        assert report.imported.memory == 0 and report.skipped.memory == 1
        async with app.store.read() as r:
            assert await r.get_memory(USER, gone) is None


@pytest.mark.backends
async def test_a_bad_file_is_refused_whole_with_the_line_named(app):
    good = await export_text(app)
    fact = (await app.writing.add(USER, AddRequest(content="用户在杭州工作"))).memory_id
    line = json.dumps({"type": "memory", "id": "x" * 8, "user_id": USER, "content": "新的", "category": "nonsense"})
    bad = (await export_text(app)).splitlines()[:2] + [line]
    before = await dump(app)
    with pytest.raises(InvalidInput, match=r"line 3: memory\.category"):
        await app.exporter.import_lines(bad)
    with pytest.raises(InvalidInput, match="line 1: the first line must be the pocketmem-export header"):
        await app.exporter.import_lines(['{"type": "memory"}'])
    with pytest.raises(InvalidInput, match="line 2: not JSON"):
        await app.exporter.import_lines([good.splitlines()[0], "{oops"])
    with pytest.raises(InvalidInput, match="newer than 1"):
        await app.exporter.import_lines(['{"type": "header", "format": "pocketmem-export", "version": 99}'])
    assert await dump(app) == before and fact


@pytest.mark.backends
async def test_import_respects_the_cap(tmp_path, clock, make_settings):
    async with PocketMem(make_settings(tmp_path, db=tmp_path / "a.db"), clock=clock) as app:
        for hobby in ["象棋", "围棋", "书法", "绘画"]:
            await app.writing.add(USER, AddRequest(content=f"用户的爱好之一是{hobby}", category=Category.context))
        text = await export_text(app)
    async with PocketMem(make_settings(tmp_path, db=tmp_path / "b.db", max_active=3), clock=clock) as small:
        report = await small.exporter.import_lines(text.splitlines())
        assert report.imported.memory == 4 and len(report.evicted) == 1
        assert (await small.stats(USER))["active"] == 3


@pytest.mark.backends
async def test_markdown_export_writes_the_four_profile_files(app, tmp_path):
    await app.writing.add(USER, AddRequest(content="用户叫小林", scores={"persistence": 1}))
    await app.writing.add(USER, AddRequest(content="pocketmem 项目：完成了存储层", category=Category.project))
    await app.writing.add(USER, AddRequest(content="改配置前先备份", category=Category.lesson))
    await app.profile.update(USER, {"role": "编程搭档", "tone": "简洁"}, {"name": "小林"}, confirmed=True)
    out = tmp_path / "cards"
    written = await app.profile_files.export_markdown(USER, out)
    assert [p.name for p in written] == ["User.md", "Persona.md", "Project.md", "Insights.md"]
    text = {p.name: p.read_text(encoding="utf-8") for p in written}
    assert "用户叫小林" in text["User.md"] and "编程搭档" in text["Persona.md"]
    assert "完成了存储层" in text["Project.md"] and "# 经验\n\n## 常用经验\n" in text["Insights.md"]  # as the resources
    assert sorted(p.name for p in out.iterdir()) == sorted(text)  # no temporary files left


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_one(tmp_path):
    target = tmp_path / "User.md"
    target.write_text("old card", encoding="utf-8")

    with pytest.raises(TypeError):
        write_atomically(target, 42)  # type: ignore[arg-type]  # fails inside the write, after the temporary file
    assert target.read_text(encoding="utf-8") == "old card"
    assert [p.name for p in tmp_path.iterdir()] == ["User.md"]


@pytest.mark.backends
@pytest.mark.slow
def test_cli_export_and_import(tmp_path, backend, make_settings):
    import anyio

    async def seed() -> None:
        async with PocketMem(make_settings(tmp_path), clock=FixedClock(START)) as app:
            await app.writing.add(USER, AddRequest(content="用户不喜欢香菜", keywords=["香菜"]))
            await app.writing.add(USER, AddRequest(content="用户叫小林", scores={"persistence": 1}))

    anyio.run(seed)

    def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**checkout_env(), "POCKETMEM_HOME": str(home), "POCKETMEM_TZ": "Asia/Shanghai",
               **backend.env(home)}
        return subprocess.run([sys.executable, "-m", "pocketmem", *args], env=env, capture_output=True,
                              text=True, timeout=120)

    export_file = tmp_path / "backup.jsonl"
    out = run(tmp_path / "home", "export", "-o", str(export_file), "--events")
    assert out.returncode == 0, out.stderr
    assert "exported 2 memories of 1 user" in out.stderr
    stdout = run(tmp_path / "home", "export")
    assert [json.loads(x)["type"] for x in stdout.stdout.splitlines()].count("memory") == 2

    fresh = tmp_path / "fresh"
    first = run(fresh, "import", str(export_file))
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["imported"]["memory"] == 2
    second = run(fresh, "import", str(export_file))
    assert json.loads(second.stdout)["imported"] == {k: 0 for k in json.loads(second.stdout)["imported"]}
    stats = json.loads(run(fresh, "stats").stdout)
    assert (stats["active"], stats["core"]) == (2, 1)

    async def vector_rows() -> int:  # the command embedded what it imported (with its embedder) before it ended
        app = PocketMem(make_settings(tmp_path, home=fresh, db=fresh / "memory.db"))
        await app.open()
        try:
            return int((await app.store.health())["vector_rows"])
        finally:
            await app.close()

    assert anyio.run(vector_rows) == 2

    cards = run(tmp_path / "home", "export", "--markdown", str(tmp_path / "md"))
    assert cards.returncode == 0 and cards.stdout == ""
    assert "用户叫小林" in (tmp_path / "md" / "User.md").read_text(encoding="utf-8")

    missing = run(fresh, "import", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "FILE: cannot read" in missing.stderr
