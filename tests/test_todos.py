"""Todos: reminders in recall when due, overdue in the user card, completing and reopening."""

from __future__ import annotations

import io
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.errors import Conflict
from pocketmem.base.models import Category
from pocketmem.mcp.server import build_server
from pocketmem.service.recall.retrieval import RecallRequest
from pocketmem.service.writing.add_request import AddRequest

from .asgi import Browser, make_browser
from .helpers import SHANGHAI, START, call

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"
LOS_ANGELES = ZoneInfo("America/Los_Angeles")


async def todo(app: PocketMem, content: str, **kw) -> str:
    result = await app.writing.add(USER, AddRequest(content=content, category=Category.todo, **kw))
    assert result.status == "stored"
    return result.memory_id


async def recall(app: PocketMem, query: str = "今天有什么安排"):
    return await app.retrieval.recall(USER, RecallRequest(query=query))


async def test_a_reminder_appears_when_due_and_turns_overdue(app, clock):
    report = await todo(
        app, "周五前把季度报告发给王总", due_at=START + timedelta(days=2), remind_at=START + timedelta(days=1)
    )
    undated = await todo(app, "找时间给猫买猫砂")
    assert (await recall(app)).reminders == []

    clock.advance(days=1)
    result = await recall(app)
    assert [(r.id, r.overdue, r.label) for r in result.reminders] == [(report, False, "截止 2026-11-28 10:00")]
    assert result.injection.splitlines()[0] == "提醒（截止 2026-11-28 10:00）“周五前把季度报告发给王总”"

    clock.advance(days=1, minutes=1)
    result = await app.retrieval.recall(USER, RecallRequest(query="what's on today"))
    assert [(r.id, r.overdue) for r in result.reminders] == [(report, True)]
    assert result.injection.splitlines()[0] == "Reminder (overdue since 2026-11-28 10:00): “周五前把季度报告发给王总”"
    card = await app.user_card(USER)
    assert "周五前把季度报告发给王总（已逾期：截止 2026-11-28 10:00）" in card
    assert "- 找时间给猫买猫砂" in card
    assert undated not in {r.id for r in result.reminders}


async def test_due_at_alone_reminds_at_the_due_time(app, clock):
    memory_id = await todo(app, "交房租", due_at=START + timedelta(hours=3))
    clock.advance(hours=2, minutes=59)
    assert (await recall(app)).reminders == []
    clock.advance(minutes=1)
    assert [r.id for r in (await recall(app)).reminders] == [memory_id]


async def test_a_time_without_offset_is_the_users_wall_clock(app):
    memory_id = await todo(app, "周五晚上六点前交报告", due_at=datetime(2026, 11, 28, 18, 0))
    async with app.store.read() as r:
        memory = await r.get_memory(USER, memory_id)
    assert memory.due_at == datetime(2026, 11, 28, 18, 0, tzinfo=SHANGHAI)


async def test_completing_a_todo_through_the_client(client: Client, clock):
    added = await client.call_tool("add_memory", {
        "content": "给妈妈打电话问体检结果", "category": "todo", "keywords": ["妈妈", "体检"],
        "due_at": (START + timedelta(hours=1)).isoformat(),
    })
    todo_id = added.structured_content["memory_id"]
    clock.advance(hours=2)
    due = await client.call_tool("recall_memories", {"query": "今天要做什么"})
    assert [r["id"] for r in due.structured_content["reminders"]] == [todo_id]
    assert "给妈妈打电话问体检结果" in (await client.read_resource("memory://user-card")).contents[0].text

    done = await client.call_tool("mark_memory", {"memory_id": todo_id, "action": "complete"})
    assert not done.is_error and done.structured_content["memory"]["completed_at"] is not None
    after = await client.call_tool("recall_memories", {"query": "妈妈的体检结果出来了吗", "keywords": ["妈妈", "体检"]})
    assert after.structured_content["reminders"] == []
    assert [m["id"] for m in after.structured_content["memories"]] == [todo_id]  # still recallable, as done
    assert after.structured_content["memories"][0]["completed_at"] is not None
    assert after.structured_content["injection"] == "今天的对话摘要（已完成）“给妈妈打电话问体检结果”"
    assert "给妈妈打电话" not in (await client.read_resource("memory://user-card")).contents[0].text

    again = await client.call_tool("mark_memory", {"memory_id": todo_id, "action": "complete"})
    assert again.is_error and "already completed" in again.content[0].text
    reopened = await client.call_tool("mark_memory", {"memory_id": todo_id, "action": "reopen"})
    assert reopened.structured_content["memory"]["completed_at"] is None
    back = await client.call_tool("recall_memories", {"query": "今天要做什么"})
    assert [r["id"] for r in back.structured_content["reminders"]] == [todo_id]


