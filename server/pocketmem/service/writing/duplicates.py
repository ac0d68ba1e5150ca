"""Whether a new memory is already remembered, and what happens to the one that already says it.

Near-duplicates: a duplicate is the same fact, not the same topic. A new memory is the same as an active one when
  1. their content words are identical (text.signature: Han characters and Latin stems without filler;
     negations and numbers kept), whatever the order or punctuation, or
  2. both state the same numbers, negations and entities (core/sameness.facts_agree), and
     a. the new text, subject words aside, is a verbatim part of the existing one (it says less), or
     b. with an embedder that captures meaning (not the built-in lexical one): their cosine similarity
        reaches the same-fact threshold calibrated for this embedder and language (service/shared/sameness.py;
        none for a language the model cannot tell facts apart in).
Anything else is stored. Merging more eagerly loses facts (two talks at two events are two memories);
recall's shadowing already orders same-topic pairs, the newer first.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pocketmem.base.errors import StoreError
from pocketmem.base.models import EventKind, Memory, Status
from pocketmem.base.results import AddResult
from pocketmem.core.sameness import facts_agree
from pocketmem.core.text import guess_language, normalise, signature, strip_subject
from pocketmem.providers.embeddings import Embedder
from pocketmem.service.shared.rows import embedding_text, indexed_text
from pocketmem.service.shared.sameness import Sameness
from pocketmem.service.writing.add_request import MAX_KEYWORDS, AddRequest
from pocketmem.store.roles import MemoryTx, SearchTx

NEAR_DUPLICATE_MIN_CHARS = 4
NEAR_DUPLICATE_CANDIDATES = 10


class Duplicates:
    def __init__(self, embedder: Embedder, sameness: Sameness) -> None:
        self.embedder = embedder
        self.sameness = sameness

    async def near_duplicate(
        self, tx: SearchTx, user_id: str, content: str, vector: Sequence[float] | None, *, skip: str | None = None
    ) -> Memory | None:
        """Inside a transaction: an active memory that already says what `content` says (the rules above), other
        than `skip` (the memory a correction supersedes: a new version often says less than the old one)."""
        sig = signature(content)
        if not sig:
            return None
        # Rules 1 and 2a need a memory holding every content word of the new one: the keyword index finds
        # exactly those (Han characters and words are indexed one by one). Rule 2b needs the memories nearest in
        # meaning: the vector index's neighbours. Both searches read a bounded number of rows whatever the store's
        # size (any of the content's terms, ranked by bm25, grew with it: 0.5 ms at 1,000 memories, 3.9 at 10,000).
        hits = [
            mid
            for mid, _ in await tx.keyword_hits(
                user_id, sorted(sig), NEAR_DUPLICATE_CANDIDATES, (Status.active,), all_terms=True
            )
        ]
        if not self.embedder.lexical and vector is not None:
            try:
                neighbours = await tx.vector_neighbours(user_id, vector, NEAR_DUPLICATE_CANDIDATES, (Status.active,))
            except StoreError:  # no vector index (sqlite-vec unavailable): rules 1 and 2a still apply
                neighbours = []
            hits = list(dict.fromkeys([*hits, *(mid for mid, _ in neighbours)]))
        if not hits:
            return None
        core = normalise(strip_subject(content))
        similar = {} if self.embedder.lexical or vector is None else await tx.similarities(user_id, hits, vector)
        # Inside a write transaction: use the threshold only if already known (measuring it writes to the store).
        same_fact = self.sameness.known(guess_language(content))
        for memory in await tx.get_memories(user_id, hits):
            if memory.id == skip:
                continue
            if signature(memory.content) == sig:
                return memory
            if not facts_agree(content, memory.content):
                continue
            if len(core) >= NEAR_DUPLICATE_MIN_CHARS and core in normalise(strip_subject(memory.content)):
                return memory
            if same_fact is not None and similar.get(memory.id, -1.0) >= same_fact:
                return memory
        return None

    async def reinforce(
        self, tx: MemoryTx, user_id: str, existing: Memory, req: AddRequest, now: datetime
    ) -> AddResult:
        """Inside a transaction: the request is a duplicate of `existing`, which is reinforced instead."""
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
