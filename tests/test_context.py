"""The memory_context package (docs/profile.md, "The context package"): within POCKETMEM_CONTEXT_TOKENS for
0, 10 and 1,000 memories in both languages, trimmed in the documented order (evidence, then recent context;
the persona and user card never), long-term retrieval triggered by what the user says, and the token estimate."""

from __future__ import annotations

from datetime import timedelta

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.models import Category
from pocketmem.core.context_budget import Block, assemble, shares
from pocketmem.core.tokens_estimate import estimate_tokens
from pocketmem.core.triggers import long_term_trigger
from pocketmem.mcp.server import build_server
from pocketmem.service.writing.add_request import AddRequest

from .helpers import call

pytestmark = [pytest.mark.anyio]
USER = "global"

ZH_TOPICS = ["香菜", "咖啡", "跑步", "猫", "Python", "面试", "搬家", "吉他", "胃炎", "旅行"]
EN_TOPICS = ["cilantro", "coffee", "running", "cat", "Python", "interview", "moving", "guitar", "gastritis", "travel"]


def memories(lang: str, count: int) -> list[AddRequest]:
    topics = ZH_TOPICS if lang == "zh" else EN_TOPICS
    out = []
    for i in range(count):
        topic = topics[i % len(topics)]
        content = (
            f"第{i}条：用户提到{topic}，这是一条用来填满上下文预算的较长记忆，包含一些细节和背景说明。"
            if lang == "zh"
            else f"Note {i}: the user mentioned {topic}; a longer memory that fills the context budget with detail."
        )
        out.append(AddRequest(content=content, category=Category.fact, keywords=[topic],
                              scores={"persistence": 1.0} if i % 50 == 0 else None))
    return out


async def prompt(client: Client, message: str) -> str:
    return (await client.get_prompt("memory_context", {"message": message})).messages[0].content.text


def test_the_split_follows_the_seed():
    sh = shares(4000)
    assert (sh.system, sh.recent, sh.evidence, sh.reserve, sh.usable) == (600, 2000, 900, 500, 3500)
    small = shares(1000)
    assert (small.system, small.recent, small.evidence, small.reserve) == (150, 500, 225, 125)


def test_the_estimate_is_honest_for_chinese_and_english():
    assert estimate_tokens("用户不喜欢香菜") == 7  # one per Han character, not a quarter
    assert estimate_tokens("The user hates cilantro") == 1 + 1 + 2 + 2  # words of up to 4 letters: 1; of 5-8: 2
    assert estimate_tokens("2026年11月26日") == 2 + 1 + 1 + 1 + 1 + 1
    assert estimate_tokens("  \n ") == 0
    text = "用户不喜欢香菜，吃到会很反感。" * 3
    assert estimate_tokens(text) == estimate_tokens(text[:20]) + estimate_tokens(text[20:])


def test_long_term_triggers():
    for text in ("之前说的那个方案", "还记得我养的猫吗", "上次面试怎么样", "看看历史记录", "2026-03-05 那天",
                 "3月5日我们聊了什么", "report.pdf 里写了什么", "do you remember my cat?", "last month"):
        assert long_term_trigger(text).long_term, text
    for text in ("今天吃什么", "帮我写个函数", "what's the weather"):
        assert not long_term_trigger(text).long_term, text
    assert long_term_trigger("帮我改一下 server/app.py 和 README.md").files == ("server/app.py", "README.md")


@pytest.mark.backends
@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("count", [0, 10, 1000])
async def test_the_package_stays_within_budget(tmp_path, clock, lang, count, make_settings):
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        if count:
            await app.writing.add_many(USER, memories(lang, count))
        message = "还记得用户提到咖啡吗？" if lang == "zh" else "Do you remember the user mentioned coffee?"
        text = await prompt(client, message)
        assert estimate_tokens(text) <= 3500
        assert ("# 用户卡" if lang == "zh" else "# User card") in text
        package = await app.context.build(USER, message)
        assert package.text == text.strip() or estimate_tokens(package.text) <= 3500
        assert package.used <= package.shares.usable
        if count == 1000:
            assert package.left_out["recent"] > 0  # far more recent memories than the share holds
            assert package.tokens["recent"] <= 2000 and package.tokens["evidence"] <= 900
            assert package.tokens["evidence"] > 0
            heading = "[关于用户的相关记忆]" if lang == "zh" else "[Relevant memories about the user]"
            assert heading in text


