"""The user card and memory_context's system part speak one language, the one recall speaks
(core/text.shown_language: POCKETMEM_LOCALE, or with `auto` the message's when it has words of its own, else the
language of the user's content, as the card read on its own), through the MCP
client; User.md, the file a person edits, keeps its bilingual headings and is still read back."""

from __future__ import annotations

from datetime import timedelta

import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.mcp.server import build_server
from pocketmem.service.profile.profile_files import folder_name

from .helpers import START, call

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"
CARD = "memory://user-card"
PROFILE = {
    "persona": {"role": "生活助理", "tone": "温和简洁"}, "identity": {"name": "小王", "background": "后端工程师"},
}
ENGLISH = ("User card", "## Who", "Core memories", "Open todos", "# Persona", "overdue", "due ", "Temporary")
CHINESE = ("用户卡", "## 身份", "核心记忆", "## 待办", "# 人设", "已逾期", "截止", "临时模式")


async def read(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text


async def prompt(client: Client, message: str) -> str:
    return (await client.get_prompt("memory_context", {"message": message})).messages[0].content.text


async def fill(client: Client) -> None:
    await call(client, "update_profile", {**PROFILE, "confirmed": True})
    await call(client, "add_memory", {"content": "用户对花生过敏", "scores": {"persistence": 1}})
    overdue = (START - timedelta(hours=1)).isoformat()
    await call(client, "add_memory", {"content": "交物业费", "category": "todo", "due_at": overdue})
    await call(client, "add_memory", {"content": "给猫买猫砂", "category": "todo"})


def speaks(text: str, lang: str) -> None:
    other = ENGLISH if lang == "zh" else CHINESE
    assert not [w for w in other if w in text], text


@pytest.mark.parametrize("locale", ["zh", "en"])
async def test_the_card_and_the_context_speak_the_locale_set(tmp_path, clock, locale, make_settings):
    settings = make_settings(tmp_path, locale=locale)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        await fill(client)
        card = await read(client, CARD)
        # The message is in the other language: the locale set decides, as it does for recall.
        system = await prompt(client, "这周有什么安排" if locale == "en" else "What is on this week?")
    if locale == "zh":
        assert card == (
            "# 用户卡\n\n## 身份\n- 称呼：小王\n- 职业背景：后端工程师\n\n## 核心记忆\n- 用户对花生过敏\n\n"
            "## 待办\n- 交物业费（已逾期：截止 2026-11-26 09:00）\n- 给猫买猫砂\n"
        )
        assert "# 人设\n- 身份定位：生活助理\n- 语气：温和简洁\n\n# 用户卡\n\n## 身份\n- 称呼：小王" in system
        # The overdue todo is recall's hit for this week: listed once, as a reminder.
        assert "## 核心记忆\n- 用户对花生过敏" in system and "[提醒与待确认；以及近期记下的其他记忆" in system
        assert system.count("交物业费") == 1 and "提醒（已逾期：截止 2026-11-26 09:00）“交物业费”" in system
    else:
        assert card == (
            "# User card\n\n## Who\n- Name: 小王\n- Background: 后端工程师\n\n## Core memories\n- 用户对花生过敏\n\n"
            "## Open todos\n- 交物业费 (overdue since 2026-11-26 09:00)\n- 给猫买猫砂\n"
        )
        assert "# Persona\n- Role: 生活助理\n- Tone: 温和简洁\n\n# User card\n\n## Who\n- Name: 小王" in system
        assert "## Core memories\n- 用户对花生过敏" in system
    speaks(card, locale)
    speaks(system, locale)


async def test_with_auto_the_card_follows_its_content_and_the_context_its_message(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, locale="auto")
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        empty = await read(client, CARD)
        await fill(client)
        card = await read(client, CARD)
        english = await prompt(client, "What is on this week?")
        chinese = await prompt(client, "这周有什么安排")
    assert empty == "# User card\n\n## Who\n- id: global\n"
    assert card.startswith("# 用户卡\n\n## 身份\n- 称呼：小王") and "（已逾期：截止 2026-11-26 09:00）" in card
    speaks(card, "zh")
    assert "# Persona\n- Role: 生活助理" in english and "## Who\n- Name: 小王" in english
    assert "# 人设\n- 身份定位：生活助理" in chinese and "## 身份\n- 称呼：小王" in chinese


@pytest.mark.parametrize("locale", ["zh", "en"])
async def test_the_temporary_card_speaks_the_locale_set(tmp_path, clock, locale, make_settings):
    settings = make_settings(tmp_path, locale=locale, temporary=True)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        card = await read(client, CARD)
        system = await prompt(client, "这周有什么安排")
    expected = (
        "# 用户卡\n\n## 临时模式\n- 记忆已关闭：不会回忆，也不会记下任何内容。" if locale == "zh"
        else "# User card\n\n## Temporary mode\n- Memories are off: nothing is recalled or stored."
    )
    assert card.strip() == expected and system.startswith(expected)


async def test_user_md_keeps_its_headings_and_its_edits_under_a_chinese_locale(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, locale="zh", profile_files="on")
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        await fill(client)
        path = settings.home / folder_name(USER) / "User.md"
        user_md = path.read_text(encoding="utf-8")
        assert "## Identity 身份" in user_md and "## Core memories 核心记忆" in user_md  # parse reads these back
        edited = user_md.replace("- 称呼 (name): 小王", "- 称呼 (name): 王工") + "- 用户每天早上喝燕麦拿铁\n"
        path.write_text(edited, encoding="utf-8")
        card = await read(client, CARD)
        assert not list(path.parent.glob("*.rejected-*"))
    assert "## 身份\n- 称呼：王工" in card and "- 用户每天早上喝燕麦拿铁" in card
    assert card.startswith("# 用户卡") and "- 交物业费（已逾期：截止 2026-11-26 09:00）" in card


# Replies with no words of their own: they say nothing about the user's language.
ACKNOWLEDGEMENTS = ["👍", "？？", "2333", "😂😂", "ok", "OK!"]


async def test_a_reply_without_words_speaks_the_language_of_the_users_content(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path)  # POCKETMEM_LOCALE=auto, the default
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        await fill(client)
        card = await read(client, CARD)
        for message in ACKNOWLEDGEMENTS:
            recalled = await call(client, "recall_memories", {"query": message})
            system = await prompt(client, message)
            assert [r["label"] for r in recalled["reminders"]] == ["已逾期：截止 2026-11-26 09:00"], message
            assert recalled["injection"].startswith("提醒（已逾期：截止 2026-11-26 09:00）“交物业费”"), message
            assert "# 人设\n- 身份定位：生活助理" in system and "## 身份\n- 称呼：小王" in system, message
            speaks(recalled["injection"], "zh")
            speaks(system, "zh")
        # A real English sentence still decides, in the same Chinese store.
        english = await call(client, "recall_memories", {"query": "what did I say about my cat?"})
        asked = await prompt(client, "what did I say about my cat?")
    assert card.startswith("# 用户卡")
    assert english["injection"].startswith("Reminder (overdue since 2026-11-26 09:00): “交物业费”")
    assert "# Persona\n- Role: 生活助理" in asked and "## Who\n- Name: 小王" in asked


async def test_a_reply_without_words_in_a_store_without_a_card_speaks_its_newest_memories(
    tmp_path, clock, make_settings
):
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        await call(client, "add_memory", {"content": "用户周末常去爬山"})
        card = await read(client, CARD)
        system = await prompt(client, "👍")
    assert card == "# 用户卡\n\n## 身份\n- 用户 id：global\n"
    assert "# 用户卡" in system
    speaks(system, "zh")


async def test_a_reply_without_words_in_an_english_store_speaks_english(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path)
    async with PocketMem(settings, clock=clock) as app, Client(build_server(settings, app=app)) as client:
        await call(client, "update_profile", {"identity": {"name": "Sam"}, "confirmed": True})
        overdue = (START - timedelta(hours=1)).isoformat()
        await call(client, "add_memory", {"content": "Pay the rent", "category": "todo", "due_at": overdue})
        recalled = await call(client, "recall_memories", {"query": "👍"})
        system = await prompt(client, "👍")
    assert recalled["injection"].startswith("Reminder (overdue since 2026-11-26 09:00): “Pay the rent”")
    assert "# User card\n\n## Who\n- Name: Sam" in system
    speaks(system, "en")
