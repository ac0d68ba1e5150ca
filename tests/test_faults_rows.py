"""One stored row that cannot be read (a memory's keywords that are not JSON, a category or a number no version
writes, a profile section or a profile file's earlier texts that are not JSON) is left out of its user's reads with
a warning: recall, add, listing and the profile files go on without it. `pocketmem doctor` lists it under
`unreadable_rows` and `--repair` mends it, keeping the memory's text; `maintain` logs a failed step in one line and
exits 1. SQLite files are damaged with sqlean, as a hand edit or another program would; the kinds of damage
PostgreSQL's types allow are tried on both backends."""

from __future__ import annotations

import io
import json
import logging

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.clock import FixedClock
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest

from .helpers import START, call, damage
from .servers import cli

pytestmark = [pytest.mark.anyio]
USER = "global"
CORE = {"content": "用户不吃香菜", "category": "preference", "keywords": ["香菜"], "scores": {"persistence": 1.0}}


async def sql(app: PocketMem, statement: str, *params: object) -> None:
    """The same through the store's own connection ({p}: the backend's placeholder), for both backends."""
    async with app.store.write() as tx:
        await tx._exec(tx.dialect.sql(statement), params)  # noqa: SLF001


@pytest.mark.parametrize(
    ("column", "value", "why"),
    [
        ("keywords", '["a",', "keywords: not JSON"),
        ("category", "bogus", "category: 'bogus' is not a category"),
        ("importance", "high", "importance: 'high' is not a number"),
    ],
)
async def test_an_unreadable_core_memory_is_left_out_of_every_read_and_repair_mends_it(
    app, client, settings, caplog, column, value, why
):
    core = await call(client, "add_memory", CORE)
    other = await call(client, "add_memory", {"content": "用户住在杭州", "category": "fact"})
    damage(settings.db_path, f"update memories set {column} = ? where id = ?", value, core["memory_id"])

    with caplog.at_level(logging.WARNING):
        recalled = await call(client, "recall_memories", {"query": "用户不吃什么", "keywords": ["香菜"]})
        added = await call(client, "add_memory", {"content": "用户喜欢爬山", "category": "preference", "confidence": 1})
        again = await call(client, "add_memory", CORE)  # the duplicate check goes on without the bad row
        listed = await call(client, "list_memories", {})
    assert core["memory_id"] not in [m["id"] for m in recalled["memories"]]
    assert added["status"] == "stored" and again["status"] == "stored"
    assert core["memory_id"] not in [m["id"] for m in listed["items"]] and other["memory_id"] in [
        m["id"] for m in listed["items"]
    ]
    warned = [r.getMessage() for r in caplog.records if core["memory_id"] in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("left out: memories row") and why in warned[0], warned

    report = await app.doctor()
    assert not report["ok"] and report["unreadable_rows"] == [
        {"table": "memories", "user_id": USER, "id": core["memory_id"], "why": report["unreadable_rows"][0]["why"]}
    ]
    assert report["unreadable_rows"][0]["why"].startswith(why)
    assert any("unreadable_rows" in p and "doctor --repair" in p for p in report["problems"])

    repaired = await app.doctor(repair=True)
    assert repaired["ok"], repaired["problems"]
    assert [row["id"] for row in repaired["unreadable_rows"]] == [core["memory_id"]]
    assert column in repaired["unreadable_rows"][0]["repaired_to"]
    assert (await app.doctor())["unreadable_rows"] == []
    shown = await call(client, "list_memories", {"text": "香菜"})
    assert core["memory_id"] in [m["id"] for m in shown["items"]]
    mended = next(m for m in shown["items"] if m["id"] == core["memory_id"])
    assert mended["content"] == CORE["content"]


@pytest.mark.backends
async def test_a_memory_row_of_the_wrong_kind_is_left_out_and_mended_on_both_backends(app):
    bad = (await app.writing.add(USER, AddRequest(content="用户对花生过敏", keywords=["花生", "过敏"]))).memory_id
    todo = (await app.writing.add(USER, AddRequest(content="用户要写季度报告", category="todo"))).memory_id
    await sql(app, "update memories set keywords = {p} where id = {p}", '{"a": 1}', bad)
    await sql(app, "update memories set category = {p} where id = {p}", "bogus", todo)

    answer = await app.retrieval.recall(USER, RecallRequest(query="用户对什么过敏", keywords=["花生"]))
    assert bad not in [hit.id for hit in answer.memories]
    assert (await app.writing.add(USER, AddRequest(content="用户喜欢猫"))).status == "stored"
    found = {row["id"]: row["why"] for row in (await app.doctor())["unreadable_rows"]}
    assert found == {bad: "keywords: '{\"a\": 1}' is not a list of texts", todo: "category: 'bogus' is not a category"}

    repaired = {row["id"]: row["repaired_to"] for row in (await app.doctor(repair=True))["unreadable_rows"]}
    assert repaired == {bad: {"keywords": []}, todo: {"category": "fact"}}
    async with app.store.read() as reader:
        mended = {m.id: m for m in await reader.get_memories(USER, [bad, todo])}
    assert (mended[bad].content, mended[bad].keywords) == ("用户对花生过敏", [])
    assert (mended[todo].content, mended[todo].category) == ("用户要写季度报告", "fact")
    answer = await app.retrieval.recall(USER, RecallRequest(query="用户对什么过敏", keywords=["花生"]))
    assert bad in [hit.id for hit in answer.memories]


async def test_a_broken_profile_row_is_left_out_and_repair_keeps_its_text(app, client, settings):
    await call(client, "update_profile", {"identity": {"name": "小王"}, "persona": {"tone": "简洁"}})
    await call(client, "add_memory", CORE)
    damage(settings.db_path, "update profiles set fields = '{bad' where section = 'identity'")

    recalled = await call(client, "recall_memories", {"query": "用户不吃什么", "keywords": ["香菜"]})
    assert recalled["memories"] and recalled["degraded"] is None
    assert (await call(client, "add_memory", {"content": "用户喜欢爬山", "confidence": 1}))["status"] == "stored"
    report = await app.doctor()
    assert [(r["table"], r["id"], r["value"]) for r in report["unreadable_rows"]] == [("profiles", "identity", "{bad")]
    assert not report["ok"]
    skipped: list[dict[str, str]] = []
    await app.exporter.export(io.StringIO(), None, skipped=skipped)  # never half a user
    assert [(s["table"], s["id"]) for s in skipped] == [("profiles", "identity")]

    repaired = await app.doctor(repair=True)
    assert repaired["ok"] and repaired["unreadable_rows"][0]["repaired_to"] == {"fields": {}}
    async with app.store.read() as reader:
        assert (await reader.get_profile(USER, strict=True))["persona"] == {"tone": "简洁"}
        revisions = await reader.list_profile_revisions(USER, 10)
    assert (revisions[0].section, revisions[0].previous, revisions[0].source) == (
        "identity", {"unreadable": "{bad"}, "repair")


@pytest.mark.slow
def test_maintain_takes_in_an_edit_beside_broken_earlier_texts_and_doctor_names_them(tmp_path, backend, make_settings):
    import asyncio

    settings = make_settings(tmp_path)

    async def seed() -> None:
        async with PocketMem(settings, clock=FixedClock(START)) as app:
            await app.writing.add(USER, AddRequest.model_validate(CORE))
            await app.profile_files.sync_all()

    asyncio.run(seed())
    damage(settings.db_path, "update profile_files set earlier = '{bad'")
    user_md = settings.home / USER / "User.md"
    user_md.write_text(user_md.read_text(encoding="utf-8").rstrip("\n") + "\n- 用户周末喜欢钓鱼\n", encoding="utf-8")

    done = cli(backend, settings.home, "maintain")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    files = {f["user_id"]: f for f in json.loads(done.stdout)["profile_files"]}
    assert files[USER]["taken_in"] and not files[USER]["failed"], files
    listed = cli(backend, settings.home, "list", "--text", "钓鱼", "--json")
    assert [m["content"] for m in json.loads(listed.stdout)["items"]] == ["用户周末喜欢钓鱼"]

    doctor = cli(backend, settings.home, "doctor")
    named = {(r["table"], r["id"]) for r in json.loads(doctor.stdout)["unreadable_rows"]}
    assert doctor.returncode == 1 and ("profile_files", "Persona.md") in named, doctor.stdout
    assert cli(backend, settings.home, "doctor", "--repair").returncode == 0
    assert cli(backend, settings.home, "doctor").returncode == 0


@pytest.mark.slow
def test_maintain_names_each_failed_step_in_one_line_and_exits_1(tmp_path, backend, make_settings):
    import asyncio

    settings = make_settings(tmp_path)

    async def seed() -> str:
        async with PocketMem(settings, clock=FixedClock(START)) as app:
            await app.writing.add(USER, AddRequest(content="用户住在杭州"))
            return (await app.writing.add(USER, AddRequest.model_validate(CORE))).memory_id

    core = asyncio.run(seed())
    damage(settings.db_path, "update memories set importance = 'high' where id = ?", core)
    damage(settings.db_path, "drop table profile_files")

    done = cli(backend, settings.home, "maintain")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("pocketmem: ")]
    assert f"pocketmem: maintenance of global: rescored left out memories row {core} (importance: 'high' is not a " \
           "number); run `pocketmem doctor --repair`" in lines
    assert "pocketmem: profile files of global: User.md failed: OperationalError: no such table: profile_files" in lines


