"""remember_conversation's service: from the recent messages to memories written, updated and patched.

    prepare  check the messages; find the related memories (recall over each recent user message and the
             agent's note, every core memory, and any the agent named) and label them m1, m2, ...; write the
             prompt: the rubric (rubric.py), today's date, the labelled memories, the conversation
    run      ask an LLM (llm.py, or MCP sampling in remember.py); check the whole answer (operations.py);
             one retry that quotes the problems; then a clear failure. All within POCKETMEM_LLM_TIMEOUT
    apply    turn the operations into write-path steps and apply them in one transaction (batch.py)

Nothing is written before the whole answer has passed its checks, and then all of it is written or
none. The LLM's wording is stored as given — there is no translation step anywhere — and the rubric
tells it to keep the user's language. No transaction is open while the LLM thinks, so recall and
other writes go on meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import InvalidInput, NotFound, ProviderUnavailable
from pocketmem.base.models import Category, Memory, Status
from pocketmem.base.results import AddResult, EvictedItem, ForgetResult, PatchResult
from pocketmem.core import privacy
from pocketmem.core.operations import (
    AddOp,
    BoostOp,
    Checked,
    ForgetOp,
    InvalidAnswer,
    PatchOp,
    ProfileOp,
    SkipOp,
    UpdateOp,
    check_answer,
    operations_schema,
)
from pocketmem.core.routing import route
from pocketmem.core.rubric import Language, server_rubric
from pocketmem.core.text import clean_text, own_language
from pocketmem.providers.llm import ChatAnswer, ChatModel, ChatRequest, ChatTurn, configured_model
from pocketmem.service.recall.retrieval import RecallRequest, Retrieval
from pocketmem.service.shared.usercard import content_language
from pocketmem.service.writing.add_request import MAX_KEYWORD_CHARS, MAX_KEYWORDS, AddRequest
from pocketmem.service.writing.batch import (
    AddStep,
    ForgetStep,
    PatchStep,
    ReinforceStep,
    Step,
    StepResult,
    apply_batch,
)
from pocketmem.service.writing.patching import Patching
from pocketmem.service.writing.writing import Writing
from pocketmem.store.base import Store

SOURCE = "remember_conversation"
MAX_MESSAGE_CHARS = 4000
MAX_NOTE_CHARS = 1000
MAX_HINT_IDS = 10
USER_MESSAGES_SEARCHED = 5  # the most recent ones
RELATED_PER_MESSAGE = 5
MAX_RELATED = 12
MAX_CORE_SHOWN = 15
# Related memories are found by recall with a lower bar than a reply's: the model judges what really
# matters, and a memory it never sees is one it cannot update (so it would be duplicated instead).
RELATED_THRESHOLD = 0.15
MAX_ANSWER_TOKENS = 2000
MAX_ECHOED_ANSWER = 4000  # characters of a bad answer quoted back in the retry

_WEEKDAYS_ZH = "一二三四五六日"
# Line breaks json.dumps leaves as they are (it escapes those below U+0020).
_LINE_BREAKS = {ord(ch): f"\\u{ord(ch):04x}" for ch in "\x85\u2028\u2029"}


# -- input ------------------------------------------------------------------------------------------
class ConversationMessage(BaseModel):
    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="Verbatim.")


class Hints(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelled hint is an error; a message may carry extra keys

    note: str | None = Field(
        None, max_length=MAX_NOTE_CHARS,
        description="For the extractor.",
    )
    keywords: list[str] = Field(
        default_factory=list, max_length=MAX_KEYWORDS,
        description="Search terms.",
    )
    memory_ids: list[str] = Field(
        default_factory=list, max_length=MAX_HINT_IDS,
        description="Ids involved.",
    )


# -- output -----------------------------------------------------------------------------------------
ItemStatus = Literal[
    "stored", "pending", "discarded", "duplicate", "patched", "reinforced", "forgotten", "needs_confirmation",
    "skipped",
]


class RememberItem(BaseModel):
    op: Literal["ADD", "UPDATE", "PATCH", "BOOST", "FORGET", "SKIP", "PROFILE"]
    status: ItemStatus
    memory_id: str | None = Field(None, description="the memory written, patched, reinforced or forgotten")
    pending_id: str | None = Field(None, description="set when the memory waits for the user's confirmation")
    superseded: str | None = Field(None, description="UPDATE: the older memory, now kept as history")
    content: str | None = None
    category: Category | None = None
    confidence: float | None = None
    reason: str | None = Field(None, description="the extractor's reason")
    message: str


class RememberResult(BaseModel):
    items: list[RememberItem]
    source: Literal["sampling", "openai"] = Field(
        description="sampling: the client's own model; openai: the POCKETMEM_LLM_* model"
    )
    model: str | None
    attempts: int = Field(description="1, or 2 when the first answer was invalid and the model was asked again")
    related_memories: int = Field(description="existing memories shown to the model")
    evicted: list[EvictedItem] = Field(default_factory=list)
    message: str


# -- the work -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Prepared:
    user_id: str
    language: Language
    known: dict[str, Memory]  # label (m1, m2, ...) -> memory, in the order shown
    request: ChatRequest


@dataclass(frozen=True)
class Extracted:
    operations: list[Checked]
    source: Literal["sampling", "openai"]
    model: str | None
    attempts: int


NO_MODEL_MESSAGE = (
    "remember_conversation has no model to ask: this client does not offer MCP sampling and no "
    "OpenAI-compatible model is configured (POCKETMEM_LLM_MODEL, POCKETMEM_LLM_BASE_URL, POCKETMEM_LLM_API_KEY). "
    "Nothing was stored. Do it yourself instead: get the extract_memories prompt, follow its rubric, and call "
    "add_memory (supersedes=... to update), patch_core_memory and forget_memory."
)


ProfileProposer = Callable[[str, Mapping[str, str] | None, Mapping[str, str] | None], Awaitable[Any]]


class Extraction:
    def __init__(
        self, settings: Settings, store: Store, writing: Writing, patching: Patching, retrieval: Retrieval, clock: Clock
    ) -> None:
        self.settings = settings
        self.store = store
        self.writing = writing
        self.patching = patching
        threshold = min(settings.relevance_threshold, RELATED_THRESHOLD)
        wide = settings.model_copy(update={"relevance_threshold": threshold})
        self.retrieval = Retrieval(wide, store, retrieval.store_vectors, clock)
        self.retrieval.vectors_pending = retrieval.vectors_pending
        self.clock = clock
        self.model = configured_model(settings)  # None unless POCKETMEM_LLM_MODEL is set
        # PROFILE operations go here (the app wires Profile.update): persona / identity changes to confirm.
        self.propose_profile: ProfileProposer | None = None

    async def aclose(self) -> None:
        if self.model is not None:
            await self.model.aclose()

    # -- prepare --------------------------------------------------------------------------------
    async def prepare(
        self, user_id: str, messages: Sequence[ConversationMessage], hints: Hints | None = None
    ) -> Prepared:
        limit = self.settings.extract_max_messages
        if not messages:
            raise InvalidInput("messages", "send at least one message")
        if len(messages) > limit:
            raise InvalidInput(
                "messages", f"at most {limit} messages (POCKETMEM_EXTRACT_MAX_MESSAGES); send the most recent ones"
            )
        turns = [
            ConversationMessage(
                role=m.role, content=clean_text(m.content, f"messages[{i}].content", max_chars=MAX_MESSAGE_CHARS)
            )
            for i, m in enumerate(messages)
        ]
        if not any(m.role == "user" for m in turns):
            raise InvalidInput("messages", "needs at least one message with role user: memories come from the user")
        hints = hints or Hints()
        note = clean_text(hints.note or "", "hints.note", max_chars=MAX_NOTE_CHARS, allow_empty=True)
        keywords = [
            kw for i, raw in enumerate(hints.keywords)
            if (kw := clean_text(raw, f"hints.keywords[{i}]", max_chars=MAX_KEYWORD_CHARS, allow_empty=True))
        ]
        said = " ".join(m.content for m in turns if m.role == "user")
        # The conversation's language; a conversation of 👍 and ok has none: the user's content's (as recall's)
        spoken = own_language(said) or await content_language(self.store, user_id, self.clock.now())
        language: Language = "zh" if spoken == "zh" else "en"
        related = await self._related(user_id, turns, keywords, hints.memory_ids, note)
        known = {f"m{i}": memory for i, memory in enumerate(related, start=1)}
        system = server_rubric(language, self.settings)
        prompt = self._prompt(turns, known, note, language)
        request = ChatRequest(
            system=system,
            turns=(ChatTurn("user", prompt),),
            max_tokens=MAX_ANSWER_TOKENS,
            schema=operations_schema(),
            schema_name="memory_operations",
        )
        return Prepared(user_id=user_id, language=language, known=known, request=request)

    async def _related(
        self, user_id: str, turns: list[ConversationMessage], keywords: list[str], hinted: Sequence[str],
        note: str = "",
    ) -> list[Memory]:
        """The memories the model must see to update instead of duplicating: those recalled for the recent
        user messages and for the agent's note (each with the agent's keywords; a hit on an older version
        brings the current one), every core memory (they are few, and changed only by patch), and the
        agent's picks."""
        found: dict[str, None] = {}
        user_turns = [i for i, m in enumerate(turns) if m.role == "user"][-USER_MESSAGES_SEARCHED:]
        searches = [(turns[i].content, [m.content for m in turns[max(0, i - 3):i]]) for i in reversed(user_turns)]
        if note:
            # The note often names what the messages only imply (用户以前住在北京 for 我搬到杭州了).
            searches.append((note, []))
        for query, context in searches:
            result = await self.retrieval.recall(
                user_id,
                RecallRequest(query=query, context=context, keywords=keywords,
                              top_k=RELATED_PER_MESSAGE, record=False),
            )
            found.update(dict.fromkeys(hit.id for hit in result.memories))
        ids = list(found)[:MAX_RELATED]
        async with self.store.read() as reader:
            memories = {m.id: m for m in await reader.get_memories(user_id, ids)}
            for memory in await reader.core_memories(user_id, MAX_CORE_SHOWN):
                memories.setdefault(memory.id, memory)
                ids.append(memory.id)
            for i, memory_id in enumerate(hinted):
                hinted_memory = await reader.get_memory(user_id, memory_id)
                if hinted_memory is None or hinted_memory.status != Status.active:
                    raise NotFound(
                        f"hints.memory_ids[{i}]: no active memory with id {memory_id!r}; "
                        "take ids from recall_memories"
                    )
                memories.setdefault(hinted_memory.id, hinted_memory)
                ids.append(hinted_memory.id)
        return [memories[i] for i in dict.fromkeys(ids) if i in memories and memories[i].status == Status.active]

    def _prompt(
        self, turns: list[ConversationMessage], known: dict[str, Memory], note: str, language: Language
    ) -> str:
        """Each piece of free text (a memory, the note, a message) is one JSON string on its own line, so no text
        can start a line of its own: a forged role line or section heading stays inside its quotes."""
        zone = self.settings.zone
        today = self.clock.now().astimezone(zone)
        zone_name = self.settings.tz or str(zone)
        zh = language == "zh"
        lines = [
            f"今天是 {today:%Y-%m-%d}（星期{_WEEKDAYS_ZH[today.weekday()]}），时区 {zone_name}。"
            if zh else f"Today is {today:%Y-%m-%d} ({today:%A}), time zone {zone_name}.",
            "",
            "已有的相关记忆：" if zh else "Related memories already kept:",
        ]
        for label, memory in known.items():
            day = memory.created_at.astimezone(zone).date().isoformat()
            if zh:
                tag = f"{memory.category.value}，{'核心，' if memory.core else ''}记于 {day}"
                lines.append(f"{label}（{tag}）：{_quoted(memory.content)}")
            else:
                tag = f"{memory.category.value}, {'core, ' if memory.core else ''}saved {day}"
                lines.append(f"{label} ({tag}): {_quoted(memory.content)}")
        if not known:
            lines.append("（无）" if zh else "(none)")
        if note:
            lines += ["", ("助手的补充说明：" if zh else "Note from the assistant: ") + _quoted(note)]
        lines += [
            "",
            "最近的对话（从早到晚，每条消息是一个 JSON 字符串）：" if zh
            else "Recent conversation (oldest first, each message one JSON string):",
        ]
        names = {"user": "用户", "assistant": "助手"} if zh else {"user": "User", "assistant": "Assistant"}
        lines += [f"{names[m.role]}{'：' if zh else ': '}{_quoted(m.content)}" for m in turns]
        return "\n".join(lines)

    # -- ask and check --------------------------------------------------------------------------
    def check(self, prepared: Prepared, text: str) -> list[Checked]:
        return check_answer(
            text, prepared.known, max_content_chars=self.settings.max_content_chars, zone=self.settings.zone,
            now=self.clock.now(),
        )

    def retry_request(self, prepared: Prepared, bad_answer: str, error: InvalidAnswer) -> ChatRequest:
        problems = "\n".join(f"- {p}" for p in error.problems)
        if prepared.language == "zh":
            ask = (
                f"这个回答用不了：\n{problems}\n"
                '请改正后重新回答：只要一个 JSON 对象 {"operations": [...]}，不要别的文字。'
            )
        else:
            ask = (
                f"That answer cannot be used:\n{problems}\n"
                'Answer again, corrected: one JSON object {"operations": [...]} and nothing else.'
            )
        echoed = bad_answer[:MAX_ECHOED_ANSWER] or "(empty)"
        first = prepared.request
        turns = (*first.turns, ChatTurn("assistant", echoed), ChatTurn("user", ask))
        return ChatRequest(first.system, turns, first.max_tokens, first.schema, first.schema_name)

    def final_check(
        self, prepared: Prepared, answer: ChatAnswer, source: Literal["sampling", "openai"], attempts: int
    ) -> Extracted:
        """The answer after the retry: valid, or the end of the attempt."""
        try:
            return Extracted(self.check(prepared, answer.text), source, answer.model, attempts)
        except InvalidAnswer as exc:
            raise ProviderUnavailable(
                f"the model's answer was not valid twice ({exc}); nothing was stored. Call remember_conversation "
                "again, or follow the extract_memories prompt and call add_memory yourself"
            ) from None

    async def run(self, prepared: Prepared, model: ChatModel) -> Extracted:
        """Ask `model`, retry once with the problems of a bad answer, all within POCKETMEM_LLM_TIMEOUT."""
        limit = self.settings.llm_timeout
        deadline = anyio.current_time() + limit
        try:
            with anyio.fail_after(limit):
                answer = await model.complete(prepared.request, limit)
                try:
                    return Extracted(self.check(prepared, answer.text), model.source, answer.model, 1)
                except InvalidAnswer as exc:
                    retry = self.retry_request(prepared, answer.text, exc)
                remaining = max(0.001, deadline - anyio.current_time())
                return self.final_check(prepared, await model.complete(retry, remaining), model.source, 2)
        except TimeoutError:
            raise ProviderUnavailable(
                f"the model did not answer within {limit:g}s (POCKETMEM_LLM_TIMEOUT); nothing was stored"
            ) from None

    # -- apply ----------------------------------------------------------------------------------
    async def apply(self, prepared: Prepared, extracted: Extracted) -> RememberResult:
        settings = self.settings
        steps: list[Step] = []
        planned: list[tuple[Checked, int | None]] = []  # each operation and the index of its step
        for item in extracted.operations:
            op, target = item.op, item.target
            step: Step | None = None
            if isinstance(op, AddOp):
                step = AddStep(self._add_request(op), automatic=True)
            elif isinstance(op, UpdateOp):
                assert target is not None
                step = AddStep(self._update_request(op, target), automatic=True)
            elif isinstance(op, PatchOp) and route(op.confidence, settings) == "store":
                assert target is not None
                step = PatchStep(target.id, op.patch, op.mode, op.reason)
            elif isinstance(op, ForgetOp) and route(op.confidence, settings) == "store":
                assert target is not None
                step = ForgetStep(target.id, f"{SOURCE}: {op.reason}" if op.reason else SOURCE)
            elif isinstance(op, BoostOp):
                assert target is not None
                step = ReinforceStep((target.id,))
            if step is not None:
                steps.append(step)
            planned.append((item, len(steps) - 1 if step is not None else None))
        batch = await apply_batch(self.writing, self.patching, prepared.user_id, steps)
        items = [
            await self._profile_item(prepared.user_id, item.op) if isinstance(item.op, ProfileOp)
            else self._item(item, batch.results[i] if i is not None else None)
            for item, i in planned
        ]
        return RememberResult(
            items=items,
            source=extracted.source,
            model=extracted.model,
            attempts=extracted.attempts,
            related_memories=len(prepared.known),
            evicted=batch.evicted,
            message=_summary(items, len(batch.evicted), settings.trash_days),
        )

    async def _profile_item(self, user_id: str, op: ProfileOp) -> RememberItem:
        """A proposed profile change goes through update_profile's path (a pending confirmation once the
        profile is confirmed; a draft during onboarding)."""
        base = {"op": op.op, "reason": op.reason, "confidence": op.confidence}
        if self.propose_profile is None or route(op.confidence, self.settings) == "discard":
            return RememberItem(**base, status="discarded", message="Not applied: the profile is not changed here.")
        try:
            result = await self.propose_profile(user_id, op.persona, op.identity)
        except InvalidInput as exc:
            return RememberItem(**base, status="discarded", message=f"Not applied: {exc}")
        status = {"pending": "pending", "saved": "stored", "unchanged": "duplicate", "rejected": "discarded"}[
            result.status
        ]
        return RememberItem(**base, status=status, pending_id=result.pending_id,
                            content="; ".join(result.changed) or None, message=result.message)

    def _add_request(self, op: AddOp) -> AddRequest:
        return AddRequest(
            content=op.content,
            category=op.category,
            keywords=_keywords(op.keywords),
            scores=op.scores.model_dump() if op.scores is not None else None,
            confidence=op.confidence,
            due_at=op.due_at,
            source=SOURCE,
        )

    def _update_request(self, op: UpdateOp, old: Memory) -> AddRequest:
        """The new memory inherits what the model left out: category, scores, keywords, due date (while it is a
        todo: a todo made a fact leaves its due date behind)."""
        scores = old.scores.model_dump()
        if op.scores is not None:
            scores.update({k: v for k, v in op.scores.model_dump().items() if v is not None})
        category = op.category or old.category
        return AddRequest(
            content=op.content,
            category=category,
            keywords=_keywords(op.keywords if op.keywords is not None else old.keywords),
            scores=scores,
            confidence=op.confidence,
            supersedes=old.id,
            due_at=op.due_at or (old.due_at if category == Category.todo else None),  # a todo's alone
            source=SOURCE,
        )

    def _item(self, checked: Checked, result: StepResult | None) -> RememberItem:
        op, target = checked.op, checked.target
        # What the model proposed is shown as it was stored: secrets redacted, in the text and in its reason.
        base = {"op": op.op, "reason": _shown(op.reason)}
        if isinstance(op, SkipOp):
            return RememberItem(**base, status="skipped", message="Nothing to remember.")
        if isinstance(op, AddOp | UpdateOp):
            assert isinstance(result, AddResult)
            return RememberItem(
                **base,
                status=result.status,
                memory_id=result.memory_id,
                pending_id=result.pending_id,
                superseded=result.superseded,
                content=_shown(op.content.strip()),
                category=op.category or (target.category if target else None),
                confidence=op.confidence,
                message=result.message,
            )
        assert target is not None
        if isinstance(op, BoostOp):
            return RememberItem(
                **base, status="reinforced", memory_id=target.id, content=target.content, category=target.category,
                message="Reinforced: it shaped the reply (use_count and last_active_at refreshed).",
            )
        if isinstance(result, PatchResult) and result.status == "unchanged":
            return RememberItem(
                **base, status="duplicate", memory_id=target.id, content=result.memory.content,
                category=target.category, confidence=op.confidence,
                message="Nothing new: the core memory already says this; nothing was written.",
            )
        if isinstance(result, PatchResult):
            return RememberItem(
                **base, status="patched", memory_id=target.id, content=result.memory.content,
                category=target.category, confidence=op.confidence,
                message=f"Core memory patched; the previous text is revision {result.revision_id}.",
            )
        if isinstance(result, ForgetResult):
            return RememberItem(
                **base, status="forgotten", memory_id=target.id, content=target.content, category=target.category,
                confidence=op.confidence, message=result.message,
            )
        # PATCH or FORGET below the store threshold: not done; the agent may ask the user.
        assert isinstance(op, PatchOp | ForgetOp)
        settings = self.settings
        if route(op.confidence, settings) == "discard":
            return RememberItem(
                **base, status="discarded", memory_id=target.id, confidence=op.confidence,
                message=f"Not applied: confidence {op.confidence:g} is below {settings.pending_threshold:g}.",
            )
        call = (
            f'patch_core_memory(memory_id="{target.id}", patch="{_shown(op.patch)}", mode="{op.mode}")'
            if isinstance(op, PatchOp) else f'forget_memory(memory_id="{target.id}")'
        )
        return RememberItem(
            **base, status="needs_confirmation", memory_id=target.id,
            content=_shown(op.patch) if isinstance(op, PatchOp) else target.content, confidence=op.confidence,
            message=f"Not applied: confidence {op.confidence:g} < {settings.store_threshold:g}. Ask the user; "
            f"if they agree, call {call}.",
        )


