"""A row export reads that cannot be decoded (a pending candidate or an event that is not JSON, an event kind no
version writes, a profile revision, a tombstone's reason, a use counter, a content revision) makes export leave its
user out and name it; `pocketmem doctor` lists it under `unreadable_rows` with the same rule export applies (one
mapper per table, store/sql/records.py), and `--repair` mends it (a tombstone's reason) or sets it aside (the row
removed, its stored values kept in a `set_aside` event), so that export works after it and every memory is still
exported. SQLite files are damaged with sqlean through the command line; the kinds PostgreSQL's types allow are
tried on both backends in process."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.models import DeleteReason
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest

from .helpers import START, damage
from .servers import cli

pytestmark = [pytest.mark.anyio]
USER = "global"


async def a_store(app: PocketMem) -> dict[str, str]:
    """A memory, a core memory patched (a revision), one forgotten (a tombstone), a pending one, a profile change
    (a profile revision), a recall that used a memory (a use counter), and their events."""
    add = app.writing.add
    ids = {"fact": (await add(USER, AddRequest(content="用户住在杭州"))).memory_id}
    ids["core"] = (await add(USER, AddRequest(content="用户不吃香菜", scores={"persistence": 1}))).memory_id
    await app.patching.patch_core(USER, ids["core"], "也不吃葱", "append", None)
    ids["gone"] = (await add(USER, AddRequest(content="用户想学滑雪"))).memory_id
    await app.trash.forget(USER, ids["gone"], None)
    ids["pending"] = str((await add(USER, AddRequest(content="用户可能在学吉他", confidence=0.7))).pending_id)
    await app.profile.update(USER, {"tone": "简洁"}, None)
    await app.retrieval.recall(USER, RecallRequest(query="住在哪里", keywords=["杭州"], used=[ids["fact"]]))
    return ids


async def sql(app: PocketMem, statement: str, *params: object) -> None:
    """A change through the store's own connection, on either backend: {p} a placeholder, {j} one read as JSON."""
    async with app.store.write() as tx:
        d = tx.dialect
        await tx.execute(d.sql(statement.replace("{j}", "{p}" + d.json_cast)), params)


async def exported(app: PocketMem) -> tuple[list[dict], list[dict[str, str]]]:
    out, skipped = io.StringIO(), []
    await app.exporter.export(out, None, events=True, skipped=skipped)
    return [json.loads(line) for line in out.getvalue().splitlines()], skipped


@pytest.mark.backends
async def test_rows_export_reads_are_listed_by_the_doctor_and_repair_lets_export_work(app):
    ids = await a_store(app)
    before = {r["id"] for r in (await exported(app))[0] if r["type"] == "memory"}
    await sql(app, "update memory_pending set candidate = {j} where id = {p}", '{"category": "fact"}', ids["pending"])
    await sql(app, "update memory_events set kind = 'added' where id = (select min(id) from memory_events)")
    await sql(app, "update memory_tombstones set reason = 'bogus'")
    await sql(app, "update profile_revisions set previous = {j}", "[1]")

    rows, skipped = await exported(app)
    assert {r["type"] for r in rows} == {"header"} and {s["user_id"] for s in skipped} == {USER}
    report = await app.doctor()
    listed = {r["table"]: r for r in report["unreadable_rows"]}
    assert not report["ok"] and set(listed) == {
        "memory_pending", "memory_events", "memory_tombstones", "profile_revisions"
    }, report["unreadable_rows"]
    assert listed["memory_pending"]["id"] == ids["pending"] and skipped[0]["table"] in listed

    repaired = await app.doctor(repair=True)
    assert repaired["ok"], repaired["problems"]
    assert {r["table"]: r["repaired_to"] for r in repaired["unreadable_rows"]} == {
        "memory_pending": {"set_aside_in": "memory_events"},
        "memory_events": {"set_aside_in": "memory_events"},
        "memory_tombstones": {"reason": "user_delete"},
        "profile_revisions": {"set_aside_in": "memory_events"},
    }
    assert (await app.doctor())["unreadable_rows"] == []
    rows, skipped = await exported(app)
    assert skipped == [] and {r["id"] for r in rows if r["type"] == "memory"} == before  # no memory lost
    assert [t["reason"] for t in rows if t["type"] == "tombstone"] == [DeleteReason.user_delete]
    aside = {e["payload"]["table"]: e["payload"] for e in rows if e["type"] == "event" and e["kind"] == "set_aside"}
    assert set(aside) == {"memory_pending", "memory_events", "profile_revisions"}
    assert aside["memory_pending"]["id"] == ids["pending"] and aside["memory_events"]["row"]["kind"] == "added"
    assert json.loads(aside["memory_pending"]["row"]["candidate"]) == {"category": "fact"}  # kept as stored


DAMAGE = {  # kinds of damage only SQLite's types allow, as the command line meets them
    "memory_pending": "update memory_pending set candidate = '{{{' where confidence = 0.7",
    "memory_events": "update memory_events set payload = '{{' where id = (select max(id) from memory_events)",
    "memory_usage": "update memory_usage set used_count = 'lots'",
    "memory_revisions": "update memory_revisions set mode = x'00ff'",
}


@pytest.mark.slow
def test_export_leaves_out_a_user_until_doctor_repair_sets_the_rows_aside(tmp_path, backend, make_settings):
    import asyncio

    settings = make_settings(tmp_path)

    async def seed() -> None:
        async with PocketMem(settings, clock=FixedClock(START)) as app:
            await a_store(app)

    asyncio.run(seed())
    for statement in DAMAGE.values():
        damage(settings.db_path, statement)
    out = tmp_path / "export.jsonl"
    done = cli(backend, settings.home, "export", "--events", "-o", str(out))
    assert done.returncode == 1 and "exported 0 memories of 0 users" in done.stderr, done.stderr
    assert f"left out user {USER}: " in done.stderr
    assert "run `pocketmem doctor --repair`, then export again" in done.stderr
    doctor = cli(backend, settings.home, "doctor")
    named = sorted(r["table"] for r in json.loads(doctor.stdout)["unreadable_rows"])
    assert doctor.returncode == 1 and named == sorted(DAMAGE), doctor.stdout

    repaired = cli(backend, settings.home, "doctor", "--repair")
    assert repaired.returncode == 0, repaired.stdout
    done = cli(backend, settings.home, "export", "--events", "-o", str(out))
    assert done.returncode == 0 and done.stderr.startswith("exported 3 memories of 1 user"), done.stderr
    rows = [json.loads(line) for line in Path(out).read_text(encoding="utf-8").splitlines()]
    aside = [e["payload"] for e in rows if e["type"] == "event" and e["kind"] == "set_aside"]
    assert sorted(p["table"] for p in aside) == sorted(DAMAGE)
    assert next(p for p in aside if p["table"] == "memory_pending")["row"]["candidate"] == "{{{"
    assert cli(backend, settings.home, "doctor").returncode == 0