@pytest.mark.backends
async def test_trimmed_evidence_first_then_recent_never_the_persona(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as app:
        await app.writing.add_many(USER, memories("zh", 300))
        long = {k: f"{k}：" + "很长的设定" * 55 for k in ("role", "tone", "boundaries", "taboos", "priorities")}
        await app.profile.update(USER, long, {"name": "小王", "background": "工程师" * 90}, confirmed=True)
        package = await app.context.build(USER, "还记得用户提到咖啡吗？")
        # The persona and identity are whole, though they are far over the system share.
        assert package.tokens["system"] > package.shares.system
        for value in long.values():
            assert value in package.text
        assert "工程师" * 90 in package.text
        assert package.used <= package.shares.usable
        # Evidence went first, all of it, before the recent context lost a line.
        assert package.trimmed["evidence"] > 0 and package.tokens["evidence"] == 0
        assert package.trimmed["recent"] > 0 and package.tokens["recent"] > 0



def test_a_small_overflow_costs_evidence_only():
    sh = shares(4000)
    system = "# User card\n" + "设" * 900  # 300 over its share
    recent = Block("[近期记忆]", [f"近期{i}" + "字" * 97 for i in range(19)])  # 19 x 100 + heading: under 2000
    evidence = Block("[证据]", [f"证据{i}" + "字" * 97 for i in range(8)])  # 8 x 100: under 900
    package = assemble(system, recent, evidence, sh, estimate_tokens)
    assert package.left_out == {"recent": 0, "evidence": 0}
    assert package.trimmed["recent"] == 0 and 0 < package.trimmed["evidence"] < 8
    kept = [line for line in package.text.splitlines() if line.startswith("证据")]
    assert kept == [f"证据{i}" + "字" * 97 for i in range(len(kept))]  # the least relevant (last) went first
    assert package.used <= sh.usable and "设" * 900 in package.text


async def test_a_past_reference_widens_the_evidence(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as app:
        for i in range(8):
            await app.writing.add(USER, AddRequest(content=f"用户第{i}次提到咖啡，喜欢手冲咖啡", keywords=["咖啡"]))
        clock.advance(days=30)  # nothing is recent any more
        plain = await app.context.build(USER, "咖啡")
        past = await app.context.build(USER, "咖啡 之前")
        assert plain.text.count("手冲咖啡") == 3 and past.text.count("手冲咖啡") == 5


async def test_the_budget_is_a_setting(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, context_tokens=1000)
    async with PocketMem(settings, clock=clock) as app:
        await app.writing.add_many(USER, memories("en", 200))
        clock.advance(days=1)
        package = await app.context.build(USER, "Do you remember the coffee?")
        assert estimate_tokens(package.text) <= 875 and package.shares.total == 1000
        assert timedelta(days=1)  # the recent window still holds them
        assert package.left_out["recent"] > 0


CASES = {
    "zh": {
        "old": "用户住在北京朝阳区", "new": "用户上个月搬到杭州了",
        "shell": "我的 OpenAI API key 是 【已隐去的API 密钥】",
        "todo": "周报还没写，明天要交", "liked": "用户不喜欢香菜，吃到会很反感", "keyword": "香菜",
        "message": "晚饭想吃火锅，记得别放香菜", "relevant": "[关于用户的相关记忆]", "recent": "[近期记下的其他记忆",
        "done": "（已完成）“周报还没写", "placeholder": "【已隐去",
    },
    "en": {
        "old": "The user lives in Boston", "new": "The user moved to Denver last month",
        "shell": "my OpenAI API key is [redacted API key]", "todo": "Write the weekly report for Friday",
        "liked": "The user hates cilantro", "keyword": "cilantro", "message": "Hotpot for dinner, no cilantro please",
        "relevant": "[Relevant memories about the user]", "recent": "[Other memories noted in the last 14 days",
        "done": "(done): “Write the weekly report", "placeholder": "[redacted",
    },
}


@pytest.mark.parametrize("lang", ["zh", "en"])
async def test_the_prompt_tells_the_truth(tmp_path, clock, lang, make_settings):
    """Relevant memories first; recent ones under a heading that says what they are, with no secret shell,
    a completed todo marked done, and a fact a newer memory changed never shown as current."""
    case = CASES[lang]
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as app:
        await app.writing.add(USER, AddRequest(content=case["old"]))
        await app.writing.add(USER, AddRequest(content=case["shell"]))  # stored before shells were refused
        todo = await app.writing.add(USER, AddRequest(content=case["todo"], category=Category.todo))
        await app.todos.set_done(USER, todo.memory_id, done=True, reason=None)
        clock.advance(days=1)
        await app.writing.add(USER, AddRequest(content=case["new"]))
        await app.writing.add(USER, AddRequest(content=case["liked"], keywords=[case["keyword"]]))
        async with Client(build_server(settings, app=app)) as client:
            text = await prompt(client, case["message"])
    relevant, recent = text.index(case["relevant"]), text.index(case["recent"])
    assert relevant < text.index(case["liked"]) < recent
    assert case["placeholder"] not in text and "API key" not in text
    assert case["done"] in text
    assert case["new"] in text and case["old"] not in text


@pytest.mark.parametrize(("locale", "message", "relevant"), [
    ("en", "晚饭想吃火锅，记得别放香菜", "[Relevant memories about the user]"),
    ("zh", "Hotpot for dinner, no cilantro please", "[关于用户的相关记忆]"),
])
async def test_the_prompt_speaks_the_locale_set(tmp_path, clock, locale, message, relevant, make_settings):
    """POCKETMEM_LOCALE decides the prompt's labels as it decides recall's; only `auto` follows the message."""
    settings = make_settings(tmp_path, locale=locale)
    async with PocketMem(settings, clock=clock) as app:
        await app.writing.add(USER, AddRequest(content="用户不喜欢香菜 (cilantro)", keywords=["香菜", "cilantro"]))
        todo = AddRequest(content="周报还没写", category=Category.todo, due_at=clock.now() - timedelta(hours=1))
        await app.writing.add(USER, todo)
        package = await app.context.build(USER, message)
    assert relevant in package.text, package.text
    reminder = next(line for line in package.text.splitlines() if "周报还没写" in line)
    assert ("已逾期" in reminder) == (locale == "zh") and ("overdue" in reminder) == (locale == "en"), reminder


def test_the_triggers_read_a_long_run_from_its_start_only():
    """A pattern may start only where its run starts (core/triggers.py): tried at every position of a run, it ran
    to the run's end each time, so 60,000 unbroken characters took seconds and 300,000 never ended."""
    from pocketmem.core.triggers import _DATE, _FILE

    assert _FILE.match("server/app.py") and not _FILE.match("server/app.py", 3)
    assert _FILE.match("报告草稿.pdf") and not _FILE.match("报告草稿.pdf", 1)
    assert _DATE.match("123天前") and not _DATE.match("123天前", 1)
    assert _DATE.match("12 days ago") and not _DATE.match("12 days ago", 1)
    # What they find is unchanged: the whole name, the whole count.
    for run in ("a" * 5000, "猫" * 5000, "7" * 5000, "a." * 2500, "-" * 5000):
        trigger = long_term_trigger(f"{run} 看看 server/app.py 和 报告草稿.pdf，3天前 {run}")
        assert trigger.files == ("server/app.py", "报告草稿.pdf") and trigger.reasons == ("date", "file"), run[:4]
    assert long_term_trigger("a" * 5000 + ".py").files == ("a" * 5000 + ".py",)
    assert long_term_trigger("1" * 5000 + "天前").reasons == ("date",)


async def test_a_long_unbroken_message_is_answered_and_an_over_long_one_refused_first(tmp_path, clock, make_settings):
    from mcp.shared.exceptions import MCPError

    from pocketmem.service.recall.retrieval import MAX_MESSAGE_CHARS

    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        await app.writing.add(USER, AddRequest(content="用户养了一只猫，叫小白", keywords=["猫"]))
        assert "# User card" in await prompt(client, "a" * 60_000)
        for run in ("猫" * 300_000, "a" * (MAX_MESSAGE_CHARS + 1)):
            rule = f"invalid argument message: is {len(run)} characters; the limit is {MAX_MESSAGE_CHARS}"
            with pytest.raises(MCPError, match=rule):
                await prompt(client, run)
        with pytest.raises(MCPError, match=r"invalid argument context\[0\]: is 300000 characters"):
            await client.get_prompt("memory_context", {"message": "猫", "context": "猫" * 300_000})
        assert "小白" in await prompt(client, "猫")  # the server still answers


@pytest.mark.backends
async def test_an_expired_memory_leaves_the_package_when_it_leaves_recall(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        trip = "用户这周在上海出差"
        ends = (clock.now() + timedelta(seconds=5)).isoformat()
        await call(client, "add_memory", {"content": trip, "category": "context", "expires_at": ends})
        await call(client, "add_memory", {"content": "用户喜欢吃小笼包"})
        assert trip in await prompt(client, "晚饭吃什么")
        clock.advance(seconds=8)  # expired; maintenance has not moved it to the trash yet
        recalled = await call(client, "recall_memories", {"query": "用户在上海出差吗", "keywords": ["上海", "出差"]})
        assert recalled["memories"] == []
        text = await prompt(client, "晚饭吃什么")
        assert trip not in text and "用户喜欢吃小笼包" in text


@pytest.mark.backends
@pytest.mark.parametrize(("content", "message", "reminder"), [
    ("Renew the driver's license.", "Did I renew my driver's license yet?", "Reminder (overdue since 2026-11-20"),
    ("续办驾照", "我的驾照续办了吗？", "提醒（已逾期：截止 2026-11-20"),
])
async def test_a_due_todo_the_message_is_about_is_listed_once(tmp_path, clock, make_settings, content, message,
                                                              reminder):
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        await call(client, "add_memory", {"content": content, "category": "todo", "due_at": "2026-11-20T10:00:00"})
        recalled = await call(client, "recall_memories", {"query": message})
        assert [m["content"] for m in recalled["memories"]] == [content]  # a hit, and a due reminder
        text = await prompt(client, message)
    assert text.count(content) == 1, text
    assert next(line for line in text.splitlines() if content in line).startswith(reminder), text


@pytest.mark.parametrize(("lang", "todo", "heading"), [
    ("zh", "给妈妈买生日礼物", "[提醒与待确认；以及近期记下的其他记忆（最近14天"),
    ("en", "Renew the driver's license", "[Reminders and confirmations; other memories noted in the last 14 days"),
])
async def test_a_todo_overdue_for_months_is_not_called_a_memory_of_the_last_14_days(
    tmp_path, clock, lang, todo, heading, make_settings
):
    settings = make_settings(tmp_path, locale=lang)
    async with PocketMem(settings, clock=clock) as app:
        due = clock.now() + timedelta(days=2)
        await app.writing.add(USER, AddRequest(content=todo, category=Category.todo, due_at=due))
        clock.advance(days=200)
        async with Client(build_server(settings, app=app)) as client:
            text = await prompt(client, "今天天气不错" if lang == "zh" else "Nice weather today")
    assert heading in text
    assert text.index(heading) < text.index(todo)
    assert ("已逾期" if lang == "zh" else "overdue") in text


@pytest.mark.backends
@pytest.mark.parametrize(("core", "message", "heading"), [
    ("朵朵对花生过敏。", "还记得朵朵对什么过敏吗", "[关于用户的相关记忆]"),
    ("Duoduo is allergic to peanuts.", "Do you remember what Duoduo is allergic to?", "[Relevant memories about"),
])
async def test_a_core_memory_on_the_card_is_not_repeated_as_evidence(tmp_path, clock, make_settings, core, message,
                                                                   heading):
    """The card above lists it: the evidence below does not say it again (recall's own injection, which has no
    card, still does). A core memory the full card leaves out is evidence like any other."""
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        await call(client, "add_memory", {"content": core, "scores": {"persistence": 1}})
        clock.advance(days=19)
        text = await prompt(client, message)
        recalled = await call(client, "recall_memories", {"query": message})
        assert text.count(core) == 1 and f"\n- {core}\n" in text, text  # on the card, once
        assert core in recalled["injection"], recalled["injection"]
        for i in range(40):  # older core memories now fill the card: it leaves the newest out
            await app.writing.add(USER, AddRequest(
                content=f"核心{i}：用户非常在意这件事情并且反复强调过很多次，请一直记住", scores={"persistence": 1.0},
                created_at=clock.now() - timedelta(days=30 + i),
            ))
        text = await prompt(client, message)
    system, evidence = text.split(heading)
    assert core not in system and "- … +" in system, system
    assert core in evidence, evidence


async def test_a_memory_a_secret_was_redacted_from_is_recalled_when_relevant_and_never_listed_as_recent(
    client: Client,
):
    """Listed under the recent heading on every message, a memory a secret was redacted from would tell the model
    which secrets exist and where; recall still finds it when the message is about it."""
    for content in ("银行卡密码是 135790，网银登录用", "我的身份证号是11010519491231002X，办护照要用",
                    "用户养了一只叫团子的橘猫"):
        assert (await call(client, "add_memory", {"content": content, "confidence": 0.95}))["status"] == "stored"
    unrelated = await prompt(client, "今天做点什么好")
    assert "团子" in unrelated and "已隐去" not in unrelated, unrelated
    asked = await prompt(client, "网银登录用的银行卡密码")
    relevant, recent = asked.index("[关于用户的相关记忆]"), asked.find("[近期记下的其他记忆")
    assert relevant < asked.index("银行卡密码是 【已隐去的密码】，网银登录用"), asked
    assert "身份证" not in asked and (recent == -1 or "已隐去" not in asked[recent:]), asked


FIELD_ZH = ("温柔体贴，像老朋友一样说话，会主动关心用户的情绪和身体状况，不说教，不评判，遇到用户难过时先共情再给建议，"
            "语气轻松自然，偶尔开点小玩笑，但不油腻。")  # 73 characters, a realistic field
FULL_PROFILE = {
    "persona": {k: FIELD_ZH for k in ("role", "tone", "boundaries", "taboos", "priorities")},
    "identity": {"name": "小李", **{k: FIELD_ZH for k in ("background", "tech", "collaboration")}},
    "confirmed": True,
}
ALLERGY, DIABETES = "我对青霉素过敏", "我有糖尿病，不能吃甜的"


@pytest.mark.parametrize("tokens", [4000, 1200])
async def test_a_full_profile_never_crowds_out_the_core_memories(tmp_path, clock, make_settings, tokens):
    """The persona and identity fill the system share: the core memories still show (the other parts give way),
    at the default budget and a small one, while unrelated recent lines are what goes."""
    settings = make_settings(tmp_path, context_tokens=tokens)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        await call(client, "update_profile", FULL_PROFILE)
        for content in (ALLERGY, DIABETES):
            await call(client, "add_memory", {"content": content, "scores": {"persistence": 1}})
        await app.writing.add_many(USER, memories("zh", 31)[1:])  # ordinary ones
        text = await prompt(client, "我感冒了，医生开了阿莫西林")
        package = await app.context.build(USER, "我感冒了，医生开了阿莫西林")
    assert package.tokens["system"] > package.shares.system  # the persona and identity alone pass the share
    assert package.used <= package.shares.usable
    assert FIELD_ZH in text  # whole: the budget has room for them
    card = text.split("## 核心记忆\n")[1]
    assert card.startswith(f"- {ALLERGY}\n- {DIABETES}\n"), text
    if tokens == 1200:
        assert package.trimmed["recent"] > 0 and "[近期记下的其他记忆" in text  # the recent lines gave way, not all


@pytest.mark.parametrize("lang", ["zh", "en"])
async def test_at_the_smallest_budget_the_profile_is_shortened_and_the_core_list_keeps_its_note(
    tmp_path, clock, make_settings, lang
):
    """Nine fields of 300 characters cannot fit 400 tokens: they are shortened evenly (`…`), and the core list
    is there, at least as its `- … +N` note, never dropped without a word."""
    settings = make_settings(tmp_path, context_tokens=400)
    long = "很长的设定" * 60 if lang == "zh" else "a rather long setting " * 13
    profile = {
        "persona": {k: long for k in ("role", "tone", "boundaries", "taboos", "priorities")},
        "identity": {"name": "Li", **{k: long for k in ("background", "tech", "collaboration")}},
        "confirmed": True,
    }
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        await call(client, "update_profile", profile)
        for i in range(12):
            await call(client, "add_memory", {"content": f"{ALLERGY}，第{i}条核心记忆", "scores": {"persistence": 1}})
        text = await prompt(client, "我感冒了" if lang == "zh" else "I caught a cold")
        package = await app.context.build(USER, "我感冒了" if lang == "zh" else "I caught a cold")
    assert package.used <= package.shares.usable, package.tokens
    heading = "## 核心记忆" if lang == "zh" else "## Core memories"
    core = text.split(heading + "\n")[1].split("\n\n")[0].splitlines()
    assert core[-1].startswith("- … +") and int(core[-1].rsplit("+", 1)[1]) == 12 - len(core[:-1]), text
    assert long not in text and text.count("…\n") >= 8  # every long field shortened, none dropped
    assert ("- 称呼：Li" if lang == "zh" else "- Name: Li") in text  # a short line stays whole