def _quoted(text: str) -> str:
    """`text` as one JSON string that no reader splits into lines (U+0085, U+2028 and U+2029 escaped too)."""
    return json.dumps(text, ensure_ascii=False).translate(_LINE_BREAKS)


def _shown(text: str | None) -> str | None:
    return privacy.scrub(text).text if text else text


def _keywords(raw: Sequence[str]) -> list[str]:
    """Keywords only help search: keep the usable ones rather than failing the answer over them."""
    kept: list[str] = []
    for keyword in raw:
        cleaned = keyword.strip()
        if cleaned and len(cleaned) <= MAX_KEYWORD_CHARS and cleaned not in kept:
            kept.append(cleaned)
    return kept[:MAX_KEYWORDS]


def _summary(items: list[RememberItem], evicted: int, trash_days: int) -> str:
    if not items:
        return "Nothing to remember."
    counts: dict[str, int] = {}
    for item in items:
        counts[item.status] = counts.get(item.status, 0) + 1
    text = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in counts.items()) + "."
    if counts.get("pending") or counts.get("needs_confirmation"):
        text += " Ask the user about the uncertain ones (confirm_pending for pending items)."
    if evicted:
        text += f" {evicted} low-importance memories moved to the trash (restorable for {trash_days} days)."
    return text