# Bytes that are not UTF-8, stored as text by another program (SQLite keeps them as they are).
NOT_UTF8_CONTENT = "e68891fffe20c3"  # 我, then 0xff 0xfe, a space and a cut-off sequence
NOT_UTF8_KEYWORDS = "5b22ff225d"  # ["\xff"]


async def test_text_that_is_not_utf8_is_left_out_and_repair_keeps_its_bytes(app, client, settings, caplog):
    core = await call(client, "add_memory", CORE)
    other = await call(client, "add_memory", {"content": "用户住在杭州", "category": "fact", "keywords": ["杭州"]})
    kept = await call(client, "add_memory", {"content": "用户的猫叫小白", "category": "fact"})
    damage(settings.db_path, f"update memories set content = cast(x'{NOT_UTF8_CONTENT}' as text) where id = ?",
           core["memory_id"])
    damage(settings.db_path, f"update memories set keywords = cast(x'{NOT_UTF8_KEYWORDS}' as text) where id = ?",
           other["memory_id"])
    bad = {core["memory_id"], other["memory_id"]}

    with caplog.at_level(logging.WARNING):
        added = await call(client, "add_memory", {"content": "用户喜欢爬山", "category": "preference", "confidence": 1})
        listed = await call(client, "list_memories", {})
        resource = json.loads((await client.read_resource("memory://memories")).contents[0].text)
        prompt = (await client.get_prompt("memory_context", {"message": "我的猫叫什么"})).messages[0].content.text
    assert added["status"] == "stored"
    assert {m["id"] for m in listed["items"]} == {kept["memory_id"], added["memory_id"]}
    assert {m["id"] for m in resource["items"]} == {kept["memory_id"], added["memory_id"]}
    assert "小白" in prompt
    warned = [r.getMessage() for r in caplog.records if r.getMessage().startswith("left out: memories row")]
    assert any(f"content: not UTF-8 text (stored as x'{NOT_UTF8_CONTENT}')" in line for line in warned), warned

    report = await app.doctor()
    assert not report["ok"] and {(r["id"], r["why"]) for r in report["unreadable_rows"]} == {
        (core["memory_id"], f"content: not UTF-8 text (stored as x'{NOT_UTF8_CONTENT}')"),
        (other["memory_id"], f"keywords: not UTF-8 text (stored as x'{NOT_UTF8_KEYWORDS}')"),
    }
    skipped: list[dict[str, str]] = []
    await app.exporter.export(io.StringIO(), None, skipped=skipped)
    assert {s["id"] for s in skipped} <= bad and skipped  # never half a user

    repaired = {r["id"]: r["repaired_to"] for r in (await app.doctor(repair=True))["unreadable_rows"]}
    assert repaired == {core["memory_id"]: {"content": "我\ufffd\ufffd \ufffd", "keywords": ["香菜"]},
                        other["memory_id"]: {"keywords": []}}
    assert (await app.doctor())["ok"]
    out = io.StringIO()
    skipped = []
    await app.exporter.export(out, None, skipped=skipped, events=True)
    assert skipped == []
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert bad <= {r["id"] for r in lines if r["type"] == "memory"}
    aside = {r["payload"]["id"]: r["payload"]["row"] for r in lines if r.get("kind") == "set_aside"}
    assert aside == {core["memory_id"]: {"content": f"x'{NOT_UTF8_CONTENT}'"},
                     other["memory_id"]: {"keywords": f"x'{NOT_UTF8_KEYWORDS}'"}}
    found = await call(client, "recall_memories", {"query": "杭州", "keywords": ["杭州"]})
    assert other["memory_id"] in [m["id"] for m in found["memories"]]


