"""Project.md's rolling summary (docs/profile.md, "Project memories and Project.md": past ~100 lines the
oldest part is summarised).

Project.md shows the newest POCKETMEM_PROJECT_LINES project memories. The older ones always stay in the
database verbatim (memories of category project: list_memories(category="project") pages through them).
When an LLM is configured (POCKETMEM_LLM_BASE_URL / POCKETMEM_LLM_MODEL, the chat endpoint of
remember_conversation), each maintenance run also asks it for a short summary of those older entries, kept
in the profile (section project_summary) and shown under "Earlier" in Project.md and memory://project.
Without an LLM, or when it fails, the "Earlier" section only says how many entries are archived.
The summary is asked again only when the set of older entries has changed.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import PocketmemError
from pocketmem.base.models import Category, EventKind
from pocketmem.core import privacy
from pocketmem.core.formatting import one_line
from pocketmem.core.text import clean_text, guess_language
from pocketmem.providers.llm import ChatModel, ChatRequest, ChatTurn, configured_model
from pocketmem.store.base import Transactions
from pocketmem.store.types import MemoryFilter

log = logging.getLogger(__name__)

SECTION = "project_summary"
MAX_OLDER = 500  # entries the summary covers at most (the newest of the older ones)
MAX_SUMMARY_CHARS = 1500
PROMPT = (
    "You keep a project log short. Summarise the project notes below (oldest first) in at most 6 bullet lines "
    "starting with '- ', in the language of the notes: decisions, milestones, what was finished. No preamble."
)


class ProjectSummary:
    def __init__(
        self, settings: Settings, store: Transactions, clock: Clock,
        model_factory: Callable[[Settings], ChatModel | None] = configured_model,
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self._model_factory = model_factory
        self._model: ChatModel | None = None

    async def aclose(self) -> None:
        if self._model is not None:
            await self._model.aclose()

    async def refresh(self, user_id: str) -> bool:
        """Summarise the entries Project.md no longer shows, if an LLM is configured; True when it changed."""
        async with self.store.read() as reader:
            older, _ = await reader.list_memories(
                user_id,
                MemoryFilter(category=Category.project, limit=MAX_OLDER, offset=self.settings.project_lines),
            )
            stored = (await reader.get_profile(user_id)).get(SECTION, {})
        if not older:
            return False
        covers = hashlib.sha256("|".join(m.id for m in older).encode()).hexdigest()[:32]
        if stored.get("covers") == covers:
            return False
        if self._model is None:
            self._model = self._model_factory(self.settings)
        if self._model is None:
            return False
        notes = "\n".join(f"- {one_line(m.content)}" for m in reversed(older))
        try:
            answer = await self._model.complete(
                ChatRequest(system=PROMPT, turns=(ChatTurn("user", notes),), max_tokens=600),
                self.settings.llm_timeout,
            )
            text = clean_text(answer.text, "summary", max_chars=100_000)[:MAX_SUMMARY_CHARS]
        except PocketmemError as exc:
            log.warning("project summary for %s: %s", user_id, exc)
            return False
        text = privacy.screen(text).text
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        lines = [line if line.startswith("- ") else f"- {line.lstrip('-* ')}" for line in lines]
        now = self.clock.now()
        async with self.store.write(user_id=user_id) as tx:
            await tx.put_profile(user_id, SECTION, {"text": "\n".join(lines), "covers": covers,
                                                    "count": len(older), "lang": guess_language(notes)}, now)
            await tx.add_event(user_id, EventKind.profile_updated, now,
                               payload={"section": SECTION, "entries": len(older)})
        return True
