"""Import refuses a row no write path makes (a pending candidate without its text, a trashed memory without its
reason, a usage that is not an object, ids of another user's memories, a header whose version is text), naming the
line and the field; a malformed row already in a store is left out of listings, recall and export, never an error
for the whole user."""

from __future__ import annotations

import io
import json
import logging
from datetime import datetime, timedelta

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.models import Category, Status
from pocketmem.base.results import PendingView
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest

from .servers import run_cli

pytestmark = [pytest.mark.anyio]
USER = "global"


async def export_lines(app: PocketMem, **kw) -> list[dict]:
    buffer = io.StringIO()
    await app.exporter.export(buffer, **kw)
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def text_of(rows: list[dict]) -> list[str]:
    return [json.dumps(row, ensure_ascii=False) for row in rows]


async def sql(app: PocketMem, statement: str, *params: object) -> None:
    """Damage a stored row as an older version or a hand edit could have ({p}: the backend's placeholder, {j}: that
    of a JSON value)."""
    async with app.store.write() as tx:
        await tx._exec(tx.dialect.sql(statement.replace("{j}", tx.dialect.json_p())), params)  # noqa: SLF001


@pytest.mark.backends
async def test_a_pending_row_whose_candidate_no_write_path_makes_is_refused(tmp_path, clock, make_settings):
    async with PocketMem(make_settings(tmp_path, db=tmp_path / "a.db"), clock=clock) as source:
        await source.writing.add(USER, AddRequest(content="用户喜欢猫"))
        await source.writing.add(USER, AddRequest(content="用户可能喜欢爵士乐", confidence=0.7))
        rows = await export_lines(source)
    pending = next(r for r in rows if r["type"] == "pending")
    bad = [
        {**pending, "id": "a" * 32, "candidate": {}},
        {**pending, "id": "b" * 32, "candidate": {**pending["candidate"], "category": "nonsense"}},
        {**pending, "id": "c" * 32, "candidate": {**pending["candidate"], "keywords": "x"}},
    ]
    async with PocketMem(make_settings(tmp_path, db=tmp_path / "b.db"), clock=clock) as target:
        report = await target.exporter.import_lines([*text_of(rows), *text_of(bad)])
        fields = {r.id: r.field for r in report.refused}
        assert fields == {"a" * 32: "candidate.content", "b" * 32: "candidate.category", "c" * 32: "candidate.keywords"}
        assert [r.line for r in report.refused] == [len(rows) + 1, len(rows) + 2, len(rows) + 3]
        assert report.imported.memory == 1 and report.imported.pending == 1
        answer = await target.retrieval.recall(USER, RecallRequest(query="猫"))
        assert [p.content for p in answer.pending_confirmations] == ["用户可能喜欢爵士乐"]


@pytest.mark.backends
async def test_a_malformed_pending_row_in_the_store_is_left_out_and_logged(app, caplog):
    await app.writing.add(USER, AddRequest(content="用户喜欢猫"))
    good = (await app.writing.add(USER, AddRequest(content="用户可能喜欢爵士乐", confidence=0.7))).pending_id
    broken = (await app.writing.add(USER, AddRequest(content="用户可能在学吉他", confidence=0.7))).pending_id
    await sql(app, "update memory_pending set candidate = {j} where id = {p}", "{}", broken)
    with caplog.at_level(logging.WARNING):
        answer = await app.retrieval.recall(USER, RecallRequest(query="猫"))
        listed = await app.listing.list_memories(
            USER, category=None, status="pending", text=None, limit=50, offset=0
        )
    assert [p.pending_id for p in answer.pending_confirmations] == [good]
    assert [item.pending_id for item in listed.items if isinstance(item, PendingView)] == [good] == [
        getattr(item, "pending_id", None) for item in listed.items
    ]
    assert any(broken in r.getMessage() and "candidate.content" in r.getMessage() for r in caplog.records)
    skipped: list[dict[str, str]] = []
    await export_lines(app, skipped=skipped)
    assert skipped == [{"table": "memory_pending", "user_id": USER, "id": broken, "why": skipped[0]["why"]}]


@pytest.mark.backends
async def test_a_trashed_memory_without_its_reason_is_refused_and_missing_times_are_filled(
    tmp_path, clock, make_settings
):
    async with PocketMem(make_settings(tmp_path, db=tmp_path / "a.db"), clock=clock) as source:
        added = [await source.writing.add(USER, AddRequest(content=text)) for text in ("用户喜欢猫", "用户住在杭州")]
        ids = [a.memory_id for a in added]
        for memory_id in ids:
            await source.trash.forget(USER, memory_id, None)
        rows = await export_lines(source)
    memories = {r["id"]: r for r in rows if r["type"] == "memory"}
    memories[ids[0]].update(delete_reason=None)
    memories[ids[1]].update(deleted_at=None, purge_at=None)
    settings = make_settings(tmp_path, db=tmp_path / "b.db")
    async with PocketMem(settings, clock=clock) as target:
        report = await target.exporter.import_lines(text_of(rows))
        assert [(r.id, r.field) for r in report.refused] == [(ids[0], "delete_reason")]
        trash = await target.trash.list_trash(USER, 50, 0)
        assert [item.id for item in trash.items] == [ids[1]]
        item = trash.items[0]
        assert item.deleted_at == datetime.fromisoformat(memories[ids[1]]["updated_at"])
        assert item.purge_at == item.deleted_at + timedelta(days=settings.trash_days)
        clock.advance(days=settings.trash_days + 1)
        await target.maintenance.run()
        async with target.store.read() as reader:
            assert await reader.get_memory(USER, ids[1]) is None


