"""remember_conversation with the client's own model: a real MCP client that answers sampling requests
from a script, on both protocol eras (2025-11-25 sends sampling/createMessage mid-call; 2026-07-28 rides
input_required rounds). No API key is configured anywhere in this file."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from zoneinfo import ZoneInfo

import anyio
import pytest
from mcp import Client
from mcp.types import ErrorData

from pocketmem.app import PocketMem
from pocketmem.base.config import Settings
from pocketmem.base.models import Status
from pocketmem.core.rubric import server_rubric
from pocketmem.mcp.server import build_server
from pocketmem.service.writing.add_request import AddRequest

from .scripted_llm import ScriptedSampler, labels, ops, snapshot

pytestmark = pytest.mark.anyio
USER = "global"
SHANGHAI = ZoneInfo("Asia/Shanghai")

CONVERSATION = [
    {"role": "user", "content": "我上个月搬到杭州了，北京的房子也退了。今晚不用加班了！"},
    {"role": "assistant", "content": "恭喜乔迁！今晚好好休息。"},
    {"role": "user", "content": "最近胃炎，医生说不能吃辣。下周二上午十点还有字节的面试。喝点乌龙茶可以吗？"},
    {"role": "assistant", "content": "你一直爱喝乌龙茶，胃炎期间可以泡淡一点，面试加油！"},
]


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@asynccontextmanager
async def connect(app: PocketMem, settings: Settings, mode: str, sampler=None) -> AsyncIterator[Client]:
    async with Client(build_server(settings, app=app), mode=mode, sampling_callback=sampler) as client:
        yield client


async def remember(client: Client, messages=CONVERSATION, **args) -> dict:
    result = await client.call_tool("remember_conversation", {"messages": messages, **args})
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def failure(client: Client, messages=CONVERSATION, **args) -> str:
    result = await client.call_tool("remember_conversation", {"messages": messages, **args})
    assert result.is_error, result.structured_content
    return result.content[0].text


async def add(app: PocketMem, content: str, **kw) -> str:
    result = await app.writing.add(USER, AddRequest(content=content, **kw))
    assert result.memory_id
    return result.memory_id


async def get(app: PocketMem, memory_id: str):
    async with app.store.read() as r:
        return await r.get_memory(USER, memory_id)


@pytest.fixture
async def known(app: PocketMem, clock) -> dict[str, str]:
    ids = {
        "core": await add(app, "你很爱吃辣。", category="preference", scores={"persistence": 1}),
        "home": await add(app, "用户住在北京", keywords=["住址", "城市"]),
        "tea": await add(app, "用户喜欢喝乌龙茶", category="preference", keywords=["茶", "饮料"]),
        "late": await add(app, "用户今晚要加班", category="context"),
        "cat": await add(app, "用户养了一只叫小白的猫", category="person"),
    }
    clock.advance(days=2)  # 2026-11-28: writes of the extraction are told apart from the setup
    return ids


def full_answer(prompt: str) -> str:
    label = labels(prompt)
    return ops(
        {"op": "UPDATE", "memory_id": label["用户住在北京"], "content": "用户 2026 年 10 月搬到杭州住了",
         "confidence": 0.95, "reason": "搬家了"},
        {"op": "PATCH", "memory_id": label["你很爱吃辣。"], "patch": "最近胃炎，医生说暂时不能吃辣", "confidence": 0.9},
        {"op": "ADD", "content": "用户 2026-12-01 上午十点有字节跳动的面试", "category": "todo",
         "scores": {"emotion": 0.5, "info": 0.9, "persistence": 0.2, "judge": 0.8}, "confidence": 0.95,
         "keywords": ["面试", "字节", "interview"], "due_at": "2026-12-01T10:00:00"},
        {"op": "BOOST", "memory_id": label["用户喜欢喝乌龙茶"], "reason": "回复用到了"},
        {"op": "FORGET", "memory_id": label["用户今晚要加班"], "confidence": 0.95, "reason": "不用加班了"},
        {"op": "ADD", "content": "用户可能在注意饮食", "category": "preference", "confidence": 0.7},
        {"op": "SKIP", "reason": "其余是寒暄"},
    )


async def test_every_operation_lands_as_specified(app, settings, clock, known, mode):
    assert settings.llm_model is None and settings.llm_api_key is None  # no API key: the client's model does it
    sampler = ScriptedSampler([full_answer])
    async with connect(app, settings, mode, sampler) as client:
        result = await remember(client)

    assert (result["source"], result["model"], result["attempts"]) == ("sampling", "fake-client-model", 1)
    items = result["items"]
    assert [(i["op"], i["status"]) for i in items] == [
        ("UPDATE", "stored"), ("PATCH", "patched"), ("ADD", "stored"), ("BOOST", "reinforced"),
        ("FORGET", "forgotten"), ("ADD", "pending"), ("SKIP", "skipped"),
    ]
    update, patch, event, boost, forget, pending, _ = items
    # UPDATE: a new memory that supersedes the old one, which stays as history
    assert update["superseded"] == known["home"]
    new_home = await get(app, update["memory_id"])
    old_home = await get(app, known["home"])
    assert new_home.content == "用户 2026 年 10 月搬到杭州住了" and new_home.supersedes == known["home"]
    assert old_home.status == Status.superseded and old_home.valid_until == new_home.valid_from
    assert new_home.keywords == ["住址", "城市"] and new_home.category == old_home.category  # inherited
    # PATCH: the dated parenthesis (docs/extraction.md) on the core memory, previous text kept as a revision
    assert patch["memory_id"] == known["core"]
    assert (await get(app, known["core"])).content == "你很爱吃辣。（2026-11-28：最近胃炎，医生说暂时不能吃辣）"
    one = json.loads(await _read(app, settings, f"memory://memories/{known['core']}"))
    assert one["revisions"][0]["previous_content"] == "你很爱吃辣。"
    # ADD with a due date given without a zone: the user's local time
    stored = await get(app, event["memory_id"])
    assert stored.category.value == "todo" and stored.due_at == datetime(2026, 12, 1, 10, 0, tzinfo=SHANGHAI)
    assert stored.scores.info == 0.9 and stored.source == "remember_conversation"
    # BOOST is the "used" rule (reinforcement.py): counted as used, activity refreshed, judgement +0.1
    tea = await get(app, known["tea"])
    async with app.store.read() as r:
        usage = await r.usage("global", [known["tea"]])
    assert boost["memory_id"] == known["tea"] and usage[known["tea"]].used_count == 1
    assert tea.last_active_at == clock.now()
    # FORGET: in the trash, restorable
    assert (await get(app, known["late"])).status == Status.trashed
    restored = await app.trash.restore(USER, known["late"])
    assert restored.memory.status == Status.active
    # confidence routing: the uncertain one waits for the user
    assert pending["pending_id"] and pending["memory_id"] is None
    listed = await app.listing.list_memories(USER, category=None, status="pending", text=None, limit=10, offset=0)
    assert [p.content for p in listed.items] == ["用户可能在注意饮食"]
    assert result["message"].startswith("2 stored, 1 patched, 1 reinforced, 1 forgotten, 1 pending, 1 skipped.")
    assert (await get(app, known["cat"])).status == Status.active  # untouched

    # What the client's model was asked: the rubric, today's date, the related memories, the conversation.
    [request] = sampler.requests
    assert request.system_prompt == server_rubric("zh", settings)
    prompt = request.messages[0].content.text
    assert prompt.startswith("今天是 2026-11-28（星期六），时区 Asia/Shanghai。")
    assert set(labels(prompt)) >= {"你很爱吃辣。", "用户住在北京", "用户喜欢喝乌龙茶", "用户今晚要加班"}
    assert "（preference，核心，记于 2026-11-26）：\"你很爱吃辣。\"" in prompt
    assert "用户：\"最近胃炎，医生说不能吃辣。" in prompt and "助手：\"你一直爱喝乌龙茶" in prompt
    assert result["related_memories"] == len(labels(prompt))


async def _read(app: PocketMem, settings: Settings, uri: str) -> str:
    async with connect(app, settings, "legacy") as client:
        return (await client.read_resource(uri)).contents[0].text


async def test_a_contradiction_supersedes_instead_of_duplicating(app, settings, known, mode):
    def answer(prompt: str) -> str:
        return ops({"op": "UPDATE", "memory_id": labels(prompt)["用户住在北京"], "content": "用户现在住在杭州",
                    "confidence": 0.95})

    async with connect(app, settings, mode, ScriptedSampler([answer])) as client:
        result = await remember(client, [{"role": "user", "content": "纠正一下，我不住北京，我住杭州。"}])
        recalled = await client.call_tool(
            "recall_memories", {"query": "我住在哪个城市？", "keywords": ["北京", "杭州"]}
        )
    [item] = result["items"]
    contents = [m["content"] for m in recalled.structured_content["memories"]]
    assert "用户现在住在杭州" in contents and "用户住在北京" not in contents
    active = await app.listing.list_memories(USER, category=None, status="active", text="住", limit=50, offset=0)
    assert [m.content for m in active.items] == ["用户现在住在杭州"]
    assert (await get(app, known["home"])).status == Status.superseded and item["superseded"] == known["home"]


async def test_a_malformed_answer_is_retried_with_its_problems(app, settings, known, mode):
    sampler = ScriptedSampler(["好的，我记住了：用户不吃香菜。", ops(
        {"op": "ADD", "content": "用户不吃香菜", "category": "preference", "confidence": 0.95, "keywords": ["香菜"]}
    )])
    async with connect(app, settings, mode, sampler) as client:
        result = await remember(client, [{"role": "user", "content": "我不吃香菜"}])
    assert result["attempts"] == 2 and result["items"][0]["status"] == "stored"
    first, retry = sampler.requests
    assert [m.role for m in retry.messages] == ["user", "assistant", "user"]
    assert retry.messages[0].content.text == first.messages[0].content.text
    assert retry.messages[1].content.text == "好的，我记住了：用户不吃香菜。"
    text = retry.messages[2].content.text
    assert "holds no JSON" in text and '{"operations": [...]}' in text


async def test_a_wrong_operation_is_corrected_on_the_retry(app, settings, known, mode):
    def wrong(prompt: str) -> str:  # UPDATE on a core memory: the retry must say to PATCH it
        return ops(
            {"op": "UPDATE", "memory_id": labels(prompt)["你很爱吃辣。"], "content": "用户不吃辣", "confidence": 0.9}
        )

    def right(prompt: str) -> str:
        return ops(
            {"op": "PATCH", "memory_id": labels(prompt)["你很爱吃辣。"], "patch": "胃炎，暂时不吃辣", "confidence": 0.9}
        )

    sampler = ScriptedSampler([wrong, right])
    async with connect(app, settings, mode, sampler) as client:
        result = await remember(client, [{"role": "user", "content": "我胃炎了，辣的暂时不能吃"}])
    assert "is a core memory; use PATCH" in sampler.requests[1].messages[2].content.text
    assert [i["status"] for i in result["items"]] == ["patched"] and result["attempts"] == 2
    assert (await get(app, known["core"])).content == "你很爱吃辣。（2026-11-28：胃炎，暂时不吃辣）"


async def test_two_bad_answers_fail_and_store_nothing(app, settings, known, mode):
    before = await snapshot(app)
    sampler = ScriptedSampler(["not json", ops({"op": "ADD", "content": "用户不吃香菜", "category": "taste",
                                                "confidence": 0.9})])
    async with connect(app, settings, mode, sampler) as client:
        message = await failure(client, [{"role": "user", "content": "我不吃香菜"}])
    assert "not valid twice" in message and "category" in message and "nothing was stored" in message
    assert "extract_memories" in message
    assert len(sampler.requests) == 2
    assert await snapshot(app) == before


async def test_an_exact_duplicate_is_not_stored_twice(app, settings, known, mode):
    sampler = ScriptedSampler([ops({"op": "ADD", "content": "用户喜欢喝乌龙茶。", "category": "preference",
                                    "confidence": 0.95})])
    async with connect(app, settings, mode, sampler) as client:
        result = await remember(client, [{"role": "user", "content": "我还是最爱乌龙茶"}])
    [item] = result["items"]
    assert item["status"] == "duplicate" and item["memory_id"] == known["tea"]
    async with app.store.read() as r:
        assert await r.count_active(USER) == 5


async def test_english_stays_english_and_chinese_stays_chinese(app, settings, mode):
    sampler = ScriptedSampler([
        ops({"op": "ADD", "content": "The user is allergic to peanuts", "category": "fact", "confidence": 0.95,
             "scores": {"persistence": 1}}),
        ops({"op": "ADD", "content": "用户对花生过敏，吃了会起疹子", "category": "fact", "confidence": 0.95}),
    ])
    async with connect(app, settings, mode, sampler) as client:
        english = await remember(client, [{"role": "user", "content": "Heads up: I'm allergic to peanuts."}])
        chinese = await remember(client, [{"role": "user", "content": "我对花生过敏，吃了会起疹子"}])
    # The English conversation got the English rubric, the Chinese one the Chinese rubric.
    assert sampler.requests[0].system_prompt == server_rubric("en", settings)
    assert sampler.requests[1].system_prompt == server_rubric("zh", settings)
    # Stored exactly as the model wrote it: nothing on our side translates.
    assert (await get(app, english["items"][0]["memory_id"])).content == "The user is allergic to peanuts"
    assert (await get(app, chinese["items"][0]["memory_id"])).content == "用户对花生过敏，吃了会起疹子"


async def test_no_sampling_and_no_model_is_a_clear_error(app, settings, known, mode):
    before = await snapshot(app)
    async with connect(app, settings, mode) as client:
        message = await failure(client)
    assert "no model to ask" in message and "extract_memories" in message and "add_memory" in message
    assert "POCKETMEM_LLM_MODEL" in message and "Nothing was stored" in message
    assert await snapshot(app) == before


@pytest.mark.parametrize(
    ("messages", "hints", "pattern"),
    [
        ([{"role": "user", "content": f"第{i}句"} for i in range(11)], None, "at most 10 items"),
        ([{"role": "assistant", "content": "我来总结一下"}], None, "at least one message with role user"),
        ([{"role": "system", "content": "x"}], None, "role"),
        ([{"role": "user", "content": "   "}], None, r"messages\[0\]\.content: must not be empty"),
        ([{"role": "user", "content": "x" * 4001}], None, "content"),
        (
            [{"role": "user", "content": "记住这个"}],
            {"memory_ids": ["nope"]},
            r"hints\.memory_ids\[0\]: no active memory",
        ),
    ],
)
async def test_bad_input_is_refused_before_any_model_is_asked(app, settings, known, mode, messages, hints, pattern):
    import re

    before = await snapshot(app)
    sampler = ScriptedSampler([])
    async with connect(app, settings, mode, sampler) as client:
        args = {"hints": hints} if hints else {}
        message = await failure(client, messages, **args)
    assert re.search(pattern, message), message
    assert sampler.requests == [] and await snapshot(app) == before


async def test_the_message_limit_is_a_setting(tmp_path, clock, mode, make_settings):
    settings = make_settings(tmp_path, extract_max_messages=2)
    app = PocketMem(settings, clock=clock)
    async with app, connect(app, settings, mode, ScriptedSampler([])) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "remember_conversation")
        assert tool.input_schema["properties"]["messages"]["maxItems"] == 2
        assert "at most 2" in await failure(client, CONVERSATION[:3])


async def test_the_rubric_the_model_gets_follows_the_settings(tmp_path, clock, mode, make_settings):
    settings = make_settings(tmp_path, episode_days=5, trash_days=3, store_threshold=0.95, pending_threshold=0.4)
    app = PocketMem(settings, clock=clock)
    # the model scores as the rubric says: a plain statement, then an inference
    sampler = ScriptedSampler([ops(
        {"op": "ADD", "content": "用户搬到深圳了", "category": "fact", "confidence": 0.95},
        {"op": "ADD", "content": "用户可能换了工作", "category": "fact", "confidence": 0.4},
    )])
    async with app, connect(app, settings, mode, sampler) as client:
        result = await remember(client, [{"role": "user", "content": "我刚搬到深圳了，明天开始上新班"}])
    system = sampler.requests[0].system_prompt
    assert "（5 天后过期）" in system and "3 天内可恢复" in system
    assert "用户明确说的 ≥0.95；你推测的 ≥0.4 且 <0.95（会先请用户确认）；拿不准（<0.4）就别记。" in system
    assert not re.search(r"14 天|7 天|≥0\.9；|0\.6|0\.85|\"confidence\": 0\.9\b", system), system
    assert [item["status"] for item in result["items"]] == ["stored", "pending"]


async def test_hints_reach_the_model(app, settings, known, mode):
    sampler = ScriptedSampler([ops({"op": "SKIP", "reason": "nothing new"})])
    async with connect(app, settings, mode, sampler) as client:
        result = await remember(
            client, [{"role": "user", "content": "嗯嗯"}],
            hints={"note": "用户在回答关于宠物的问题", "keywords": ["宠物"], "memory_ids": [known["cat"]]},
        )
    prompt = sampler.requests[0].messages[0].content.text
    assert "助手的补充说明：\"用户在回答关于宠物的问题\"" in prompt and "用户养了一只叫小白的猫" in labels(prompt)
    assert [i["status"] for i in result["items"]] == ["skipped"] and result["message"] == "1 skipped."


async def test_extraction_does_not_block_recall_or_other_writes(app, settings, known, mode):
    """While the client's model thinks, the store is free: recall and add_memory answer at once."""
    sampler = ScriptedSampler([ops({"op": "ADD", "content": "用户不吃香菜", "category": "preference",
                                    "confidence": 0.95})], gate=anyio.Event())
    done = anyio.Event()
    results: dict = {}
    async with connect(app, settings, mode, sampler) as client:

        async def run() -> None:
            results["remember"] = await remember(client, [{"role": "user", "content": "我不吃香菜"}])
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            with anyio.fail_after(10):
                await sampler.entered.wait()
            recalled = await client.call_tool("recall_memories", {"query": "喝什么茶", "keywords": ["乌龙茶"]})
            added = await client.call_tool("add_memory", {"content": "用户周末喜欢爬山", "category": "preference"})
            assert not done.is_set()  # the extraction is still waiting for its model
            sampler.gate.set()
    assert recalled.structured_content["memories"][0]["id"] == known["tea"]
    assert added.structured_content["status"] == "stored"
    assert results["remember"]["items"][0]["status"] == "stored"


