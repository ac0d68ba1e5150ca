"""Faults: times. One codec checks every instant in UTC, so nothing stored can fail to read back; `doctor`
names the rows it cannot read and `doctor --repair` mends them; maintenance and export skip and report such
a row instead of stopping for every user. On both backends."""

from __future__ import annotations

import io
import json
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.base.errors import InvalidInput
from pocketmem.base.models import Category, Status
from pocketmem.service.writing.add_request import DATE_FIELDS, AddRequest
from pocketmem.store.types import MemoryFilter

from .helpers import START

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"
POISON = ("1000-01-01", "1000-01-01T00:00:00+01:00", "1000-01-01T07:59:59+08:00")


async def rows(app: PocketMem, user: str = USER) -> list[tuple]:
    async with app.store.read() as r:
        found: list[tuple] = []
        for status in (Status.active, Status.trashed, Status.superseded):
            memories, _ = await r.list_memories(user, MemoryFilter(statuses=(status,), limit=500))
            found += [(m.id, m.content, m.created_at, m.expires_at) for m in memories]
        events = await r.list_events(user, 10_000)
    return sorted(found) + [len(events)]


@pytest.mark.parametrize("field", DATE_FIELDS)
async def test_a_date_whose_utc_year_is_below_1000_is_refused_in_every_field(app, field):
    await app.writing.add(USER, AddRequest(content="用户喜欢香菜"))
    before = await rows(app)
    for value in POISON:  # Asia/Shanghai: 1000-01-01 local is 999-12-31T16:00Z
        if field == "due_at" and value == "1000-01-01":
            continue  # a due date alone is the end of that day: 1000-01-01T15:59:59.999Z, within the years
        with pytest.raises(InvalidInput, match=rf"^{field}: must be between the years 1000 and 9000 in UTC"):
            await app.writing.add(
                USER, AddRequest.model_validate({"content": "用户要交房租", "category": "todo", field: value})
            )
    assert await rows(app) == before
    body = {"content": "用户要交房租", "category": "todo", field: "1000-01-01T08:00+08:00"}
    earliest = AddRequest.model_validate(body)
    if field == "expires_at":  # within the years, but long past: refused as already expired, by name
        with pytest.raises(InvalidInput, match=r"^expires_at: is not in the future"):
            await app.writing.add(USER, earliest)
        return
    assert (await app.writing.add(USER, earliest)).status == "stored"


def instant_values():
    zones = st.sampled_from(["UTC", "Asia/Shanghai", "America/Los_Angeles", "Pacific/Kiritimati", "Etc/GMT+12"])
    return st.tuples(
        st.datetimes(min_value=datetime(999, 12, 25), max_value=datetime(9001, 1, 5)),
        st.one_of(st.none(), zones, st.integers(-14 * 60, 14 * 60)),  # naive, a zone, or a fixed offset (minutes)
        st.sampled_from(DATE_FIELDS),
    )


def as_value(local: datetime, zone: object) -> datetime:
    from datetime import timezone

    if zone is None:
        return local
    if isinstance(zone, int):
        return local.replace(tzinfo=timezone(timedelta(minutes=zone)))
    return local.replace(tzinfo=ZoneInfo(str(zone)))