@pytest.mark.backends
async def test_the_trash_lists_a_stored_row_without_its_dates_or_reason(app):
    kept = (await app.writing.add(USER, AddRequest(content="用户喜欢猫"))).memory_id
    odd = (await app.writing.add(USER, AddRequest(content="用户住在杭州", category=Category.fact))).memory_id
    for memory_id in (kept, odd):
        await app.trash.forget(USER, memory_id, None)
    await sql(app, "update memories set deleted_at = null, purge_at = null, delete_reason = null where id = {p}", odd)
    trash = await app.trash.list_trash(USER, 50, 0)
    items = {item.id: item for item in trash.items}
    assert set(items) == {kept, odd} and items[odd].reason is None and items[odd].purge_at is None
    assert items[odd].deleted_at is not None and items[kept].reason is not None


@pytest.mark.backends
async def test_export_leaves_out_only_the_user_with_an_unreadable_event(app):
    await app.writing.add(USER, AddRequest(content="用户喜欢猫"))
    await app.writing.add("other", AddRequest(content="另一个用户喜欢狗"))
    await sql(app, "update memory_events set kind = 'added' where user_id = {p}", USER)
    skipped: list[dict[str, str]] = []
    rows = await export_lines(app, events=True, skipped=skipped)
    assert [(s["table"], s["user_id"]) for s in skipped][:1] == [("memory_events", USER)]
    assert "added" in skipped[0]["why"]
    assert {r["user_id"] for r in rows if r["type"] == "memory"} == {"other"}
    assert any(r["type"] == "event" and r["user_id"] == "other" for r in rows)


@pytest.mark.backends
async def test_ids_of_another_users_memories_are_refused_as_such_not_skipped(app):
    await app.writing.add(USER, AddRequest(content="用户喜欢猫"))
    await app.writing.add(USER, AddRequest(content="用户住在杭州"))
    rows = await export_lines(app)
    moved = [{**r, "user_id": "newcomer"} if "user_id" in r else r for r in rows]
    report = await app.exporter.import_lines(text_of(moved))
    assert report.skipped.memory == 0 and report.imported.memory == 0
    assert [r.field for r in report.refused] == ["id", "id"]
    assert all("another user's memory" in r.why and "new id" in r.why for r in report.refused)
    assert all(r.line == moved.index(next(m for m in moved if m.get("id") == r.id)) + 1 for r in report.refused)
    async with app.store.read() as reader:
        assert [m.status for m in await reader.scan_memories(USER, (Status.active,), None, 10)] == [Status.active] * 2


def test_a_usage_that_is_not_an_object_refuses_its_line(capsys, tmp_path):
    assert run_cli(capsys, tmp_path / "made", "add", "用户住在杭州").returncode == 0
    rows = [json.loads(line) for line in run_cli(capsys, tmp_path / "made", "export").stdout.splitlines()]
    next(r for r in rows if r["type"] == "memory")["usage"] = "x"
    target = tmp_path / "in.jsonl"
    target.write_text("\n".join(text_of(rows)) + "\n", encoding="utf-8")
    done = run_cli(capsys, tmp_path / "home", "import", str(target))
    assert done.returncode == 1 and "unexpected" not in done.stderr, done.stderr
    refused = json.loads(done.stdout)["refused"]
    assert [(r["type"], r["field"]) for r in refused] == [("memory", "usage")] and "object" in refused[0]["why"]


def test_a_header_whose_version_is_text_is_refused_as_not_a_number(capsys, tmp_path):
    assert run_cli(capsys, tmp_path / "made", "add", "用户住在杭州").returncode == 0
    rows = [json.loads(line) for line in run_cli(capsys, tmp_path / "made", "export").stdout.splitlines()]
    rows[0]["version"] = "1"
    target = tmp_path / "in.jsonl"
    target.write_text("\n".join(text_of(rows)) + "\n", encoding="utf-8")
    done = run_cli(capsys, tmp_path / "home", "import", str(target))
    assert done.returncode == 2, done.stderr
    assert "version: must be a whole number" in done.stderr and "newer" not in done.stderr, done.stderr