async def test_a_model_that_does_not_answer_in_time_changes_nothing(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, llm_timeout=0.3)
    app = PocketMem(settings, clock=clock)
    async with app:
        await add(app, "用户住在北京")
        before = await snapshot(app)
        sampler = ScriptedSampler([ops({"op": "SKIP"})], gate=anyio.Event())
        async with connect(app, settings, "legacy", sampler) as client:
            message = await failure(client, [{"role": "user", "content": "我搬到杭州了"}])
            sampler.gate.set()
        assert "did not answer within 0.3s (POCKETMEM_LLM_TIMEOUT)" in message and "nothing was stored" in message
        assert await snapshot(app) == before


async def test_a_client_that_refuses_to_sample_changes_nothing(app, settings, known, mode):
    from mcp.shared.exceptions import MCPError

    async def refuse(context, params) -> ErrorData:
        return ErrorData(code=-1, message="User rejected sampling request")

    before = await snapshot(app)
    async with connect(app, settings, mode, refuse) as client:
        if mode == "legacy":  # the server asked and got the refusal: a tool error
            message = await failure(client)
            assert "refused or failed" in message and "User rejected sampling request" in message
        else:  # 2026-07-28: the client refuses the round itself, and the call never comes back
            with pytest.raises(MCPError, match="User rejected sampling request"):
                await client.call_tool("remember_conversation", {"messages": CONVERSATION})
    assert await snapshot(app) == before


