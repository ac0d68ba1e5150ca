"""Whether a new memory is already remembered, and what happens to the one that already says it.

Near-duplicates: a duplicate is the same fact, not the same topic. A new memory is never the same as one that
says it at another time or in another mode (core/sameness.aspects_agree: a plan and the done thing, present and
past, will and did, another frequency: 我打算辞职 / 我已经辞职了, I am married / I was married), nor with one whose
numbers or names it swaps, the other words in their places (core/sameness.orders_agree: 会议从3点改到5点 /
会议从5点改到3点, Alice owes Bob / Bob owes Alice); it is stored, and recall's versions of a fact decide which is
current. Otherwise it is the same as an active one when
  1. their content words are identical (text.signature: Han characters and Latin stems without filler, a name
     token such as users-api or -x whole; negations and numbers kept), whatever the order or punctuation, or
  2. both state the same numbers, negations, entities (name tokens among them) and things (Chinese nouns:
     微信, 开机) (core/sameness.facts_agree), and
     a. the new text, subject words aside, is a verbatim part of the existing one (it says less), or
     b. with an embedder that captures meaning (not the built-in lexical one): their cosine similarity
        reaches the same-fact threshold calibrated for this embedder and language (service/shared/sameness.py;
        none for a language the model cannot tell facts apart in).
Anything else is stored. Merging more eagerly loses facts (two talks at two events are two memories);
recall's shadowing already orders same-topic pairs, the newer first.

Forgotten: whether new content is what the user asked to forget (`forgotten`; writing.py decides what follows):
the same content as a forget's tombstone keeps (its content hash: the forget outlives the purge, and the trash
handed to the cloud library; a restore ends it), or, while the memory is still in the trash (reason user_delete),
the same fact by the rules above. After the purge only the hash is left, not the text: a rewording of a purged
memory is no longer recognised.

Reinforcing keeps what the duplicate adds: its keywords join the memory's, and a duplicate that holds every content
word of the memory and more (I work as a nurse at night / I work as a nurse) gives the memory its wording, the
earlier one kept as a revision (a core memory keeps its text: patch_core_memory changes it). It never drops a
name token or thing of the memory: a name token is one content word of the signature (users-api, never its api
alone), and a duplicate agrees on every one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from pocketmem.base.errors import StoreError
from pocketmem.base.models import DeleteReason, EventKind, Memory, Revision, Status
from pocketmem.base.results import AddResult
from pocketmem.core.sameness import aspects_agree, facts_agree, orders_agree
from pocketmem.core.text import content_hash, guess_language, normalise, signature, strip_subject
from pocketmem.service.shared.rows import embedding_text, indexed_text, new_id
from pocketmem.service.writing.add_request import MAX_KEYWORDS, AddRequest
from pocketmem.service.writing.vectors import Vectors
from pocketmem.store.roles import ForgottenTx, SearchTx, WriteTx

NEAR_DUPLICATE_MIN_CHARS = 4
NEAR_DUPLICATE_CANDIDATES = 10


@dataclass(frozen=True)
class Forgotten:
    """What the user asked to forget that new content says again: the memory, when, and whether its row is still
    in this store's trash (else only its tombstone is left: purged, or handed to the cloud library)."""

    memory_id: str
    deleted_at: datetime | None
    in_trash: bool


