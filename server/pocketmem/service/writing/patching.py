"""Patching a core memory: append to it or replace it, keeping the previous text as a revision.

Only active core memories (persistence 1) are patched; any other memory changes by superseding it.
The new text's vector is computed before the write transaction, from the text the patch would make.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import Conflict, ConflictReason, InvalidInput, InvalidReason, NotFound
from pocketmem.base.models import EventKind, Memory, Revision, Status
from pocketmem.base.results import MemoryView, PatchResult
from pocketmem.core import privacy
from pocketmem.core.text import clean_text, content_hash, patched_text
from pocketmem.service.shared.rows import indexed_text, new_id
from pocketmem.service.writing.add_request import MAX_SOURCE_CHARS
from pocketmem.service.writing.vectors import Vectors
from pocketmem.store.base import Transactions
from pocketmem.store.roles import MemoryTx


def require_core(memory: Memory | None, memory_id: str) -> Memory:
    """The memory, if it exists and is an active core memory; otherwise NotFound or Conflict."""
    if memory is None:
        raise NotFound(
            f"memory_id: no memory with id {memory_id!r}; find ids with list_memories or recall_memories"
        )
    if memory.status != Status.active:
        raise Conflict(
            f"memory {memory_id} is {memory.status.value}; only an active core memory can be patched",
            ConflictReason.not_active, status=memory.status.value,
        )
    if not memory.core:
        raise Conflict(
            f"memory {memory_id} is not a core memory (persistence {memory.scores.persistence:g} < 1); "
            "record the change with add_memory(content=..., supersedes=this id) instead", ConflictReason.not_core,
        )
    return memory


class Patching:
    def __init__(self, settings: Settings, store: Transactions, clock: Clock, vectors: Vectors) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.vectors = vectors

    async def patch_core(
        self, user_id: str, memory_id: str, patch: str, mode: Literal["append", "replace"], reason: str | None
    ) -> PatchResult:
        patch, redacted = self.screen_patch(
            clean_text(patch, "patch", max_chars=self.settings.max_content_chars), "patch"
        )
        if reason is not None:
            reason = privacy.kept_text(reason, "reason", max_chars=MAX_SOURCE_CHARS)
        async with self.store.read() as reader:
            memory = await reader.get_memory(user_id, memory_id)
        memory = require_core(memory, memory_id)
        now = self.clock.now()
        new_content = self.patched(memory.content, patch, mode, now)
        vector = await self.vectors.embed(new_content, memory.keywords)
        async with self.store.write(user_id=user_id) as tx:
            return await self.patch_in(
                tx, user_id, memory_id, patch, mode, reason, vector, now, redacted, prepared=new_content
            )

    def screen_patch(self, patch: str, field: str) -> tuple[str, list[str]]:
        """The patch with secrets redacted, and their kinds; refused (InvalidInput) when nothing else is left."""
        screened = privacy.screen(patch)
        if not screened.findings:
            return patch, []
        if self.settings.secrets == "refuse" or not privacy.meaningful(screened.text):
            raise InvalidInput(
                field, f"contains {privacy.named(screened.kinds)}; never save secrets, leave the value out",
                InvalidReason.secret, kinds=screened.kinds,
            )
        return screened.text, screened.kinds

    def patched(self, content: str, patch: str, mode: str, now: datetime, field: str = "patch") -> str:
        """The text a patch makes (text.patched_text: its form and its length limit)."""
        return patched_text(
            content, patch, mode, now, self.settings.zone, field=field, max_chars=self.settings.max_content_chars
        )

    async def patch_in(
        self, tx: MemoryTx, user_id: str, memory_id: str, patch: str, mode: Literal["append", "replace"],
        reason: str | None, vector: Sequence[float] | None, now: datetime, redacted: list[str] | None = None,
        *, prepared: str | None = None,
    ) -> PatchResult:
        """Inside a transaction: patch a core memory, keeping the previous text as a revision; a patch that makes
        the text it has already writes nothing (status unchanged).

        `vector` was computed from `prepared` before the transaction; if the memory changed meanwhile the
        vector would not match the text, so the patch is refused and can be retried. The new text goes without a
        vector (computed later) when there is none, or the store keeps another embedder's vectors.
        """
        memory = require_core(await tx.get_memory(user_id, memory_id), memory_id)
        new_content = self.patched(memory.content, patch, mode, now)
        if prepared is not None and new_content != prepared:
            raise Conflict(f"memory {memory_id} changed while it was being patched; send the patch again")
        if new_content == memory.content:  # as update_profile: the same text again is no change
            return PatchResult(status="unchanged", memory=MemoryView.of(memory), revision_id=None,
                               previous_content=memory.content, redacted=redacted or [])
        digest = content_hash(new_content)
        same = await tx.find_by_hash(user_id, digest, (Status.active,))
        if same is not None and same.id != memory.id:
            raise Conflict(f"patch: memory {same.id} already says this and is active; nothing was changed")
        revision = Revision(
            id=new_id(),
            memory_id=memory.id,
            user_id=user_id,
            previous_content=memory.content,
            new_content=new_content,
            mode=mode,
            reason=reason,
            created_at=now,
        )
        await tx.insert_revision(revision)
        if vector is not None and not await self.vectors.agree_in(tx):
            vector = None
        await tx.replace_content(
            user_id,
            memory.id,
            content=new_content,
            content_hash=digest,
            keywords=memory.keywords,
            vector=vector,
            text=indexed_text(new_content, memory.keywords),
            updated_at=now,
        )
        await tx.add_event(
            user_id, EventKind.patched, now, memory_id=memory.id,
            payload={"mode": mode, "revision_id": revision.id, "reason": reason},
        )
        updated = await tx.get_memory(user_id, memory.id)
        assert updated is not None
        return PatchResult(
            status="patched",
            memory=MemoryView.of(updated),
            revision_id=revision.id,
            previous_content=memory.content,
            redacted=redacted or [],
        )