async def test_a_store_change_while_the_model_thinks_never_half_applies(app, settings, known):
    """2025-11-25: the answer names a memory that was forgotten meanwhile; the whole batch is refused."""
    sampler = ScriptedSampler([lambda prompt: ops(
        {"op": "ADD", "content": "用户不吃香菜", "category": "preference", "confidence": 0.95},
        {"op": "UPDATE", "memory_id": labels(prompt)["用户住在北京"], "content": "用户住在杭州", "confidence": 0.95},
    )])
    state: dict = {}

    async def forget_meanwhile() -> None:
        await app.trash.forget(USER, known["home"], "user asked")
        state["before"] = await snapshot(app)

    sampler.before_answer = forget_meanwhile
    async with connect(app, settings, "legacy", sampler) as client:
        message = await failure(client, [{"role": "user", "content": "我不吃香菜，而且从北京搬到杭州了"}])
    assert "supersedes" in message and "trashed" in message
    assert await snapshot(app) == state["before"]  # not even the ADD before it


async def test_a_store_change_between_rounds_asks_again(app, settings, known):
    """2026-07-28: each round re-reads the related memories; when they changed, the model is asked anew."""
    def first(prompt: str) -> str:
        return ops({"op": "UPDATE", "memory_id": labels(prompt)["用户住在北京"], "content": "用户住在杭州",
                    "confidence": 0.95})

    def second(prompt: str) -> str:
        assert "用户住在北京" not in labels(prompt)
        return ops({"op": "ADD", "content": "用户住在杭州", "category": "fact", "confidence": 0.95})

    async def forget_meanwhile() -> None:
        if len(sampler.requests) == 1:
            await app.trash.forget(USER, known["home"], "user asked")

    sampler = ScriptedSampler([first, second], before_answer=forget_meanwhile)
    async with connect(app, settings, "auto", sampler) as client:
        result = await remember(client, [{"role": "user", "content": "我搬到杭州了，北京不住了"}])
    assert len(sampler.requests) == 2
    assert [(i["op"], i["status"]) for i in result["items"]] == [("ADD", "stored")]