@settings(
    max_examples=6, derandomize=True, database=None, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(values=st.lists(instant_values(), min_size=1, max_size=12))
async def test_every_accepted_instant_round_trips_through_add_export_and_import(tmp_path, values, make_settings):
    """Accepted iff the UTC year is 1000..9000; an accepted instant reads back the same (to the millisecond)
    from the store, from the export and from a store the export was imported into."""
    shanghai = ZoneInfo("Asia/Shanghai")
    # The last day, so no accepted created_at is "in the future"; the first, so no expires_at has passed.
    latest, earliest = datetime(9000, 12, 31, tzinfo=UTC), datetime(1000, 1, 1, tzinfo=UTC)
    clock = FixedClock(latest)
    key = uuid.uuid4().hex[:8]
    expected: dict[str, tuple[str, datetime]] = {}
    async with PocketMem(make_settings(tmp_path / f"a{key}"), clock=clock) as a:
        for i, (local, zone, field) in enumerate(values):
            value = as_value(local, zone)
            try:
                utc = (value if value.tzinfo else value.replace(tzinfo=shanghai)).astimezone(UTC)
                in_range = 1000 <= utc.year <= 9000
            except OverflowError:
                in_range = False
            body = {"content": f"第{i}条记忆 {key} {local.isoformat()}", "category": Category.todo, field: value}
            if field == "remind_at":
                body["due_at"] = value
            clock.set(earliest if field == "expires_at" else latest)
            try:
                result = await a.writing.add(USER, AddRequest.model_validate(body))
            except InvalidInput as exc:
                assert not in_range or (field == "expires_at" and utc <= earliest), (value, exc)
                assert exc.field in (field, "due_at"), exc
                continue
            assert in_range, value
            assert result.status == "stored"
            expected[result.memory_id] = (field, utc.replace(microsecond=utc.microsecond // 1000 * 1000))
        clock.set(latest)
        out = io.StringIO()
        await a.exporter.export(out, [USER])
        for memory_id, (field, when) in expected.items():
            assert getattr(await stored(a, memory_id), field) == when
    exported = {
        row["id"]: row for row in map(json.loads, out.getvalue().splitlines()) if row["type"] == "memory"
    }
    async with PocketMem(make_settings(tmp_path / f"b{key}"), clock=clock) as b:
        report = await b.exporter.import_lines(out.getvalue().splitlines())
        assert report.refused == [] and report.imported.memory == len(expected)
        for memory_id, (field, when) in expected.items():
            assert datetime.fromisoformat(exported[memory_id][field]) == when
            assert getattr(await stored(b, memory_id), field) == when


async def test_numbers_are_not_dates(client):
    before = await client.call_tool("list_memories", {})
    for field in DATE_FIELDS:
        for number in (-1, 0, 1700000000, 1.5):
            result = await client.call_tool(
                "add_memory", {"content": "用户要交房租", "category": "todo", field: number}
            )
            assert result.is_error, (field, number)
            assert field in result.content[0].text and "not a number" in result.content[0].text
    after = await client.call_tool("list_memories", {})
    assert after.structured_content == before.structured_content


async def test_the_tools_refuse_a_poison_date_and_name_the_field(client):
    result = await client.call_tool("add_memory", {"content": "用户要交房租", "expires_at": "1000-01-01T00:00+01:00"})
    assert result.is_error
    assert "expires_at" in result.content[0].text and "1000" in result.content[0].text
    assert "internal error" not in result.content[0].text


async def stored(app: PocketMem, memory_id: str, user: str = USER):
    async with app.store.read() as r:
        return await r.get_memory(user, memory_id)


# -- rows written before the codec ------------------------------------------------------------
async def poison(app: PocketMem, memory_id: str, column: str, value: str) -> None:
    """Write a stored time the way an older version (or a hand edit) did, behind the store's back."""
    if app.settings.database_url is None:
        with sqlite3.connect(app.settings.db_path) as db:
            db.execute(f"update memories set {column} = ? where id = ?", (value, memory_id))
        return
    import psycopg

    async with await psycopg.AsyncConnection.connect(app.settings.database_url.get_secret_value()) as conn:
        await conn.execute(f"update memories set {column} = %s::timestamptz where id = %s", (value, memory_id))
        await conn.commit()


async def test_doctor_names_a_row_it_cannot_read_and_repair_mends_it(app, clock):
    bad = (await app.writing.add(USER, AddRequest(content="用户喜欢香菜"))).memory_id
    fine = (await app.writing.add(USER, AddRequest(content="用户住在上海"))).memory_id
    episode = (await app.writing.add("bob", AddRequest(content="bob 今天去爬山了", category="episode"))).memory_id
    early = "999-12-31T15:54:17.000Z" if app.settings.database_url is None else "0999-12-31T15:54:17Z"
    await poison(app, bad, "created_at", early)

    report = await app.doctor()
    named = [(p["table"], p["column"], p.get("id"), p["user_id"]) for p in report["unreadable_times"]]
    assert named == [("memories", "created_at", bad, USER)]

    # The user's own tools still work: list, recall, forget.
    listed = await app.listing.list_memories(USER, category=None, status="active", text=None, limit=50, offset=0)
    assert {m.id for m in listed.items} == {bad, fine}
    from pocketmem.service.recall.retrieval import RecallRequest

    assert (await app.retrieval.recall(USER, RecallRequest(query="香菜"))).memories
    # Maintenance goes on for everyone: bob's episode expires after 14 days.
    clock.advance(days=15)
    result = await app.maintenance.run()
    assert episode in next(u for u in result.users if u.user_id == "bob").expired

    repaired = await app.doctor(repair=True)
    assert [p["repaired_to"] for p in repaired["unreadable_times"]] == ["1000-01-01T00:00:00.000Z"]
    assert (await app.doctor())["unreadable_times"] == []
    assert (await stored(app, bad)).created_at == datetime(1000, 1, 1, tzinfo=UTC)
    forgotten = await app.trash.forget(USER, bad, None)
    assert forgotten.item.id == bad


@pytest.mark.sqlite_only
async def test_a_row_that_cannot_be_read_is_skipped_and_reported_not_fatal(app, clock):
    bad = (await app.writing.add(USER, AddRequest(content="用户喜欢香菜"))).memory_id
    await app.writing.add(USER, AddRequest(content="用户住在上海"))
    other = (await app.writing.add("bob", AddRequest(content="bob 今天去爬山了", category="episode"))).memory_id
    await poison(app, bad, "last_active_at", "yesterday-ish")

    out = io.StringIO()
    skipped: list[dict[str, str]] = []
    await app.exporter.export(out, None, skipped=skipped)
    assert skipped == [{"table": "memories", "user_id": USER, "id": bad, "why": "not a stored time: 'yesterday-ish'"}]
    exported = [json.loads(line) for line in out.getvalue().splitlines()]
    assert other in {row.get("id") for row in exported}  # bob is exported in full

    await poison(app, bad, "created_at", "garbage")
    stats = await app.stats(USER)
    assert stats["active"] == 2 and "garbage" in stats["skipped"][0]["why"]
    assert "skipped" not in await app.stats("bob")

    clock.advance(days=15)
    result = await app.maintenance.run()
    mine = next(u for u in result.users if u.user_id == USER)
    assert mine.skipped and "yesterday-ish" in mine.skipped[0]["why"]
    assert mine.skipped[0]["id"] == bad and mine.skipped[0]["user_id"] == USER
    assert other in next(u for u in result.users if u.user_id == "bob").expired

    report = await app.doctor(repair=True)
    assert {(p["column"], p["repaired_to"]) for p in report["unreadable_times"]} == {
        ("last_active_at", None), ("created_at", "2026-12-11T02:00:00.000Z")}
    skipped.clear()
    await app.exporter.export(io.StringIO(), None, skipped=skipped)
    assert skipped == []


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_doctor_and_repair_from_the_command_line(tmp_path, backend, make_settings):
    import asyncio

    from .servers import cli

    home = tmp_path / "home"

    async def seed() -> str:
        async with PocketMem(make_settings(tmp_path), clock=FixedClock(START)) as app:
            return (await app.writing.add("global", AddRequest(content="用户喜欢香菜"))).memory_id

    memory_id = asyncio.run(seed())
    with sqlite3.connect(home / "memory.db") as db:
        db.execute("update memories set created_at = '999-12-31T15:54:17.000Z' where id = ?", (memory_id,))
    checked = cli(backend, home, "doctor")
    assert checked.returncode == 1
    report = json.loads(checked.stdout)
    assert report["unreadable_times"][0]["id"] == memory_id
    assert any("doctor --repair" in p for p in report["problems"])
    assert cli(backend, home, "doctor", "--repair").returncode == 0
    assert cli(backend, home, "doctor").returncode == 0
    assert cli(backend, home, "stats").returncode == 0 and cli(backend, home, "maintain").returncode == 0