async def test_only_active_todos_can_be_completed(app):
    fact = (await app.writing.add(USER, AddRequest(content="用户在杭州工作"))).memory_id
    with pytest.raises(Conflict, match="not a todo"):
        await app.todos.set_done(USER, fact, True)
    chore = await todo(app, "取快递")
    await app.trash.forget(USER, chore, None)
    with pytest.raises(Conflict, match="trashed"):
        await app.todos.set_done(USER, chore, True)


@pytest.mark.sqlite_only
@pytest.mark.parametrize("order", ["asc", "desc"])
async def test_reminders_are_one_indexed_range_scan(app, order):
    """Recall must stay fast: the due-todo query walks the partial index, never the whole table, either way."""
    async with app.store.read() as r:
        plan = await r.fetch_all(  # checking the SQL plan of the store's own query
            "explain query plan select id from memories where user_id = ? and status = 'active' and category = 'todo' "
            "and completed_at is null and (expires_at is null or expires_at > ?) and coalesce(remind_at, due_at) <= ? "
            f"order by coalesce(remind_at, due_at) {order}, id {order} limit 3",
            ("global", "2026-11-26T00:00:00.000Z", "2026-11-26T00:00:00.000Z"),
        )
    details = " ".join(str(row[-1]) for row in plan)
    assert "memories_open_todos" in details and "SCAN memories" not in details


async def test_the_card_keeps_open_todos_however_many_are_done(app, clock):
    for i in range(25):
        done = await todo(app, f"已办事项 {i}")
        await app.todos.set_done(USER, done, True)
    await todo(app, "预约牙医", due_at=START + timedelta(days=3))
    assert "预约牙医" in await app.user_card(USER)


async def test_an_overdue_todo_beyond_the_reminders_shown_keeps_its_mark_wherever_it_is_shown(app, clock):
    """Five overdue todos: three fill the reminders; the one asked about is recalled as a line of its own and
    still says it is overdue, in recall's injection and in memory_context (both its recalled and recent lines)."""
    for day, content in enumerate(["给奶奶买降压药", "续交车险", "交水费", "交电费", "交燃气费"], start=10):
        await todo(app, content, keywords=["降压药", "奶奶"] if "奶奶" in content else [],
                   due_at=datetime(2026, 11, day, 18, 0, tzinfo=SHANGHAI))
    result = await app.retrieval.recall(USER, RecallRequest(query="奶奶的药买了吗", keywords=["降压药", "奶奶"]))
    assert len(result.reminders) == 3 and "给奶奶买降压药" not in {r.content for r in result.reminders}
    assert "提醒（已逾期：截止 2026-11-10 18:00）“给奶奶买降压药”" in result.injection
    package = await app.context.build(USER, "奶奶的药买了吗")
    assert "提醒（已逾期：截止 2026-11-10 18:00）“给奶奶买降压药”" in package.text
    assert "提醒（已逾期：截止 2026-11-11 18:00）“续交车险”" in package.text


async def test_the_card_counts_every_open_todo_and_keeps_room_for_the_most_urgent(app, clock, settings):
    """30 long core memories fill the 2 KB card; 30 todos, of which the card reads the first 20."""
    for i in range(30):
        core = f"核心{i}：" + "用户非常在意这件事情并且反复强调过很多次" * 5
        await app.writing.add(USER, AddRequest(content=core, scores={"persistence": 1.0}))
    for i in range(30):
        await todo(app, f"待办{i}：" + "记得去办理这件事" * 3, due_at=START + timedelta(days=1 + i))
    await todo(app, "交物业费", due_at=START - timedelta(days=2))  # the most urgent: overdue
    async with Client(build_server(settings, app=app)) as client:
        card = (await client.read_resource("memory://user-card")).contents[0].text
        listed = await client.call_tool("list_memories", {"category": "todo"})
    assert listed.structured_content["total"] == 31
    assert len(card.encode()) <= 2048
    core_shown = card.count("- 核心")
    assert 0 < core_shown < 30 and f"- … +{30 - core_shown}\n" in card
    assert card.endswith("## 待办\n- 交物业费（已逾期：截止 2026-11-24 10:00）\n- … +30\n"), card


