"""The write path: add_memory and bulk adds, routed by confidence, deduplicated, capped.

Write path (design "Write path"):
    by confidence (core/routing.py)         -> stored, pending until confirm_pending, or discarded (logged)
    same normalised content as an active memory -> duplicate: the existing one is reinforced
    supersedes                              -> checked first, pending or not (`supersede_target`); the old memory
                                               is closed by the new one, or by the duplicate that already says it
    same content as a rejected pending item -> discarded (reason rejected): the user is not asked again
    the same fact as one the user forgot    -> an extraction's (`automatic`): discarded (reason forgotten), never
                                               brought back; an explicit add: written, its message saying when the
                                               user asked to forget it (duplicates.Duplicates.forgotten)
    stored (or found as a duplicate)        -> open pending items with that content are settled (confirmed with it)
    same operation_id as before             -> the first answer again, nothing written
    over the cap (max_active)               -> lowest-importance non-core memories to the trash (evicted)

The steps that run inside a write transaction (`store_in`, `pending_in`, `discard_in`, `refuse_secret_in`)
are public: batch import (batch.py) runs them per item inside one transaction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Literal

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import Conflict, ConflictReason, InvalidInput, NotFound
from pocketmem.base.models import EventKind, Memory, PendingItem, PendingStatus, Status
from pocketmem.base.results import AddResult
from pocketmem.core import privacy
from pocketmem.core.routing import route
from pocketmem.core.scoring import fill_scores, importance, is_core, lifetime_end
from pocketmem.core.text import content_hash
from pocketmem.service.shared.rows import indexed_text, new_id
from pocketmem.service.writing import chains
from pocketmem.service.writing.add_request import (
    AddRequest,
    clean_request,
    note_redactions,
    request_hash,
    screen_secrets,
)
from pocketmem.service.writing.duplicates import Duplicates, Forgotten
from pocketmem.service.writing.trash import Trash
from pocketmem.service.writing.vectors import Vectors
from pocketmem.store.base import Transactions
from pocketmem.store.roles import EventReads, EventWrites, MemoryWrites, WriteTx


class Writing:
    def __init__(
        self, settings: Settings, store: Transactions, clock: Clock, vectors: Vectors, trash: Trash
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.vectors = vectors
        self.trash = trash
        self.duplicates = Duplicates(vectors)
        self._known_users: set[str] = set()

    async def _ensure_user(self, tx: MemoryWrites, user_id: str, now: datetime) -> None:
        if user_id not in self._known_users:
            await tx.ensure_user(user_id, now)
            self._known_users.add(user_id)

    def clean(self, req: AddRequest) -> AddRequest:
        """The request checked and cleaned (add_request.clean_request) against the current time."""
        return clean_request(req, self.settings, self.clock.now())

    # -- add ------------------------------------------------------------------------------------
    async def add(self, user_id: str, request: AddRequest, *, temporary: bool = False) -> AddResult:
        req = self.clean(request)
        if temporary or self.settings.temporary:
            return AddResult(
                status="discarded",
                reason="temporary",
                message="Not stored: temporary mode is on, so nothing from this conversation is remembered.",
            )
        req, kinds, refused = screen_secrets(req, self.settings)
        if refused:
            async with self.store.write(user_id=user_id) as tx:
                return await self.refuse_secret_in(tx, user_id, kinds, self.clock.now())
        return note_redactions(await self._route(user_id, req), kinds)

    async def refuse_secret_in(self, tx: EventWrites, user_id: str, kinds: list[str], now: datetime) -> AddResult:
        """Inside a transaction: log (without the secret) an add refused because it carried one."""
        await tx.add_event(user_id, EventKind.discarded, now, payload={"reason": "secret", "kinds": kinds})
        emptied = ". " if self.settings.secrets == "refuse" else ", and nothing worth remembering is left without it. "
        return AddResult(
            status="discarded",
            reason="secret",
            redacted=kinds,
            message=(
                f"Not stored: it contains {privacy.named(kinds)}{emptied}Never save secrets; if it matters, "
                "save that the user has one (e.g. 'The user keeps the staging "
                "password in 1Password') without the value."
            ),
        )

    async def _route(self, user_id: str, req: AddRequest) -> AddResult:
        digest = request_hash(req)
        if req.operation_id is not None:
            async with self.store.read() as reader:
                replay = await self.replay(reader, user_id, req.operation_id, digest)
            if replay is not None:
                return replay
        now = self.clock.now()
        where = route(req.confidence, self.settings)
        if where != "store":
            step = self.discard_in if where == "discard" else self.pending_in
            async with self.store.write(user_id=user_id) as tx:
                return await self.once_in(tx, user_id, req, digest, now, partial(step, tx, user_id, req, now))
        vector = await self.vectors.embed_or_defer(req.content, req.keywords)

        async def work(tx: WriteTx) -> AddResult:
            try:
                step = partial(self.store_in, tx, user_id, req, vector, now)
                return await self.once_in(tx, user_id, req, digest, now, step)
            except BaseException:
                self._known_users.discard(user_id)  # its users row may have been undone with it
                raise

        # Embedded above, outside the lock; adds arriving together share one durable commit.
        result = await self.store.write_shared(work, user_id=user_id)
        if vector is None and result.status == "stored":
            self.vectors.deferred()
        return result

    async def add_many(self, user_id: str, requests: Sequence[AddRequest]) -> list[AddResult]:
        """Bulk write (imports, benchmarks): embeddings in batches, all requests in one transaction.

        Each request is routed exactly as add() would route it; the cap is enforced after every item.
        """
        cleaned = [self.clean(r) for r in requests]
        for i, req in enumerate(cleaned):
            if req.confidence < self.settings.store_threshold:
                raise InvalidInput(
                    f"[{i}].confidence",
                    f"bulk writes store directly; confidence must be >= {self.settings.store_threshold:g}",
                )
        vectors = await self.vectors.embed_many([(r.content, r.keywords) for r in cleaned])
        now = self.clock.now()
        results: list[AddResult] = []
        async with self.store.write(user_id=user_id) as tx:
            for req, vector in zip(cleaned, vectors, strict=True):
                step = partial(self.store_in, tx, user_id, req, vector, now)
                results.append(await self.once_in(tx, user_id, req, request_hash(req), now, step))
        return results

    async def discard_in(self, tx: EventWrites, user_id: str, req: AddRequest, now: datetime) -> AddResult:
        """Inside a transaction: log a candidate too uncertain to keep."""
        await tx.add_event(
            user_id, EventKind.discarded, now, operation_id=req.operation_id,
            payload={"content": req.content, "confidence": req.confidence},
        )
        return AddResult(
            status="discarded",
            reason="low_confidence",
            message=(
                f"Not stored: confidence {req.confidence:g} is below {self.settings.pending_threshold:g}. "
                "Only save what the user actually said or clearly implied."
            ),
        )

    @staticmethod
    async def replay(reader: EventReads, user_id: str, operation_id: str | None, digest: str) -> AddResult | None:
        """The answer already given for this operation_id, or None; InvalidInput if it was used for another call."""
        if operation_id is None:
            return None
        found = await reader.operation_result(user_id, operation_id)
        if found is None:
            return None
        stored_hash, result = found
        if stored_hash != digest:
            raise InvalidInput(
                "operation_id",
                f"{operation_id!r} was already used for a different add_memory call; use a new operation_id",
            )
        return AddResult.model_validate(result)

    @staticmethod
    async def record_result(
        tx: EventWrites, user_id: str, operation_id: str | None, digest: str, result: AddResult, now: datetime
    ) -> None:
        """Inside a transaction: remember the answer for this operation_id, so a retry gets it again."""
        if operation_id is not None:
            await tx.record_operation(user_id, operation_id, digest, result.model_dump(mode="json"), now)

    async def once_in(
        self,
        tx: WriteTx,
        user_id: str,
        req: AddRequest,
        digest: str,
        now: datetime,
        step: Callable[[], Awaitable[AddResult]],
    ) -> AddResult:
        """Inside a transaction: the answer already given for req.operation_id, or else `step`'s, recorded so a
        retry gets it again. `step` runs only when there is no earlier answer."""
        replay = await self.replay(tx, user_id, req.operation_id, digest)
        if replay is not None:
            return replay
        result = await step()
        await self.record_result(tx, user_id, req.operation_id, digest, result, now)
        return result

    async def pending_in(
        self, tx: WriteTx, user_id: str, req: AddRequest, now: datetime, *, automatic: bool = False
    ) -> AddResult:
        """Inside a transaction: a pending candidate (or the duplicate it already is, or the answer that the user
        rejected it before). `supersedes` is checked as for a stored memory. `automatic`: an extraction's, which
        never asks again about what the user forgot."""
        await self.supersede_target(tx, user_id, req.supersedes)
        digest = content_hash(req.content)
        existing = await tx.find_by_hash(user_id, digest, (Status.active,))
        # A duplicate that would supersede another memory is still a question: confirming it closes the other.
        if existing is not None and req.supersedes in (None, existing.id):
            return await self.duplicates.reinforce(tx, user_id, existing, req, now, None)
        waiting = await tx.find_pending_by_hash(user_id, digest)
        if waiting is not None:
            return AddResult(
                status="pending",
                pending_id=waiting.id,
                message="Already waiting for the user's confirmation (confirm_pending).",
            )
        declined = await tx.find_pending_by_hash(user_id, digest, (PendingStatus.rejected,))
        if declined is not None:
            return await self._declined_in(tx, user_id, req, declined, now)
        forgot = await self.duplicates.forgotten(tx, user_id, req.content, None)
        if forgot is not None and automatic:
            return await self._forgotten_in(tx, user_id, req, forgot, now)
        candidate = req.model_dump(mode="json", exclude={"operation_id"})
        candidate["content_hash"] = digest
        item = PendingItem(
            id=new_id(),
            user_id=user_id,
            candidate=candidate,
            confidence=req.confidence,
            status=PendingStatus.pending,
            created_at=now,
            updated_at=now,
        )
        await self._ensure_user(tx, user_id, now)
        await tx.insert_pending(item)
        await tx.add_event(
            user_id, EventKind.pending, now, operation_id=req.operation_id,
            payload={"pending_id": item.id, "content": req.content, "confidence": req.confidence},
        )
        return AddResult(
            status="pending",
            pending_id=item.id,
            message=(
                (
                    "Waiting for confirmation: confirm-everything is on (POCKETMEM_CONFIRM_ALL). "
                    if self.settings.confirm_all
                    else f"Waiting for confirmation (confidence {req.confidence:g} "
                    f"< {self.settings.store_threshold:g}). "
                )
                + "Ask the user at a natural moment, then call confirm_pending with action confirm, reject or snooze."
                + self._forgotten_note(forgot)
            ),
        )

    async def _declined_in(
        self, tx: EventWrites, user_id: str, req: AddRequest, declined: PendingItem, now: datetime
    ) -> AddResult:
        """Inside a transaction: log a candidate the user already rejected when asked; it is not asked again."""
        return await _discarded(
            tx, user_id, req, now, "rejected", declined.id,
            f"Not stored: the user rejected this memory when asked (pending {declined.id}), so it is not asked "
            f"again. Save it only if the user now says it plainly (confidence >= {self.settings.store_threshold:g}).",
        )

    async def _forgotten_in(
        self, tx: EventWrites, user_id: str, req: AddRequest, forgot: Forgotten, now: datetime
    ) -> AddResult:
        """Inside a transaction: log an extraction's candidate the user asked to forget; it is not brought back."""
        return await _discarded(
            tx, user_id, req, now, "forgotten", forgot.memory_id,
            f"Not stored: the user asked to forget this on {self._day(forgot.deleted_at)} ({_which(forgot)}), so it "
            "is not brought back from a conversation. Save it only if the user now asks you to remember it "
            "(add_memory).",
        )

    def _forgotten_note(self, forgot: Forgotten | None) -> str:
        """For an explicit add of what the user forgot: the sentence that says so, or ""."""
        if forgot is None:
            return ""
        return (
            f" Note: this was forgotten at the user's request on {self._day(forgot.deleted_at)} ({_which(forgot)}); "
            "if it should stay forgotten, forget the new one too."
        )

    def _day(self, when: datetime | None) -> str:
        return when.astimezone(self.settings.zone).date().isoformat() if when is not None else "an earlier day"

    async def supersede_target(self, tx: WriteTx, user_id: str, memory_id: str | None) -> Memory | None:
        """The memory a request supersedes, checked: it exists, is active and is not core (else NotFound or
        Conflict). The one rule for every write that supersedes: stored, pending, and confirm_pending's check
        that the target is still one."""
        if memory_id is None:
            return None
        old = await tx.get_memory(user_id, memory_id)
        if old is None:
            raise NotFound(f"supersedes: no memory with id {memory_id!r}; check the id with list_memories")
        if old.status != Status.active:
            raise Conflict(
                f"supersedes: memory {old.id} is {old.status.value}, only an active memory can be superseded",
                ConflictReason.not_active, status=old.status.value,
            )
        if old.core:
            raise Conflict(
                f"supersedes: memory {old.id} is a core memory; change it with patch_core_memory "
                "(mode append or replace) instead", ConflictReason.core_patched,
            )
        return old

    async def _settle_pending_in(self, tx: WriteTx, user_id: str, digest: str, memory_id: str, now: datetime) -> str:
        """Inside a transaction: open pending items asking about content now remembered as `memory_id` are
        confirmed with it (the user is not asked about what is stored); the sentence that says so, or ""."""
        settled: list[str] = []
        while (item := await tx.find_pending_by_hash(user_id, digest)) is not None and item.id not in settled:
            await tx.update_pending(
                user_id, item.id, status=PendingStatus.confirmed, memory_id=memory_id, updated_at=now
            )
            await tx.add_event(
                user_id, EventKind.confirmed, now, memory_id=memory_id,
                payload={"pending_id": item.id, "by": "stored"},
            )
            settled.append(item.id)
        if not settled:
            return ""
        return (
            f" It also settles pending {', '.join(settled)}, which asked the user about the same memory: "
            "confirmed with it, no longer asked."
        )

    def _new_memory(self, user_id: str, req: AddRequest, digest: str, now: datetime) -> Memory:
        scores = fill_scores(req.category, req.scores)
        created = _said_at(req, now)
        info, coef, imp = importance(scores, created, now)
        expires_at = req.expires_at or lifetime_end(req.category, created, self.settings.episode_days)
        return Memory(
            id=new_id(),
            user_id=user_id,
            content=req.content,
            category=req.category,
            keywords=req.keywords,
            scores=scores,
            info_importance=info,
            time_coef=coef,
            importance=imp,
            confidence=req.confidence,
            source=req.source,
            source_ref=req.source_ref,
            created_at=created,
            updated_at=now,
            valid_from=_valid_from(req, now),
            status=Status.active,
            supersedes=req.supersedes,
            expires_at=expires_at,
            due_at=req.due_at,
            remind_at=req.remind_at,
            completed_at=req.completed_at,
            content_hash=digest,
            embed_model=self.vectors.embedder.tag,
        )

    async def store_in(
        self, tx: WriteTx, user_id: str, req: AddRequest, vector: Sequence[float] | None, now: datetime,
        *, cap: bool = True, automatic: bool = False,
    ) -> AddResult:
        """Inside a transaction: store (or find the duplicate), supersede, settle pending items asking the same,
        and enforce the cap unless `cap` is off (a batch enforces it once, after all its writes). `automatic`: an
        extraction's, which never brings back what the user forgot."""
        digest = content_hash(req.content)
        if vector is not None and not await self.vectors.agree_in(tx):
            vector = None  # the store records another embedder's vectors: neither compared with nor stored
        old = await self.supersede_target(tx, user_id, req.supersedes)
        existing = await tx.find_by_hash(user_id, digest, (Status.active,))
        if existing is None:
            existing = await self.duplicates.near_duplicate(tx, user_id, req.content, vector, skip=req.supersedes)
        if existing is not None:
            result = await self.duplicates.reinforce(tx, user_id, existing, req, now, vector)
            message = result.message
            if old is not None and old.id == existing.id:
                old = None  # the same content as the memory it supersedes is that memory: nothing to close
            if old is not None:  # the duplicate already says what replaces `old`
                await chains.close(tx, user_id, old, existing, _valid_from(req, now), now, req.operation_id)
                message += _replaces(old.id)
            message += await self._settle_pending_in(tx, user_id, digest, existing.id, now)
            return result.model_copy(update={"superseded": old.id if old else None, "message": message})
        forgot = await self.duplicates.forgotten(tx, user_id, req.content, vector)
        if forgot is not None and automatic:
            return await self._forgotten_in(tx, user_id, req, forgot, now)
        memory = self._new_memory(user_id, req, digest, now)
        await self._ensure_user(tx, user_id, now)
        await tx.insert_memory(memory, vector, indexed_text(memory.content, memory.keywords))
        await tx.add_event(
            user_id, EventKind.created, now, memory_id=memory.id, operation_id=req.operation_id,
            payload={"category": memory.category.value, "core": memory.core, "importance": round(memory.importance, 4)},
        )
        if old is not None:
            await chains.close(tx, user_id, old, memory, _valid_from(req, now), now, req.operation_id)
        settled = await self._settle_pending_in(tx, user_id, digest, memory.id, now)
        evicted = await self.trash.enforce_cap(tx, user_id, now, keep=[memory.id]) if cap else []
        return AddResult(
            status="stored",
            memory_id=memory.id,
            importance=round(memory.importance, 4),
            core=memory.core,
            superseded=old.id if old else None,
            evicted=evicted,
            message=self._stored_message(memory, old, vector is None, len(evicted)) + settled
            + self._forgotten_note(forgot),
        )

    def _stored_message(self, memory: Memory, old: Memory | None, no_vector: bool, evicted: int) -> str:
        kind = "core memory" if is_core(memory.scores) else f"{memory.category.value} memory"
        message = f"Stored as {'an' if kind[0] in 'aeiou' else 'a'} {kind} (importance {memory.importance:.2f})."
        if old is not None:
            message += _replaces(old.id)
        if no_vector:
            message += self.vectors.missing_note()
        if evicted:
            moved = "1 low-importance memory" if evicted == 1 else f"{evicted} low-importance memories"
            message += f" {moved} moved to the trash (restorable for {self.settings.trash_days} days)."
        return message