class Duplicates:
    def __init__(self, vectors: Vectors) -> None:
        self.vectors = vectors
        self.embedder = vectors.embedder
        self.sameness = vectors.sameness

    async def forgotten(
        self, tx: ForgottenTx, user_id: str, content: str, vector: Sequence[float] | None
    ) -> Forgotten | None:
        """Inside a transaction: what the user asked to forget (forget_memory, or an extraction's FORGET) that says
        what `content` says, by the rules above; the latest such forget."""
        marks = [
            t for t in await tx.tombstones_by_content(user_id, content_hash(content))
            if t.reason == DeleteReason.user_delete and t.restored_at is None
        ]
        if marks:
            latest = marks[-1]
            memory = await tx.get_memory(user_id, latest.memory_id)
            if memory is None or memory.status == Status.trashed:
                return Forgotten(latest.memory_id, latest.deleted_at, in_trash=memory is not None)

        def forgot(memory: Memory) -> bool:
            return memory.delete_reason == DeleteReason.user_delete

        # A tombstone without the hash (written elsewhere by a release before it): the memory in the trash says it.
        same = await tx.find_by_hash(user_id, content_hash(content), (Status.trashed,))
        if same is None or not forgot(same):
            same = await self.near_duplicate(tx, user_id, content, vector, statuses=(Status.trashed,), only=forgot)
        return Forgotten(same.id, same.deleted_at, in_trash=True) if same is not None else None

    async def near_duplicate(
        self, tx: SearchTx, user_id: str, content: str, vector: Sequence[float] | None, *, skip: str | None = None,
        statuses: Sequence[Status] = (Status.active,), only: Callable[[Memory], bool] | None = None,
    ) -> Memory | None:
        """Inside a transaction: a memory of `statuses` (active unless told) that already says what `content` says
        (the rules above), other than `skip` (the memory a correction supersedes: a new version often says less
        than the old one), and of those `only` accepts."""
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
                user_id, sorted(sig), NEAR_DUPLICATE_CANDIDATES, statuses, all_terms=True
            )
        ]
        if not self.embedder.lexical and vector is not None:
            try:
                neighbours = await tx.vector_neighbours(user_id, vector, NEAR_DUPLICATE_CANDIDATES, statuses)
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
            if memory.id == skip or (only is not None and not only(memory)) or not (
                aspects_agree(content, memory.content) and orders_agree(content, memory.content)
            ):
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
        self, tx: WriteTx, user_id: str, existing: Memory, req: AddRequest, now: datetime,
        vector: Sequence[float] | None,
    ) -> AddResult:
        """Inside a transaction: the request is a duplicate of `existing`, which is reinforced instead, with the
        request's keywords and, when it says more, its wording (the rules above). `vector`: the request's own."""
        await tx.touch(user_id, [existing.id], now)
        reworded = await self._take_request(tx, user_id, existing, req, now, vector)
        await tx.add_event(
            user_id, EventKind.duplicate, now, memory_id=existing.id, operation_id=req.operation_id,
            payload={"content": req.content},
        )
        more = ", and now reads as this more detailed wording (the earlier one is kept as a revision)"
        return AddResult(
            status="duplicate",
            memory_id=existing.id,
            importance=round(existing.importance, 4),
            core=existing.core,
            message=f"Already remembered; the existing memory was reinforced instead of stored twice{more * reworded}.",
        )

    async def _take_request(
        self, tx: WriteTx, user_id: str, existing: Memory, req: AddRequest, now: datetime,
        vector: Sequence[float] | None,
    ) -> bool:
        """The request's keywords join `existing`; it takes the request's wording when that holds every content
        word of its own and more (not a core memory's). Whether it took the wording."""
        richer = not existing.core and signature(req.content) > signature(existing.content)
        content = req.content if richer else existing.content
        merged = list(dict.fromkeys([*existing.keywords, *req.keywords]))[:MAX_KEYWORDS]
        if not richer and merged == existing.keywords:
            return False
        new_vector = await self._vector(tx, user_id, existing.id, content, merged, vector if richer else None)
        # No vector at hand (the endpoint was down, or the store keeps another embedder's): it stays as it is.
        if new_vector is None:
            return False
        if richer:
            await tx.insert_revision(Revision(
                id=new_id(), memory_id=existing.id, user_id=user_id, previous_content=existing.content,
                new_content=content, mode="replace", reason="add_memory: the same fact, in more detail",
                created_at=now,
            ))
        await tx.replace_content(
            user_id,
            existing.id,
            content=content,
            content_hash=content_hash(content),
            keywords=merged,
            vector=new_vector,
            text=indexed_text(content, merged),
            updated_at=now,
        )
        return richer

    async def _vector(
        self, tx: WriteTx, user_id: str, memory_id: str, content: str, keywords: list[str],
        given: Sequence[float] | None,
    ) -> Sequence[float] | None:
        """The vector a reinforced memory keeps. The built-in lexical embedder is an in-process computation: it
        embeds the new text and keywords. Any other would hold the write lock for its round trip: the memory takes
        the request's own vector (computed before the lock) when it takes the request's wording, else keeps its
        own (the new keywords are then found by the keyword index, and join the vector on `pocketmem reindex`)."""
        if not await self.vectors.agree_in(tx):
            return None  # the store keeps another embedder's vectors: none of this one's joins them
        if self.embedder.lexical:
            return await self.embedder.embed(embedding_text(content, keywords))
        if given is not None:
            return given
        return (await tx.memory_vectors(user_id, [memory_id])).get(memory_id)