async def test_the_card_counts_core_memories_past_those_it_reads(app, settings):
    await app.writing.add_many(USER, [AddRequest(content=f"核心{i}", scores={"persistence": 1.0}) for i in range(61)])
    async with Client(build_server(settings, app=app)) as client:
        card = (await client.read_resource("memory://user-card")).contents[0].text
    assert card.count("- 核心") == 60 and card.endswith("- 核心59\n- … +1\n"), card


async def test_a_todo_that_has_just_come_due_is_reminded_however_many_older_ones_are_overdue(app, clock):
    """Four todos overdue for weeks would fill the three reminders for good; the one that came due last comes
    first, and the old ones stay on the user card, marked overdue."""
    for day, content in enumerate(["交水费", "交电费", "交燃气费", "续交车险"], start=1):
        await todo(app, content, due_at=datetime(2026, 11, day, 18, 0, tzinfo=SHANGHAI))
    dentist = await todo(app, "带女儿去看牙医", due_at=START + timedelta(hours=2))
    clock.advance(hours=2)
    result = await recall(app)
    assert [(r.content, r.overdue) for r in result.reminders] == [
        ("带女儿去看牙医", False), ("续交车险", True), ("交燃气费", True)
    ]
    assert result.reminders[0].id == dentist
    assert result.injection.splitlines()[0] == "提醒（截止 2026-11-26 12:00）“带女儿去看牙医”"
    assert "提醒（截止 2026-11-26 12:00）“带女儿去看牙医”" in (await app.context.build(USER, "你好")).text
    card = await app.user_card(USER)
    assert "交水费（已逾期：截止 2026-11-01 18:00）" in card and "交电费（已逾期：截止 2026-11-02 18:00）" in card


async def test_a_todo_past_its_expires_at_is_not_reminded(app, clock):
    """Recall hides a memory past its expires_at until maintenance moves it to the trash; its reminder goes too."""
    await todo(app, "今晚八点前交停车费", due_at=START + timedelta(hours=1), expires_at=START + timedelta(hours=3))
    clock.advance(hours=2)
    assert [r.content for r in (await recall(app)).reminders] == ["今晚八点前交停车费"]
    clock.advance(hours=2)
    result = await recall(app)
    assert result.reminders == [] and "停车费" not in result.injection
    assert "停车费" not in (await app.context.build(USER, "你好")).text


async def test_an_expired_todo_leaves_every_list_of_open_todos(tmp_path, make_settings, clock):
    """Past its expires_at a todo is shown nowhere, as recall and memory_context already hid it: not on the user
    card, not in User.md (nor counted in its `+N`), not on the page's todo list."""
    clock.set(datetime(2026, 5, 1, 9, 0, tzinfo=SHANGHAI))
    settings = make_settings(tmp_path, profile_files="on")
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        call = "中午12点前给妈妈回电话。"
        await client.call_tool("add_memory", {
            "content": call, "category": "todo", "due_at": "2026-05-01T12:00", "expires_at": "2026-05-01T14:00",
        })
        for i in range(20):
            await todo(app, f"待办事项{i}：记得处理", due_at=datetime(2026, 5, 2 + i, 18, 0, tzinfo=SHANGHAI))
        card = (await client.read_resource("memory://user-card")).contents[0].text
        assert f"- {call}（截止 " in card
        clock.set(datetime(2026, 5, 1, 16, 0, tzinfo=SHANGHAI))
        card = (await client.read_resource("memory://user-card")).contents[0].text
        user_md = await app.profile_files.render_user(USER)
        async with make_browser(app) as http:
            page = await Browser(http).get("/todos")
        overview = await app.browse.todos(USER)
    assert call not in card and "- 待办事项0：记得处理（截止 " in card, card
    assert call not in user_md and user_md.count("- 待办事项") == 20 and "- … +" not in user_md, user_md
    assert page.status_code == 200 and call not in page.text and "待办事项0" in page.text
    assert len(overview.todos) == 20 and not overview.due and not overview.overdue