async def _discarded(
    tx: EventWrites,
    user_id: str,
    req: AddRequest,
    now: datetime,
    reason: Literal["rejected", "forgotten"],
    because: str,
    message: str,
) -> AddResult:
    """Inside a transaction: log a candidate not stored because of what the user said before (`reason`: rejected
    when asked, or forgotten; `because`: that pending item's or memory's id) and answer `discarded`."""
    await tx.add_event(
        user_id, EventKind.discarded, now, operation_id=req.operation_id,
        payload={"content": req.content, "confidence": req.confidence, reason: because},
    )
    return AddResult(status="discarded", reason=reason, message=message)


def _said_at(req: AddRequest, now: datetime) -> datetime:
    """When a request was said: its created_at, else now. Nothing is said after now: a created_at ahead of the
    clock (add_request.clean_request lets one day through, for a client whose clock or zone is a little off) is
    stored as now, so its age reads 今天 / today and it never ranks as fresher than what was just said."""
    return min(req.created_at or now, now)


def _valid_from(req: AddRequest, now: datetime) -> datetime:
    """When what a request says became true: its valid_from, else when it was said (created_at), else now; as
    `_said_at`, never after now."""
    return min(req.valid_from or req.created_at or now, now)


def _replaces(old_id: str) -> str:
    return f" It replaces {old_id}, kept as history (include_history)."


def _which(forgot: Forgotten) -> str:
    """Where the forgotten memory is: in the trash, or gone with only its tombstone left."""
    where = "in the trash" if forgot.in_trash else "no longer in the trash: only its tombstone is kept"
    return f"memory {forgot.memory_id}, {where}"
