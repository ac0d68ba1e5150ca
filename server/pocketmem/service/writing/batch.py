"""Several write-path steps in one store transaction: all of them happen, or none does.

Each step goes through the same rules as its single-call twin (add_memory's confidence routing,
duplicates and supersedes; patch_core_memory; forget_memory; reinforce), so a batch never
writes what those calls would refuse. Everything that can be checked or computed without the
store's write lock — input cleaning, embeddings — happens first; then one transaction applies
the steps in order and enforces the cap once, never evicting a memory the batch just wrote.
A step that fails (say, its target was forgotten meanwhile) rolls the whole batch back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pocketmem.base.errors import InvalidInput
from pocketmem.base.results import AddResult, EvictedItem, ForgetResult, PatchResult
from pocketmem.core import privacy
from pocketmem.core.routing import route
from pocketmem.core.text import clean_text
from pocketmem.service.shared.reinforcement import record_used
from pocketmem.service.writing.add_request import MAX_SOURCE_CHARS, AddRequest, note_redactions, screen_secrets
from pocketmem.service.writing.patching import Patching, require_core
from pocketmem.service.writing.writing import Writing


@dataclass(frozen=True)
class AddStep:
    request: AddRequest
    redacted: list[str] = field(default_factory=list)  # kinds of secrets removed before storing
    automatic: bool = False  # an extraction's: what the user forgot is discarded, not brought back


@dataclass(frozen=True)
class PatchStep:
    memory_id: str
    patch: str
    mode: Literal["append", "replace"] = "append"
    reason: str | None = None
    redacted: list[str] = field(default_factory=list)
    prepared: str | None = None  # the patched text the vector was computed from


@dataclass(frozen=True)
class RefusedStep:
    """An add that carried a secret and nothing else worth keeping: answered as discarded, never written."""

    kinds: list[str]


@dataclass(frozen=True)
class ForgetStep:
    memory_id: str
    reason: str | None = None


@dataclass(frozen=True)
class ReinforceStep:
    memory_ids: tuple[str, ...]


Step = AddStep | PatchStep | ForgetStep | ReinforceStep
StepResult = AddResult | PatchResult | ForgetResult | list[str]  # list: the ids reinforced


@dataclass
class BatchResult:
    results: list[StepResult]  # one per step, in order
    evicted: list[EvictedItem]


async def apply_batch(writing: Writing, patching: Patching, user_id: str, steps: Sequence[Step]) -> BatchResult:
    settings, store, trash, vectors = writing.settings, writing.store, writing.trash, writing.vectors
    now = writing.clock.now()
    ready: list[tuple[Step | RefusedStep, list[float] | None]] = []
    step: Step | RefusedStep
    for i, step in enumerate(steps):
        if isinstance(step, AddStep):
            req = writing.clean(step.request)
            if req.operation_id is not None:
                raise InvalidInput(f"steps[{i}].operation_id", "is not supported inside a batch")
            req, kinds, refused = screen_secrets(req, settings)
            if refused:
                ready.append((RefusedStep(kinds), None))
                continue
            stored = route(req.confidence, settings) == "store"
            vector = await vectors.embed_or_defer(req.content, req.keywords) if stored else None
            ready.append((AddStep(req, kinds, step.automatic), vector))
        elif isinstance(step, PatchStep):
            patch, redacted = patching.screen_patch(
                clean_text(step.patch, f"steps[{i}].patch", max_chars=settings.max_content_chars), f"steps[{i}].patch"
            )
            reason = _reason(step.reason, i)
            async with store.read() as reader:
                memory = require_core(await reader.get_memory(user_id, step.memory_id), step.memory_id)
            new_content = patching.patched(memory.content, patch, step.mode, now, f"steps[{i}].patch")
            vector = await vectors.embed(new_content, memory.keywords)
            ready.append((PatchStep(step.memory_id, patch, step.mode, reason, redacted, new_content), vector))
        elif isinstance(step, ForgetStep):
            ready.append((ForgetStep(step.memory_id, _reason(step.reason, i)), None))
        else:
            ready.append((step, None))

    results: list[StepResult] = []
    async with store.write(user_id=user_id) as tx:
        for step, vector in ready:
            if isinstance(step, RefusedStep):
                results.append(await writing.refuse_secret_in(tx, user_id, step.kinds, now))
            elif isinstance(step, AddStep):
                req = step.request
                where = route(req.confidence, settings)
                if where == "discard":
                    result = await writing.discard_in(tx, user_id, req, now)
                elif where == "pending":
                    result = await writing.pending_in(tx, user_id, req, now, automatic=step.automatic)
                else:
                    result = await writing.store_in(
                        tx, user_id, req, vector, now, cap=False, automatic=step.automatic
                    )
                results.append(note_redactions(result, step.redacted))
            elif isinstance(step, PatchStep):
                results.append(
                    await patching.patch_in(
                        tx, user_id, step.memory_id, step.patch, step.mode, step.reason, vector, now, step.redacted,
                        prepared=step.prepared,
                    )
                )
            elif isinstance(step, ForgetStep):
                results.append(await trash.forget_in(tx, user_id, step.memory_id, step.reason, now))
            else:
                results.append(await record_used(tx, user_id, step.memory_ids, now))
        written = [
            r.memory_id
            for r in results
            if isinstance(r, AddResult) and r.status == "stored" and r.memory_id is not None
        ]
        evicted = await trash.enforce_cap(tx, user_id, now, keep=written)
    if any(isinstance(step, AddStep) and vector is None for step, vector in ready):
        vectors.deferred()  # stored without a vector: the embed queue computes it
    return BatchResult(results=results, evicted=evicted)


def _reason(reason: str | None, i: int) -> str | None:
    return privacy.kept_text(reason, f"steps[{i}].reason", max_chars=MAX_SOURCE_CHARS) if reason is not None else None
