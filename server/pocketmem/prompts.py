"""The two contract prompts: `memory_context` (a system-prompt block for a message) and
`extract_memories` (how to turn a conversation into add_memory calls)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import Field

from .app import PocketMem
from .errors import InvalidInput
from .retrieval import RecallRequest
from .text import guess_language

EXTRACTION_RUBRIC_ZH = """\
你是记忆管理员。阅读下面的对话，只记住以后还用得上的信息，用 add_memory 逐条保存（每条一两句话，用用户说话的语言，不要翻译）。

要记什么（category）：
- preference 偏好/厌恶/习惯（"用户不喜欢香菜"）  - fact 关于用户的事实（工作、项目、技术栈）
- lesson 踩过的坑和解决办法（"Docker 构建要用 proxy-env"）  - goal 计划和目标
- person 用户生活中的人（"小白是用户养的猫"）  - todo 待办（带 due_at / remind_at）
- event 有时间的事件（"下周二字节面试"）  - episode 本次对话摘要（14 天后过期）
不要记：寒暄、临时情绪、你自己的话、密码/密钥/证件号等敏感信息。

打分（scores，0~1，可省略，省略时按类别取默认值）：
- emotion E：情绪强度，负面情绪更高（"吃到香菜很反感" 0.7）
- info I：信息量（具体的名字、数字、时间更高）
- persistence P：能保持多久。1 = 核心记忆：长期稳定的喜恶、慢性病、姓名生日——永不衰减、不会被淘汰；
  长期计划约 0.5；短期事实约 0.1
- judge J：你对重要性的综合判断
confidence：用户明确说的 ≥0.9；你推测的 0.6~0.85（会先请用户确认）；拿不准 <0.6 就别记。

keywords：每条写 3~6 个短词，帮助以后检索：同义词、上位概念、另一种语言（香菜 → coriander、忌口、饮食）。

更新而不是重复：
- 和已有记忆说的是同一件事 → 不要再加。
- 新信息纠正或替代了旧的普通记忆 → add_memory(..., supersedes=旧记忆 id)。
- 和核心记忆（P=1）冲突 → patch_core_memory(旧 id, patch="最近胃炎，暂时不吃辣", mode="append")，以用户最新说法为准。
- 用户要求忘掉 → forget_memory(id)。
"""

EXTRACTION_RUBRIC_EN = """\
You are the memory keeper. Read the conversation below and save, with add_memory, only what will matter
later: one or two sentences per memory, in the language the user spoke (never translate).

What to save (category):
- preference (likes, dislikes, habits)  - fact (about the user, their work, projects, tools)
- lesson (what failed and what fixed it)  - goal (plans and aims)  - person (people in their life)
- todo (with due_at / remind_at)  - event (something at a time)  - episode (a summary of this conversation; expires in 14 days)
Do not save: small talk, passing moods, your own words, passwords, keys or ID numbers.

Scores (0..1, optional; the category's defaults fill the gaps):
- emotion E: emotional weight, negative feelings higher
- info I: information content (names, numbers, dates score higher)
- persistence P: how long it stays true. 1 = core: stable likes/dislikes, chronic illness, name, birthday —
  never decays, never evicted. ~0.5 long-term plans; ~0.1 short-term facts
- judge J: your overall judgement of importance
confidence: >= 0.9 when the user said it plainly; 0.6-0.85 when you infer it (the user is asked first); below 0.6 don't save.

keywords: 3-6 short terms per memory to find it later: synonyms, the broader topic, the other language's words.

Update instead of duplicating:
- Already known -> don't add it again.
- It corrects or replaces an ordinary memory -> add_memory(..., supersedes=<old id>).
- It contradicts a core memory (P = 1) -> patch_core_memory(<old id>, patch="...", mode="append"): the latest word wins.
- The user asks you to forget something -> forget_memory(<id>).
"""


def register_prompts(mcp: MCPServer, app: PocketMem, current_user: Callable[[], str]) -> None:
    @mcp.prompt(title="Memory context for a message")
    async def memory_context(
        message: Annotated[str, Field(description="The user's current message.")],
        context: Annotated[str | None, Field(description="Recent conversation lines, one per line (up to 3).")] = None,
    ) -> str:
        """A system-prompt block with the user card and the memories relevant to `message`."""
        lines = [line for line in (context or "").splitlines() if line.strip()][-3:]
        user = current_user()
        try:
            result = await app.retrieval.recall(user, RecallRequest(query=message, context=lines))
        except InvalidInput as exc:
            # Any other exception would reach the client only as "Error rendering prompt memory_context".
            field = "message" if exc.field == "query" else exc.field
            raise MCPError(INVALID_PARAMS, f"invalid argument {field}: {exc.rule}") from None
        card = await app.user_card(user)
        zh = guess_language(message) == "zh"
        parts = [card.strip()]
        if result.injection:
            parts.append(("[关于用户的相关记忆]\n" if zh else "[Relevant memories about the user]\n") + result.injection)
        if result.pending_confirmations:
            head = "[待用户确认的记忆]" if zh else "[Memories waiting for the user's confirmation]"
            parts.append(head + "\n" + "\n".join(f"- {p.content} (pending_id {p.pending_id})" for p in result.pending_confirmations))
        parts.append(
            "自然地运用这些记忆，不要生硬地说“我记得你说过……”。"
            if zh
            else "Use these memories naturally; don't announce that you remember them."
        )
        return "\n\n".join(parts)

    @mcp.prompt(title="Extract memories from a conversation")
    def extract_memories(
        conversation: Annotated[str | None, Field(description="The recent messages to mine, as plain text.")] = None,
        language: Annotated[str | None, Field(description="zh or en; default follows the conversation.")] = None,
    ) -> str:
        """Instructions for turning a conversation into add_memory calls with E/I/P/J scores, confidence and keywords."""
        lang = language or (guess_language(conversation) if conversation else "zh")
        rubric = EXTRACTION_RUBRIC_ZH if lang == "zh" else EXTRACTION_RUBRIC_EN
        if conversation:
            head = "对话：" if lang == "zh" else "Conversation:"
            return f"{rubric}\n{head}\n{conversation.strip()}\n"
        return rubric
