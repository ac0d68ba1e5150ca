"""The memory_context package (docs/profile.md, "The context package"): system memory, recent context and
long-term evidence within POCKETMEM_CONTEXT_TOKENS, trimmed in the documented order (core/context_budget.py),
counted with core/tokens_estimate.py.

    system memory     the persona and the user card (identity, core memories) and, until the user has
                      confirmed their profile, the onboarding note; a core memory it lists is not repeated
                      below
    long-term evidence recall hits for the message: 3, or 5 with history when the message calls for the
                      past (之前、还记得、上次、历史, a date, a file: core/triggers.py); shown first
    recent context    due reminders (a due todo recall found is listed here, not again as evidence), memories
                      waiting for confirmation, and, under a heading that says they are not chosen for the
                      message, other memories noted in the last 14 days: never one a secret was redacted from
                      (privacy.holds_placeholder: listed on every message, it would say which secrets exist and
                      where; recall still finds it when it is about the message), never an expired one (as
                      recall), never an older version of a fact a newer recent memory changed (core/slots.py), a
                      completed todo marked done
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.models import Memory, expired
from pocketmem.base.results import RecallHit, RecallResult
from pocketmem.core import privacy, slots
from pocketmem.core.context_budget import Block, Package, Shares, assemble, fit_system, shares
from pocketmem.core.formatting import InjectionItem, calendar_days, injection_line, one_line
from pocketmem.core.profile_text import profile_summary
from pocketmem.core.tokens_estimate import estimate_tokens
from pocketmem.core.triggers import long_term_trigger
from pocketmem.service.profile.profile import Profile
from pocketmem.service.profile.profile_files import ProfileFiles
from pocketmem.service.recall.retrieval import RecallRequest, Retrieval, checked_message
from pocketmem.service.shared.usercard import CARD_CORE_LIMIT, CARD_WORDS, temporary_card, user_language, who_lines
from pocketmem.service.upkeep.todos import shown_item
from pocketmem.store.base import Transactions
from pocketmem.store.types import MemoryFilter

RECENT_DAYS = 14
RECENT_LIMIT = 200
EVIDENCE_TOP_K = 3
EVIDENCE_TOP_K_LONG = 5


class ContextBuilder:
    def __init__(
        self, settings: Settings, store: Transactions, clock: Clock, retrieval: Retrieval, profile: Profile,
        files: ProfileFiles,
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.retrieval = retrieval
        self.profile = profile
        self.files = files

    async def build(self, user_id: str, message: str, context: Sequence[str] = ()) -> Package:
        # Refused above recall's limit before anything reads the message whole.
        lines = [checked_message(line, f"context[{i}]", allow_empty=True) for i, line in enumerate(context)]
        trigger = long_term_trigger("\n".join([checked_message(message, "query"), *lines]))
        await self.files.check(user_id)
        lang = await user_language(self.store, user_id, self.settings, message, self.clock.now())
        zh = lang == "zh"
        result = await self.retrieval.recall(
            user_id,
            RecallRequest(
                query=message, context=tuple(context)[-3:], keywords=trigger.files,
                top_k=EVIDENCE_TOP_K_LONG if trigger.long_term else EVIDENCE_TOP_K,
                include_history=trigger.long_term, lang=lang,
            ),
        )
        sh = shares(self.settings.context_tokens)
        footer = (
            "自然地运用这些记忆，不要生硬地说“我记得你说过……”。" if zh
            else "Use these memories naturally; don't announce that you remember them."
        )
        room = sh.usable - estimate_tokens(footer)
        system, on_card = await self._system(user_id, lang, sh, room, temporary=result.temporary)
        recent = await self._recent(user_id, result, lang)
        # Each memory is said once: a core memory on the card above is not repeated as evidence, and a due todo is
        # listed as a reminder (the recent context is trimmed after the evidence), as recall does.
        shown = on_card | {r.id for r in result.reminders}
        evidence = Block("[关于用户的相关记忆]" if zh else "[Relevant memories about the user]", [
            self._line(h, h.age_days, lang, outdated=h.outdated)
            for h in result.memories
            if h.id not in shown
        ])
        return assemble(system, recent, evidence, sh, estimate_tokens, footer)

    def _line(self, shown: Memory | RecallHit, days: int, lang: str, *, outdated: bool = False) -> str:
        """A memory's line, a todo called a reminder only when it is due (service/upkeep/todos.shown_item)."""
        return injection_line(shown_item(shown, days, self.clock.now(), self.settings.zone, lang, outdated=outdated),
                              lang)

    async def _system(
        self, user_id: str, lang: str, sh: Shares, room: int, *, temporary: bool
    ) -> tuple[str, set[str]]:
        """The persona and the card (core/context_budget.fit_system: the core list within its share, the persona
        and identity shortened only when the package has no room for them), and the ids of the core memories it
        lists."""
        if temporary:
            return temporary_card(lang), set()
        words = CARD_WORDS[lang]
        state = await self.profile.state(user_id)
        async with self.store.read() as reader:
            core = await reader.core_memories(user_id, CARD_CORE_LIMIT)
            total = await reader.count_core(user_id) if len(core) == CARD_CORE_LIMIT else len(core)
        persona = [f"- {p}" for p in profile_summary("persona", state.persona, lang)]
        who = [f"- {w}" for w in who_lines(user_id, state.identity, lang)]
        onboarding = await self.profile.onboarding(user_id, lang)
        headings = [f"# {words['title']}", f"## {words['who']}"] + [f"# {words['persona']}"] * bool(persona)
        fixed = estimate_tokens("\n".join([*headings, f"## {words['core']}" if core else "", onboarding or ""]))
        listed = [f"- {one_line(m.content)}" for m in core]
        # The `+N` counts every core memory, not only those read, as the card's does.
        profile, lines = fit_system(
            [*persona, *who], listed, fixed, sh, room, estimate_tokens, lambda n: f"- … +{n}", total
        )
        persona, who = [p for p in profile[:len(persona)] if p], [w for w in profile[len(persona):] if w]
        body = ([f"# {words['persona']}", *persona, ""] if persona else []) + [
            f"# {words['title']}", "", f"## {words['who']}", *who,
        ]
        body += ["", f"## {words['core']}", *lines] if lines else []
        body += ["", onboarding] if onboarding else []
        # The first core lines are kept whole, and a "… +N" note may follow in place of the rest.
        return "\n".join(body), {m.id for m, want, line in zip(core, listed, lines, strict=False) if line == want}

    async def _recent(self, user_id: str, result: RecallResult, lang: str) -> Block:
        zh = lang == "zh"
        now = self.clock.now()
        lines = [injection_line(InjectionItem(r.content, 0, reminder=r.label), lang) for r in result.reminders]
        lines += [
            (f"待确认：{one_line(p.content)}（pending_id {p.pending_id}）" if zh
             else f"Waiting for confirmation: {one_line(p.content)} (pending_id {p.pending_id})")
            for p in result.pending_confirmations
        ]
        if not result.temporary:
            shown = {h.id for h in result.memories} | {r.id for r in result.reminders}
            async with self.store.read() as reader:
                fresh, _ = await reader.list_memories(
                    user_id, MemoryFilter(since=now - timedelta(days=RECENT_DAYS), limit=RECENT_LIMIT)
                )
            zone = self.settings.zone
            lines += [
                self._line(m, calendar_days(m.created_at, now, zone), lang)
                for m in current_only([m for m in fresh if _recent_kind(m, now)])
                if m.id not in shown
            ]
        return Block(_recent_heading(zh, notices=bool(result.reminders or result.pending_confirmations)), lines)


