"""The write path and the management of a memory's life: add, supersede, patch, forget, restore, confirm.

Every change is one store transaction that also writes its events, tombstones and revisions,
so a crash leaves either all of it or none of it.

Write path (design "Write path"):
    confidence >= store_threshold (0.85)    -> stored
    confidence >= pending_threshold (0.60)  -> pending, until confirm_pending
    otherwise                               -> discarded (logged, not stored)
    same normalised content as an active memory -> duplicate: the existing one is reinforced
    same operation_id as before             -> the first answer again, nothing written
    over the cap (max_active)               -> lowest-importance non-core memories to the trash (evicted)
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import Conflict, InvalidInput, NotFound, ProviderUnavailable
from pocketmem.base.models import (
    Category,
    DeleteReason,
    EventKind,
    Memory,
    PendingItem,
    PendingStatus,
    Revision,
    Status,
    Tombstone,
)
from pocketmem.base.results import (
    AddResult,
    ConfirmResult,
    EvictedItem,
    ForgetResult,
    MemoryList,
    MemoryView,
    PatchResult,
    PendingView,
    RestoreResult,
    TrashItem,
    TrashList,
)
from pocketmem.core import instants, privacy
from pocketmem.core.sameness import facts_agree
from pocketmem.core.scoring import fill_scores, importance, is_core
from pocketmem.core.text import (
    clean_text,
    content_hash,
    guess_language,
    has_cjk,
    normalise,
    query_terms,
    signature,
    strip_subject,
)
from pocketmem.core.text import (
    indexed_text as index_text_columns,
)
from pocketmem.providers.embeddings import Embedder
from pocketmem.service.calibration import Calibration
from pocketmem.service.reinforcement import record_used
from pocketmem.service.sameness import Sameness
from pocketmem.store import IndexedText, MemoryFilter, Store, StoreWriter

log = logging.getLogger(__name__)

MAX_KEYWORDS = 12
MAX_KEYWORD_CHARS = 40
MAX_SOURCE_CHARS = 500
MAX_OPERATION_ID_CHARS = 200
MAX_SNOOZE_HOURS = 24 * 90
# Near-duplicates: a duplicate is the same fact, not the same topic. A new memory is the same as an active one when
#   1. their content words are identical (text.signature: Han characters and Latin stems without filler;
#      negations and numbers kept), whatever the order or punctuation, or
#   2. both state the same numbers, negations and entities (core/sameness.facts_agree), and
#      a. the new text, subject words aside, is a verbatim part of the existing one (it says less), or
#      b. with an embedder that captures meaning (not the built-in lexical one): their cosine similarity
#         reaches the same-fact threshold calibrated for this embedder and language (service/sameness.py;
#         none for a language the model cannot tell facts apart in).
# Anything else is stored. Merging more eagerly loses facts (two talks at two events are two memories);
# recall's shadowing already orders same-topic pairs, the newer first.
NEAR_DUPLICATE_MIN_CHARS = 4
NEAR_DUPLICATE_TERMS = 16
NEAR_DUPLICATE_CANDIDATES = 10

DATE_FIELDS = ("created_at", "valid_from", "due_at", "remind_at", "expires_at")


class AddRequest(BaseModel):
    """Everything add_memory accepts, already type-checked by the MCP layer or the CLI."""

    content: str
    category: Category = Category.fact
    keywords: list[str] = Field(default_factory=list)
    scores: dict[str, float | None] | None = None
    confidence: float = 1.0
    supersedes: str | None = None
    created_at: datetime | None = None
    valid_from: datetime | None = None
    due_at: datetime | None = None
    remind_at: datetime | None = None
    expires_at: datetime | None = None
    source: str | None = None
    source_ref: str | None = None
    operation_id: str | None = None


def new_id() -> str:
    return uuid.uuid4().hex


def embedding_text(content: str, keywords: Sequence[str]) -> str:
    """What gets embedded: the content, with the agent's keywords appended as extra context."""
    return content if not keywords else f"{content}\n{' '.join(keywords)}"


def indexed_text(content: str, keywords: Sequence[str]) -> IndexedText:
    terms, kw_terms = index_text_columns(content, keywords)
    return IndexedText(terms=terms, keyword_terms=kw_terms)


def payload_hash(memory: Memory) -> str:
    body = memory.model_dump(mode="json", exclude={"use_count", "last_active_at", "time_coef", "importance"})
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