@pytest.mark.slow
def test_the_command_line_reads_around_text_that_is_not_utf8_and_export_works_after_repair(
    tmp_path, backend, make_settings
):
    import asyncio

    settings = make_settings(tmp_path)

    async def seed() -> str:
        async with PocketMem(settings, clock=FixedClock(START)) as app:
            await app.writing.add(USER, AddRequest(content="用户住在杭州"))
            return (await app.writing.add(USER, AddRequest(content="用户的猫叫小白"))).memory_id

    bad = asyncio.run(seed())
    damage(settings.db_path, f"update memories set content = cast(x'{NOT_UTF8_CONTENT}' as text) where id = ?", bad)

    listed = cli(backend, settings.home, "list", "--json")
    assert listed.returncode == 0 and "OperationalError" not in listed.stderr, listed.stderr
    assert [m["content"] for m in json.loads(listed.stdout)["items"]] == ["用户住在杭州"]
    assert cli(backend, settings.home, "add", "用户喜欢爬山").returncode == 0
    doctor = cli(backend, settings.home, "doctor")
    assert doctor.returncode == 1 and [r["id"] for r in json.loads(doctor.stdout)["unreadable_rows"]] == [bad]
    exported = cli(backend, settings.home, "export", "-o", str(tmp_path / "before.jsonl"))
    assert exported.returncode == 1 and bad in exported.stderr, exported.stderr
    assert cli(backend, settings.home, "doctor", "--repair").returncode == 0
    exported = cli(backend, settings.home, "export", "-o", str(tmp_path / "after.jsonl"))
    assert exported.returncode == 0, exported.stderr
    rows = [json.loads(line) for line in (tmp_path / "after.jsonl").read_text(encoding="utf-8").splitlines()]
    contents = {r["content"] for r in rows if r["type"] == "memory"}
    assert contents == {"用户住在杭州", "用户喜欢爬山", "我\ufffd\ufffd \ufffd"}