async def test_a_todo_due_on_a_date_is_due_all_that_day_and_shown_as_that_date(tmp_path, make_settings, clock):
    """A date alone (what the extraction rubric has the model write) is due by the end of that day in the user's
    zone: reminded from the day's start, overdue only from the next day, labelled with the date alone on every
    surface; export and import keep it."""
    clock.set(datetime(2026, 11, 27, 9, 0, tzinfo=LOS_ANGELES))
    settings = make_settings(tmp_path, tz="America/Los_Angeles", profile_files="on")
    notes, venue = "Send the release notes to QA.", "Book the venue for the team party."
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        added = await call(client, "add_memory", {"content": notes, "category": "todo", "due_at": "2026-11-27"})
        await call(client, "add_memory", {"content": venue, "category": "todo", "due_at": "2026-11-28"})
        [shown] = (await call(client, "list_memories", {"text": "release notes"}))["items"]
        assert (shown["due_at"], shown["remind_at"]) == ("2026-11-27T23:59:59-08:00", "2026-11-27T00:00:00-08:00")
        today = await call(client, "recall_memories", {"query": "What do I have to do today?"})
        assert [(r["id"], r["label"], r["overdue"]) for r in today["reminders"]] == [
            (added["memory_id"], "due 2026-11-27", False)
        ]
        assert today["injection"].splitlines()[0] == f"Reminder (due 2026-11-27): “{notes}”"
        card = (await client.read_resource("memory://user-card")).contents[0].text
        assert f"- {notes} (due 2026-11-27)\n- {venue} (due 2026-11-28)\n" in card, card
        assert f"- {notes} — due 2026-11-27\n" in await app.profile_files.render_user(USER)
        async with make_browser(app) as http:
            page = await Browser(http).get("/todos")
        assert '<time datetime="2026-11-27">2026-11-27</time>' in page.text

        clock.set(datetime(2026, 11, 27, 23, 59, 30, tzinfo=LOS_ANGELES))
        late = await call(client, "recall_memories", {"query": "What do I have to do today?"})
        assert [(r["label"], r["overdue"]) for r in late["reminders"]] == [("due 2026-11-27", False)]
        clock.set(datetime(2026, 11, 28, 0, 0, 1, tzinfo=LOS_ANGELES))
        next_day = await call(client, "recall_memories", {"query": "What do I have to do today?"})
        assert [(r["content"], r["label"], r["overdue"]) for r in next_day["reminders"]] == [
            (venue, "due 2026-11-28", False), (notes, "overdue since 2026-11-27", True)
        ]
        exported = io.StringIO()
        await app.exporter.export(exported)
    async with PocketMem(make_settings(tmp_path, db=tmp_path / "b.db", tz="America/Los_Angeles"), clock=clock) as copy:
        await copy.exporter.import_lines(exported.getvalue().splitlines())
        assert f"- {notes} (overdue since 2026-11-27)\n- {venue} (due 2026-11-28)\n" in await copy.user_card(USER)


@pytest.mark.parametrize(("lang", "content", "message", "not_yet", "due"), [
    ("zh", "给猫买猫粮", "猫粮买了吗", "今天的对话摘要（截止 2026-11-29）“给猫买猫粮”",
     "提醒（截止 2026-11-29）“给猫买猫粮”"),
    ("en", "Buy cat food for Bai", "Did I buy the cat food?", "today (due 2026-11-29): “Buy cat food for Bai”",
     "Reminder (due 2026-11-29): “Buy cat food for Bai”"),
])
async def test_a_todo_not_yet_due_is_no_reminder_anywhere(tmp_path, make_settings, clock, lang, content, message,
                                                         not_yet, due):
    """recall's reminders, its injection and memory_context follow one rule of what is due: a todo due in three
    days is recalled with its due time, and called a reminder nowhere until its day comes."""
    settings = make_settings(tmp_path, locale=lang)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        await call(client, "add_memory", {"content": content, "category": "todo", "due_at": "2026-11-29",
                                          "keywords": ["猫粮", "cat food"]})
        recalled = await call(client, "recall_memories", {"query": message})
        text = (await client.get_prompt("memory_context", {"message": message})).messages[0].content.text
        unrelated = (await client.get_prompt("memory_context", {"message": "今天天气不错"})).messages[0].content.text
        assert recalled["reminders"] == [] and [m["content"] for m in recalled["memories"]] == [content]
        assert recalled["injection"] == not_yet
        assert not_yet in text and f"{not_yet}\n" in unrelated + "\n"  # a recalled line and a recent one alike
        clock.set(datetime(2026, 11, 29, 0, 0, 1, tzinfo=SHANGHAI))
        recalled = await call(client, "recall_memories", {"query": message})
        text = (await client.get_prompt("memory_context", {"message": message})).messages[0].content.text
        assert [r["content"] for r in recalled["reminders"]] == [content]
        assert recalled["injection"] == due and text.count(content) == 1 and due in text
