"""Helpers for the remember_conversation tests: a client-side model that answers MCP sampling requests
from a script, the labels the server gave the related memories, and a snapshot of everything a failed
extraction must leave unchanged."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.types import CreateMessageRequestParams, CreateMessageResult, TextContent

from pocketmem.app import PocketMem
from pocketmem.base.models import PendingStatus, Status
from pocketmem.store.types import MemoryFilter

Script = str | Callable[[str], str]  # a fixed answer, or one computed from the prompt (to use its labels)

_LABEL_ZH = re.compile(r"^(m\d+)（[^）]*）：(.*)$", re.MULTILINE)
_LABEL_EN = re.compile(r"^(m\d+) \([^)]*\): (.*)$", re.MULTILINE)


def labels(prompt: str) -> dict[str, str]:
    """content -> label (m1, m2, ...) as the server listed the related memories in its prompt."""
    found = _LABEL_ZH.findall(prompt) or _LABEL_EN.findall(prompt)
    return {json.loads(content): label for label, content in found}  # each memory is shown as a JSON string


def ops(*operations: dict[str, Any]) -> str:
    return json.dumps({"operations": list(operations)}, ensure_ascii=False)


@dataclass
class ScriptedSampler:
    """A `sampling_callback` for mcp.Client: answers each sampling/createMessage with the next script entry."""

    script: list[Script]
    model: str = "fake-client-model"
    requests: list[CreateMessageRequestParams] = field(default_factory=list)
    gate: anyio.Event | None = None  # when set, every answer waits for it
    entered: anyio.Event = field(default_factory=anyio.Event)
    before_answer: Callable[[], Awaitable[None]] | None = None

    async def __call__(self, context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        self.requests.append(params)
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.before_answer is not None:
            await self.before_answer()
        if not self.script:
            raise AssertionError("the server asked the client's model more often than scripted")
        entry = self.script.pop(0)
        prompt = params.messages[0].content.text  # type: ignore[union-attr]
        text = entry(prompt) if callable(entry) else entry
        return CreateMessageResult(role="assistant", model=self.model, content=TextContent(type="text", text=text))


async def snapshot(app: PocketMem, user: str = "global") -> dict[str, Any]:
    """Every row a failed extraction must leave untouched."""
    async with app.store.read() as r:
        memories = []
        for status in Status:
            items, _ = await r.list_memories(user, MemoryFilter(statuses=(status,), limit=500))
            memories += [(m.id, m.content, m.status, m.use_count, m.last_active_at, m.valid_until) for m in items]
        pending, _ = await r.list_pending(user, tuple(PendingStatus), 500)
        revisions = [rev.id for m in memories for rev in await r.list_revisions(user, m[0])]
        tombstones = await r.list_tombstones(user, 500)
        events = await r.list_events(user, 10_000)
    return {
        "memories": sorted(memories, key=lambda m: m[0]),
        "pending": sorted((p.id, p.status) for p in pending),
        "revisions": sorted(revisions),
        "tombstones": len(tombstones),
        "events": len(events),
    }