def _recent_kind(memory: Memory, now: datetime) -> bool:
    """A memory the recent context may list: not core (the card shows those), none a secret was redacted from,
    not expired (recall hides it already)."""
    return not memory.core and not privacy.holds_placeholder(memory.content) and not expired(memory.expires_at, now)


def current_only(memories: Sequence[Memory]) -> list[Memory]:
    """The memories less those a newer one among them changed (用户住在北京, then 用户搬到杭州了: the first goes).
    Only a text that says a change (or speaks of now) can make another outdated: the others are never tagged."""
    changers = [m for m in memories if any(slots.says_change(m.content))]
    if not changers:
        return list(memories)
    aliases = slots.alias_map(slots.describe(m.content) for m in changers)
    return [
        m for m in memories
        if not any(
            n.valid_from > m.valid_from
            and slots.shared_slots(slots.describe(m.content), slots.describe(n.content), aliases)
            for n in changers
        )
    ]


def _recent_heading(zh: bool, *, notices: bool) -> str:
    """The recent block's heading; with due reminders or confirmations in it (each line labelled), it names them
    apart: a todo overdue for months is no memory of the last 14 days."""
    if zh:
        head = "提醒与待确认；以及" if notices else ""
        return f"[{head}近期记下的其他记忆（最近{RECENT_DAYS}天，未必与这条消息有关）]"
    head = "Reminders and confirmations; other" if notices else "Other"
    return f"[{head} memories noted in the last {RECENT_DAYS} days (not necessarily about this message)]"