class Lifecycle:
    def __init__(
        self, settings: Settings, store: Store, embedder: Embedder, clock: Clock, calibration: Calibration
    ) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.clock = clock
        self.calibration = calibration
        self.sameness = Sameness(store, embedder)
        self.vectors_ready = False
        self._known_users: set[str] = set()
        # Called after a memory was stored without a vector; the app points it at the embed queue's wake-up.
        self.vector_deferred: Callable[[], None] = lambda: None

    async def _ensure_user(self, tx: StoreWriter, user_id: str, now: datetime) -> None:
        if user_id not in self._known_users:
            await tx.ensure_user(user_id, now)
            self._known_users.add(user_id)

    async def _embed(self, content: str, keywords: Sequence[str]) -> list[float]:
        vector = await self.embedder.embed(embedding_text(content, keywords))
        # Computed (and stored) now, outside any write transaction: the duplicate check inside one needs them.
        await self.calibration.scales()
        await self.sameness.thresholds()
        if not self.vectors_ready:
            # The first vector tells the size (OpenAI-compatible endpoints without POCKETMEM_EMBED_DIMENSIONS).
            await self.store.prepare_vectors(self.embedder.tag, len(vector))
            self.vectors_ready = True
        return vector

    async def _embed_or_defer(self, content: str, keywords: Sequence[str]) -> list[float] | None:
        """The vector, or None when the embedder cannot answer now: the memory is then stored without one,
        found by keyword at once, and embedded later by the embed queue (embed_queue.py)."""
        try:
            return await self._embed(content, keywords)
        except ProviderUnavailable as exc:
            log.warning("embedder unavailable, storing without a vector for now: %s", exc)
            return None

    # -- validation ---------------------------------------------------------------------------
    def _clean_request(self, req: AddRequest) -> AddRequest:
        content = clean_text(req.content, "content", max_chars=self.settings.max_content_chars)
        if len(req.keywords) > MAX_KEYWORDS:
            raise InvalidInput("keywords", f"at most {MAX_KEYWORDS} short terms, got {len(req.keywords)}")
        keywords: list[str] = []
        for i, keyword in enumerate(req.keywords):
            cleaned = clean_text(keyword, f"keywords[{i}]", max_chars=MAX_KEYWORD_CHARS)
            if cleaned not in keywords:
                keywords.append(cleaned)
        side = {
            name: privacy.kept_text(getattr(req, name), name, max_chars=limit)
            for name, limit in (("source", MAX_SOURCE_CHARS), ("source_ref", MAX_SOURCE_CHARS),
                                ("operation_id", MAX_OPERATION_ID_CHARS))
            if getattr(req, name) is not None
        }
        if not 0.0 <= req.confidence <= 1.0:
            raise InvalidInput("confidence", "must be between 0 and 1")
        for key, value in (req.scores or {}).items():
            if key not in ("emotion", "info", "persistence", "judge"):
                raise InvalidInput(f"scores.{key}", "unknown score; use emotion, info, persistence, judge")
            if value is not None and not 0.0 <= value <= 1.0:
                raise InvalidInput(f"scores.{key}", "must be between 0 and 1")
        dates = {name: self._instant(name, getattr(req, name)) for name in DATE_FIELDS}
        req = req.model_copy(update=dates)
        now = self.clock.now()
        if req.created_at is not None and req.created_at > now + timedelta(days=1):
            raise InvalidInput("created_at", "is in the future; leave it out to use the current time")
        if req.remind_at is not None and req.due_at is not None and req.remind_at > req.due_at:
            raise InvalidInput("remind_at", "must not be after due_at")
        return req.model_copy(update={"content": content, "keywords": keywords, **side})

    def _instant(self, field: str, value: datetime | None) -> datetime | None:
        """An aware UTC instant within the supported years (checked in UTC); no offset means the user's zone."""
        return None if value is None else instants.accept(field, value, self.settings.zone)

    @staticmethod
    def _request_hash(req: AddRequest) -> str:
        body = req.model_dump(mode="json", exclude={"operation_id"})
        return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]

    # -- add ------------------------------------------------------------------------------------
    async def add(self, user_id: str, request: AddRequest, *, temporary: bool = False) -> AddResult:
        req = self._clean_request(request)
        if temporary or self.settings.temporary:
            return AddResult(
                status="discarded",
                reason="temporary",
                message="Not stored: temporary mode is on, so nothing from this conversation is remembered.",
            )
        req, kinds, refused = self.screen_secrets(req)
        if refused:
            async with self.store.write() as tx:
                return await self._refuse_secret_in(tx, user_id, kinds, self.clock.now())
        return self.note_redactions(await self._route(user_id, req), kinds)

    def screen_secrets(self, req: AddRequest) -> tuple[AddRequest, list[str], bool]:
        """(request with secrets redacted, kinds found, refused?) — every write path passes through here."""
        screened = privacy.screen_memory(req.content, req.keywords)
        if not screened.kinds:
            return req, [], False
        if self.settings.secrets == "refuse" or not privacy.meaningful(screened.content):
            return req, screened.kinds, True
        cleaned = req.model_copy(update={"content": screened.content, "keywords": screened.keywords})
        return cleaned, screened.kinds, False

    @staticmethod
    def note_redactions(result: AddResult, kinds: list[str]) -> AddResult:
        if not kinds:
            return result
        return result.model_copy(
            update={
                "redacted": kinds, "message": f"{result.message} Removed before storing: {privacy.describe(kinds)}."
            }
        )

    async def _refuse_secret_in(self, tx: StoreWriter, user_id: str, kinds: list[str], now: datetime) -> AddResult:
        # The event says what was refused, never the secret itself.
        await tx.add_event(user_id, EventKind.discarded, now, payload={"reason": "secret", "kinds": kinds})
        return AddResult(
            status="discarded",
            reason="secret",
            redacted=kinds,
            message=(
                f"Not stored: it contains a {privacy.describe(kinds)}. Never save secrets; if it matters, save that "
                "the user has one (e.g. 'The user keeps the staging password in 1Password') without the value."
            ),
        )

    async def _route(self, user_id: str, req: AddRequest) -> AddResult:
        request_hash = self._request_hash(req)
        if req.operation_id is not None:
            async with self.store.read() as reader:
                replay = await self._replay(reader, user_id, req.operation_id, request_hash)
            if replay is not None:
                return replay
        now = self.clock.now()
        if req.confidence < self.settings.pending_threshold:
            async with self.store.write() as tx:
                replay = await self._replay(tx, user_id, req.operation_id, request_hash)
                if replay is not None:
                    return replay
                result = await self._discard_in(tx, user_id, req, now)
                await self._finish(tx, user_id, req.operation_id, request_hash, result, now)
            return result
        if req.confidence < self.settings.store_threshold or self.settings.confirm_all:
            # confirm_all (seed 002's "auto-extract off"): even confidence 1 waits for the user.
            return await self._add_pending(user_id, req, request_hash, now)
        vector = await self._embed_or_defer(req.content, req.keywords)

        async def work(tx: StoreWriter) -> AddResult:
            try:
                replay = await self._replay(tx, user_id, req.operation_id, request_hash)
                if replay is not None:
                    return replay
                result = await self._store(tx, user_id, req, vector, now)
                await self._finish(tx, user_id, req.operation_id, request_hash, result, now)
                return result
            except BaseException:
                self._known_users.discard(user_id)  # its users row may have been undone with it
                raise

        # Embedded above, outside the lock; adds arriving together share one durable commit.
        result = await self.store.write_shared(work)
        if vector is None and result.status == "stored":
            self.vector_deferred()
        return result

    async def add_many(self, user_id: str, requests: Sequence[AddRequest]) -> list[AddResult]:
        """Bulk write (imports, benchmarks): embeddings in batches, all requests in one transaction.

        Each request is routed exactly as add() would route it; the cap is enforced after every item.
        """
        cleaned = [self._clean_request(r) for r in requests]
        for i, req in enumerate(cleaned):
            if req.confidence < self.settings.store_threshold:
                raise InvalidInput(
                    f"[{i}].confidence",
                    f"bulk writes store directly; confidence must be >= {self.settings.store_threshold:g}",
                )
        vectors = await self.embedder.embed_many([embedding_text(r.content, r.keywords) for r in cleaned])
        await self.calibration.scales()
        await self.sameness.thresholds()
        if vectors and not self.vectors_ready:
            await self.store.prepare_vectors(self.embedder.tag, len(vectors[0]))
            self.vectors_ready = True
        now = self.clock.now()
        results: list[AddResult] = []
        async with self.store.write() as tx:
            for req, vector in zip(cleaned, vectors, strict=True):
                request_hash = self._request_hash(req)
                replay = await self._replay(tx, user_id, req.operation_id, request_hash)
                if replay is not None:
                    results.append(replay)
                    continue
                result = await self._store(tx, user_id, req, vector, now)
                await self._finish(tx, user_id, req.operation_id, request_hash, result, now)
                results.append(result)
        return results

    async def _discard_in(self, tx: StoreWriter, user_id: str, req: AddRequest, now: datetime) -> AddResult:
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

    async def _replay(self, reader: Any, user_id: str, operation_id: str | None, request_hash: str) -> AddResult | None:
        if operation_id is None:
            return None
        found = await reader.operation_result(user_id, operation_id)
        if found is None:
            return None
        stored_hash, result = found
        if stored_hash != request_hash:
            raise InvalidInput(
                "operation_id",
                f"{operation_id!r} was already used for a different add_memory call; use a new operation_id",
            )
        return AddResult.model_validate(result)

    async def _finish(
        self,
        tx: StoreWriter,
        user_id: str,
        operation_id: str | None,
        request_hash: str,
        result: AddResult,
        now: datetime,
    ) -> None:
        if operation_id is not None:
            await tx.record_operation(user_id, operation_id, request_hash, result.model_dump(mode="json"), now)

    async def _add_pending(self, user_id: str, req: AddRequest, request_hash: str, now: datetime) -> AddResult:
        async with self.store.write() as tx:
            replay = await self._replay(tx, user_id, req.operation_id, request_hash)
            if replay is not None:
                return replay
            result = await self._pending_in(tx, user_id, req, now)
            await self._finish(tx, user_id, req.operation_id, request_hash, result, now)
        return result

    async def _pending_in(self, tx: StoreWriter, user_id: str, req: AddRequest, now: datetime) -> AddResult:
        """Inside a transaction: a pending candidate (or the duplicate it already is)."""
        digest = content_hash(req.content)
        existing = await tx.find_by_hash(user_id, digest, (Status.active,))
        if existing is not None:
            return await self._reinforce(tx, user_id, existing, req, now)
        waiting = await tx.find_pending_by_hash(user_id, digest)
        if waiting is not None:
            return AddResult(
                status="pending",
                pending_id=waiting.id,
                message="Already waiting for the user's confirmation (confirm_pending).",
            )
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
            ),
        )

    async def _reinforce(
        self, tx: StoreWriter, user_id: str, existing: Memory, req: AddRequest, now: datetime
    ) -> AddResult:
        await tx.touch(user_id, [existing.id], now)
        merged = list(dict.fromkeys([*existing.keywords, *req.keywords]))[:MAX_KEYWORDS]
        # New keywords join the existing memory when re-embedding is an in-process computation; a remote
        # or neural embedder would hold the write lock for its round trip, so there the memory stays as is.
        if merged != existing.keywords and self.embedder.lexical:
            await tx.replace_content(
                user_id,
                existing.id,
                content=existing.content,
                content_hash=existing.content_hash,
                keywords=merged,
                vector=await self.embedder.embed(embedding_text(existing.content, merged)),
                text=indexed_text(existing.content, merged),
                updated_at=now,
            )
        await tx.add_event(
            user_id, EventKind.duplicate, now, memory_id=existing.id, operation_id=req.operation_id,
            payload={"content": req.content},
        )
        return AddResult(
            status="duplicate",
            memory_id=existing.id,
            importance=round(existing.importance, 4),
            core=existing.core,
            message="Already remembered; the existing memory was reinforced instead of stored twice.",
        )

    async def _store(
        self, tx: StoreWriter, user_id: str, req: AddRequest, vector: Sequence[float] | None, now: datetime,
        *, cap: bool = True,
    ) -> AddResult:
        """Inside a transaction: store (or find the duplicate), supersede, and enforce the cap unless `cap` is off
        (a batch enforces it once, after all its writes)."""
        digest = content_hash(req.content)
        existing = await tx.find_by_hash(user_id, digest, (Status.active,))
        if existing is None and req.supersedes is None:
            existing = await self._near_duplicate(tx, user_id, req.content, vector)
        if existing is not None:
            return await self._reinforce(tx, user_id, existing, req, now)
        old: Memory | None = None
        if req.supersedes is not None:
            old = await tx.get_memory(user_id, req.supersedes)
            if old is None:
                raise NotFound(f"supersedes: no memory with id {req.supersedes!r}; check the id with list_memories")
            if old.status != Status.active:
                raise Conflict(
                    f"supersedes: memory {old.id} is {old.status.value}, only an active memory can be superseded"
                )
            if old.core:
                raise Conflict(
                    f"supersedes: memory {old.id} is a core memory; change it with patch_core_memory "
                    "(mode append or replace) instead"
                )
        scores = fill_scores(req.category, req.scores)
        created = req.created_at or now
        valid_from = req.valid_from or created
        info, coef, imp = importance(scores, created, now)
        expires_at = req.expires_at
        if expires_at is None and req.category == Category.episode:
            expires_at = created + timedelta(days=self.settings.episode_days)
        memory = Memory(
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
            valid_from=valid_from,
            status=Status.active,
            supersedes=req.supersedes,
            expires_at=expires_at,
            due_at=req.due_at,
            remind_at=req.remind_at,
            content_hash=digest,
            embed_model=self.embedder.tag,
        )
        await self._ensure_user(tx, user_id, now)
        await tx.insert_memory(memory, vector, indexed_text(memory.content, memory.keywords))
        await tx.add_event(
            user_id, EventKind.created, now, memory_id=memory.id, operation_id=req.operation_id,
            payload={"category": memory.category.value, "core": memory.core, "importance": round(imp, 4)},
        )
        if old is not None:
            await tx.set_status(user_id, old.id, Status.superseded, updated_at=now, valid_until=valid_from)
            await tx.add_event(
                user_id, EventKind.updated, now, memory_id=memory.id, operation_id=req.operation_id,
                payload={"supersedes": old.id},
            )
        evicted = await self.enforce_cap(tx, user_id, now, keep=[memory.id]) if cap else []
        kind = "core memory" if is_core(scores) else f"{req.category.value} memory"
        message = f"Stored as {'an' if kind[0] in 'aeiou' else 'a'} {kind} (importance {imp:.2f})."
        if old is not None:
            message += f" It replaces {old.id}, kept as history (include_history)."
        if vector is None:
            message += (
                " The embedding endpoint did not answer, so it is found by keyword until its vector is computed"
                " in the background."
            )
        if evicted:
            moved = "1 low-importance memory" if len(evicted) == 1 else f"{len(evicted)} low-importance memories"
            message += f" {moved} moved to the trash (restorable for {self.settings.trash_days} days)."
        return AddResult(
            status="stored",
            memory_id=memory.id,
            importance=round(imp, 4),
            core=memory.core,
            superseded=old.id if old else None,
            evicted=evicted,
            message=message,
        )

    async def _near_duplicate(
        self, tx: StoreWriter, user_id: str, content: str, vector: Sequence[float] | None
    ) -> Memory | None:
        """An active memory that already says what `content` says (the rules above NEAR_DUPLICATE_MIN_CHARS)."""
        sig = signature(content)
        if not sig:
            return None
        # Rules 1 and 2 need a memory holding every content word of the new one: the keyword index finds
        # exactly those (Han characters and words are indexed one by one). Rule 3 needs the wider net.
        all_terms = self.embedder.lexical
        terms = sorted(sig) if all_terms else query_terms(content)[:NEAR_DUPLICATE_TERMS]
        if not terms:
            return None
        hits = [
            mid
            for mid, _ in await tx.keyword_hits(
                user_id, terms, NEAR_DUPLICATE_CANDIDATES, (Status.active,), all_terms=all_terms
            )
        ]
        if not hits:
            return None
        core = normalise(strip_subject(content))
        similar = {} if self.embedder.lexical or vector is None else await tx.similarities(user_id, hits, vector)
        # Inside a write transaction: use the threshold only if already known (measuring it writes to the store).
        same_fact = self.sameness.known(guess_language(content))
        for memory in await tx.get_memories(user_id, hits):
            if signature(memory.content) == sig:
                return memory
            if not facts_agree(content, memory.content):
                continue
            if len(core) >= NEAR_DUPLICATE_MIN_CHARS and core in normalise(strip_subject(memory.content)):
                return memory
            if same_fact is not None and similar.get(memory.id, -1.0) >= same_fact:
                return memory
        return None

    async def enforce_cap(self, tx: StoreWriter, user_id: str, now: datetime, keep: list[str]) -> list[EvictedItem]:
        over = await tx.count_active(user_id) - self.settings.max_active
        if over <= 0:
            return []
        evicted: list[EvictedItem] = []
        for victim in await tx.eviction_candidates(user_id, over, now, exclude=keep):
            purge_at = await self.trash_memory(tx, user_id, victim, DeleteReason.evicted, EventKind.evicted, now)
            evicted.append(
                EvictedItem(
                    id=victim.id,
                    content=victim.content,
                    importance=round(importance(victim.scores, victim.last_active_at or victim.created_at, now)[2], 4),
                    purge_at=purge_at,
                )
            )
        return evicted

    async def trash_memory(
        self, tx: StoreWriter, user_id: str, memory: Memory, reason: DeleteReason, kind: EventKind, now: datetime,
        note: str | None = None,
    ) -> datetime:
        purge_at = now + timedelta(days=self.settings.trash_days)
        # Eviction is the notebook running out of room, not a change to the memory: it keeps its updated_at,
        # so sync (sync_rules.py) never lets it outrank a real edit or delete made elsewhere.
        updated_at = memory.updated_at if reason == DeleteReason.evicted else now
        await tx.set_status(
            user_id, memory.id, Status.trashed, updated_at=updated_at, deleted_at=now, purge_at=purge_at,
            delete_reason=reason, valid_until=memory.valid_until,
        )
        await tx.insert_tombstone(
            Tombstone(
                tombstone_id=new_id(),
                memory_id=memory.id,
                user_id=user_id,
                deleted_at=now,
                purge_at=purge_at,
                reason=reason,
                payload_hash=payload_hash(memory),
            )
        )
        payload: dict[str, Any] = {"reason": reason.value, "purge_at": purge_at.isoformat()}
        if note:
            payload["note"] = note
        await tx.add_event(user_id, kind, now, memory_id=memory.id, payload=payload)
        return purge_at

    # -- patch ----------------------------------------------------------------------------------
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
        memory = self._require_core(memory, memory_id)
        now = self.clock.now()
        new_content = self._patched(memory.content, patch, mode, now)
        if len(new_content) > self.settings.max_content_chars:
            raise InvalidInput(
                "patch",
                f"would make the memory {len(new_content)} characters (limit {self.settings.max_content_chars}); "
                "use mode 'replace' with a rewritten, shorter memory",
            )
        vector = await self._embed(new_content, memory.keywords)
        async with self.store.write() as tx:
            return await self._patch_in(
                tx, user_id, memory_id, patch, mode, reason, vector, now, redacted, prepared=new_content
            )

    def screen_patch(self, patch: str, field: str) -> tuple[str, list[str]]:
        """The patch with secrets redacted, and their kinds; refused (InvalidInput) when nothing else is left."""
        screened = privacy.screen(patch)
        if not screened.findings:
            return patch, []
        if self.settings.secrets == "refuse" or not privacy.meaningful(screened.text):
            raise InvalidInput(
                field, f"contains a {privacy.describe(screened.kinds)}; never save secrets, leave the value out"
            )
        return screened.text, screened.kinds

    async def _patch_in(
        self, tx: StoreWriter, user_id: str, memory_id: str, patch: str, mode: Literal["append", "replace"],
        reason: str | None, vector: Sequence[float], now: datetime, redacted: list[str] | None = None,
        *, prepared: str | None = None,
    ) -> PatchResult:
        """Inside a transaction: patch a core memory, keeping the previous text as a revision.

        `vector` was computed from `prepared` before the transaction; if the memory changed meanwhile the
        vector would not match the text, so the patch is refused and can be retried.
        """
        memory = self._require_core(await tx.get_memory(user_id, memory_id), memory_id)
        new_content = self._patched(memory.content, patch, mode, now)
        if prepared is not None and new_content != prepared:
            raise Conflict(f"memory {memory_id} changed while it was being patched; send the patch again")
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
        await tx.replace_content(
            user_id,
            memory.id,
            content=new_content,
            content_hash=content_hash(new_content),
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
            memory=MemoryView.of(updated),
            revision_id=revision.id,
            previous_content=memory.content,
            redacted=redacted or [],
        )

    @staticmethod
    def _require_core(memory: Memory | None, memory_id: str) -> Memory:
        if memory is None:
            raise NotFound(
                f"memory_id: no memory with id {memory_id!r}; find ids with list_memories or recall_memories"
            )
        if memory.status != Status.active:
            raise Conflict(f"memory {memory_id} is {memory.status.value}; only an active core memory can be patched")
        if not memory.core:
            raise Conflict(
                f"memory {memory_id} is not a core memory (persistence {memory.scores.persistence:g} < 1); "
                "record the change with add_memory(content=..., supersedes=this id) instead"
            )
        return memory

    def _patched(self, content: str, patch: str, mode: str, now: datetime) -> str:
        if mode == "replace":
            return patch
        day = now.astimezone(self.settings.zone).date().isoformat()
        if has_cjk(content) or has_cjk(patch):
            return f"{content.rstrip()}（{day}：{patch}）"
        return f"{content.rstrip()} ({day}: {patch})"

    # -- forget / restore -------------------------------------------------------------------------
    async def forget(self, user_id: str, memory_id: str, reason: str | None) -> ForgetResult:
        if reason is not None:
            reason = privacy.kept_text(reason, "reason", max_chars=MAX_SOURCE_CHARS)
        now = self.clock.now()
        async with self.store.write() as tx:
            return await self._forget_in(tx, user_id, memory_id, reason, now)

    async def _forget_in(
        self, tx: StoreWriter, user_id: str, memory_id: str, reason: str | None, now: datetime
    ) -> ForgetResult:
        """Inside a transaction: move a memory to the trash on the user's behalf."""
        memory = await tx.get_memory(user_id, memory_id)
        if memory is None:
            raise NotFound(f"memory_id: no memory with id {memory_id!r}; find ids with list_memories")
        if memory.status == Status.trashed:
            raise Conflict(
                f"memory {memory_id} is already in the trash (purged after {memory.purge_at:%Y-%m-%d}); "
                "restore brings it back"
            )
        await self.trash_memory(tx, user_id, memory, DeleteReason.user_delete, EventKind.deleted, now, note=reason)
        trashed = await tx.get_memory(user_id, memory_id)
        assert trashed is not None
        return ForgetResult(
            item=TrashItem.of(trashed),
            message=f"Moved to the trash; restore(memory_id) brings it back until {trashed.purge_at:%Y-%m-%d}.",
        )

    # -- reinforce --------------------------------------------------------------------------------
    async def reinforce(self, user_id: str, memory_ids: Sequence[str]) -> list[str]:
        """Memories that shaped a reply (BOOST, or recall's `used`): one rule for both, review.record_used.

        Returns the ids reinforced: active memories of this user; others are ignored.
        """
        async with self.store.write() as tx:
            return await self._reinforce_in(tx, user_id, memory_ids, self.clock.now())

    async def _reinforce_in(
        self, tx: StoreWriter, user_id: str, memory_ids: Sequence[str], now: datetime
    ) -> list[str]:
        return await record_used(tx, user_id, memory_ids, now)

    async def restore(self, user_id: str, memory_id: str) -> RestoreResult:
        now = self.clock.now()
        async with self.store.write() as tx:
            memory = await tx.get_memory(user_id, memory_id)
            if memory is None:
                raise NotFound(
                    f"memory_id: nothing with id {memory_id!r} in the trash; it may have been purged. See list_trash"
                )
            if memory.status != Status.trashed:
                raise Conflict(f"memory {memory_id} is {memory.status.value}, not in the trash; nothing to restore")
            successor = await tx.successor_of(user_id, memory_id)
            status = Status.superseded if successor is not None else Status.active
            await tx.set_status(user_id, memory_id, status, updated_at=now, valid_until=memory.valid_until)
            await tx.mark_tombstones_restored(user_id, memory_id, now)
            if memory.delete_reason == DeleteReason.expired:
                # Brought back on purpose: it must not expire again at the next maintenance run.
                await tx.update_memory(user_id, memory_id, expires_at=None)
            await tx.add_event(user_id, EventKind.restored, now, memory_id=memory_id, payload={"status": status.value})
            evicted = await self.enforce_cap(tx, user_id, now, keep=[memory_id]) if status == Status.active else []
            restored = await tx.get_memory(user_id, memory_id)
        assert restored is not None
        return RestoreResult(
            memory=MemoryView.of(restored),
            evicted=evicted,
            message="Restored." if status == Status.active else "Restored as history: a newer memory supersedes it.",
        )

    # -- pending ----------------------------------------------------------------------------------
    async def confirm_pending(
        self, user_id: str, pending_id: str, action: Literal["confirm", "reject", "snooze"], snooze_hours: float | None
    ) -> ConfirmResult:
        async with self.store.read() as reader:
            item = await reader.get_pending(user_id, pending_id)
        item = self._require_open(item, pending_id)
        now = self.clock.now()
        if action == "confirm":
            candidate = {k: v for k, v in item.candidate.items() if k != "content_hash"}
            req = self._clean_request(AddRequest.model_validate(candidate).model_copy(update={"confidence": 1.0}))
            vector = await self._embed_or_defer(req.content, req.keywords)
            async with self.store.write() as tx:
                item = self._require_open(await tx.get_pending(user_id, pending_id), pending_id)
                result = await self._store(tx, user_id, req, vector, now)
                await tx.update_pending(
                    user_id, pending_id, status=PendingStatus.confirmed, memory_id=result.memory_id, updated_at=now
                )
                await tx.add_event(
                    user_id, EventKind.confirmed, now, memory_id=result.memory_id, payload={"pending_id": pending_id}
                )
            if vector is None:
                self.vector_deferred()
            return ConfirmResult(
                status=PendingStatus.confirmed,
                pending_id=pending_id,
                memory_id=result.memory_id,
                message=result.message,
            )
        if action == "reject":
            async with self.store.write() as tx:
                self._require_open(await tx.get_pending(user_id, pending_id), pending_id)
                await tx.update_pending(user_id, pending_id, status=PendingStatus.rejected, updated_at=now)
                await tx.add_event(user_id, EventKind.rejected, now, payload={"pending_id": pending_id})
            return ConfirmResult(
                status=PendingStatus.rejected, pending_id=pending_id, message="Rejected; it will not be asked again."
            )
        hours = 24.0 if snooze_hours is None else snooze_hours
        if not 0 < hours <= MAX_SNOOZE_HOURS:
            raise InvalidInput("snooze_hours", f"must be more than 0 and at most {MAX_SNOOZE_HOURS}")
        until = now + timedelta(hours=hours)
        async with self.store.write() as tx:
            self._require_open(await tx.get_pending(user_id, pending_id), pending_id)
            await tx.update_pending(
                user_id, pending_id, status=PendingStatus.snoozed, cooldown_until=until, updated_at=now
            )
            await tx.add_event(user_id, EventKind.snoozed, now, payload={"pending_id": pending_id, "until": until})
        return ConfirmResult(
            status=PendingStatus.snoozed,
            pending_id=pending_id,
            cooldown_until=until,
            message=f"Snoozed; it comes back in recall results after {until:%Y-%m-%d %H:%M} UTC.",
        )

    @staticmethod
    def _require_open(item: PendingItem | None, pending_id: str) -> PendingItem:
        if item is None:
            raise NotFound(f"pending_id: no pending memory with id {pending_id!r}; see list_memories(status='pending')")
        if item.status not in (PendingStatus.pending, PendingStatus.snoozed):
            detail = f" as memory {item.memory_id}" if item.memory_id else ""
            raise Conflict(f"pending {pending_id} was already {item.status.value}{detail}")
        return item

    # -- listing ----------------------------------------------------------------------------------
    async def list_trash(self, user_id: str, limit: int, offset: int) -> TrashList:
        async with self.store.read() as reader:
            items, total = await reader.list_memories(
                user_id, MemoryFilter(statuses=(Status.trashed,), limit=limit, offset=offset)
            )
        return TrashList(items=[TrashItem.of(m) for m in items], total=total)

    async def list_memories(
        self,
        user_id: str,
        *,
        category: Category | None,
        status: Literal["active", "superseded", "pending", "trashed"],
        text: str | None,
        limit: int,
        offset: int,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> MemoryList:
        if text is not None:
            text = clean_text(text, "text", max_chars=200, allow_empty=True) or None
        since, until = self._instant("since", since), self._instant("until", until)
        if since is not None and until is not None and until <= since:
            raise InvalidInput("until", "must be after since")
        now = self.clock.now()
        async with self.store.read() as reader:
            if status == "pending":
                return await self._list_pending(reader, user_id, category, text, since, until, limit, offset)
            flt = MemoryFilter(
                statuses=(Status(status),), category=category, text=text, since=since, until=until, limit=limit,
                offset=offset,
            )
            memories, total = await reader.list_memories(user_id, flt)
            counts = await reader.category_counts(user_id, flt)
        return MemoryList(
            counts=counts,
            items=[
                MemoryView.of(m, importance(m.scores, m.last_active_at or m.created_at, now)[2]) for m in memories
            ],
            total=total,
        )

    @staticmethod
    async def _list_pending(
        reader: Any,
        user_id: str,
        category: Category | None,
        text: str | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        offset: int,
    ) -> MemoryList:
        """Open candidates, filtered before paging so `total` and every page agree with the filter; `counts` per
        category over the time range and text (before the category filter)."""
        open_ = (PendingStatus.pending, PendingStatus.snoozed)
        _, every = await reader.list_pending(user_id, open_, limit=1, offset=0)
        pending, _ = await reader.list_pending(user_id, open_, limit=max(every, 1), offset=0)
        needle = text.casefold() if text else None
        in_range = [
            view for view in map(PendingView.of, pending)
            if (since is None or view.created_at >= since) and (until is None or view.created_at < until)
            and (needle is None or needle in view.content.casefold())
        ]
        counts: dict[str, int] = {}
        for view in in_range:
            counts[view.category.value] = counts.get(view.category.value, 0) + 1
        kept = [view for view in in_range if category is None or view.category == category]
        views: list[MemoryView | PendingView] = list(kept[offset : offset + limit])
        return MemoryList(items=views, total=len(kept), counts=counts)

    # -- the write path's steps, public for batch import (service/batch.py) -------------------------
    # Batch import runs the same steps per item inside one transaction. They are named here, once, so
    # no other module reaches into this one's private methods.
    embed = _embed
    embed_or_defer = _embed_or_defer
    clean_request = _clean_request
    require_core = _require_core
    patched = _patched
    refuse_secret_in = _refuse_secret_in
    discard_in = _discard_in
    pending_in = _pending_in
    store_in = _store
    patch_in = _patch_in
    forget_in = _forget_in
    reinforce_in = _reinforce_in
