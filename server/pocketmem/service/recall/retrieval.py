"""Recall: the few memories that matter for the current message, ready to inject.

    query  = the message (weight 1.0) + up to 3 context lines (0.5) + agent keywords (1.0)
    candidates = service/recall/candidates.py gather_candidates: keyword (FTS5) hits, dated memories and, for an
                 embedder that captures meaning, every core memory + top `candidate_limit` by importance
                 + nearest vectors; each one's relevance decided once, only those that can pass are loaded
    admitted (CandidateRules.passes: the one bar) -> rank (ranking.py) -> top_k -> use_count += 1
    injection = formatting.injection_block in the query's language, within the character budget

If the vector index fails, recall goes on with the keyword index; if that fails too, it answers
with the user card alone. Each failure is logged as a `retrieval_fail` event; recall never errors
because an index is sick.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.base.errors import InvalidInput, PocketmemError, StoreError
from pocketmem.base.models import Category, Status, expired
from pocketmem.base.results import PendingView, RecallHit, RecallResult, ReminderView, ScoreBreakdown
from pocketmem.core import privacy, relevance, sameness, termstats, timeexpr
from pocketmem.core.dictionary import segmenter
from pocketmem.core.formatting import InjectionItem, age_label, calendar_days, cut, injection_block
from pocketmem.core.ranking import Candidate, Ranked, Weights, rank, shadow_older
from pocketmem.core.similarity import NEUTRAL, Scale
from pocketmem.core.text import (
    clean_text,
    guess_language,
    named_words,
    runs_pattern,
    stem_word,
    weighted_query_terms,
)
from pocketmem.core.triggers import refers_to_past
from pocketmem.service.recall import fallback, versions
from pocketmem.service.recall.candidates import CandidateRules, Query, QueryVectors, gather_candidates
from pocketmem.service.recall.library import LibraryHits, LibraryRecall
from pocketmem.service.shared.reinforcement import UseLedger, record_used
from pocketmem.service.shared.usercard import render_user_card, user_language
from pocketmem.service.upkeep.todos import due_reminders, reminder_view, shown_item
from pocketmem.service.writing.vectors import Vectors
from pocketmem.store.base import Store
from pocketmem.store.roles import StoreReader

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 4000  # what recall reads of a message or context line (read_window)
MAX_MESSAGE_CHARS = 200_000  # a longer one is refused
HEAD_CHARS = 1000
MAX_CONTEXT_LINES = 3
MAX_QUERY_KEYWORDS = 12
MAX_QUERY_KEYWORD_CHARS = 200  # a keyword may be a phrase (`seafood allergy at restaurants`)
CONTEXT_WEIGHT = 0.5
KEYWORDS_VECTOR_WEIGHT = 0.5
PENDING_SHOWN = 3
SHADOW_POOL = 12


def read_window(text: str) -> str:
    """What recall reads of a long message (a pasted log, file or article): its first HEAD_CHARS characters
    and its last ones, MAX_QUERY_CHARS in all. The question is said before or after what was pasted, and the
    cost of a recall stays bounded; the message is never refused for its length below MAX_MESSAGE_CHARS."""
    if len(text) <= MAX_QUERY_CHARS:
        return text
    return f"{text[:HEAD_CHARS]}\n{text[len(text) - (MAX_QUERY_CHARS - HEAD_CHARS - 1):]}"


def checked_message(text: str, field: str, *, allow_empty: bool = False) -> str:
    """A message or context line cleaned (core/text.clean_text); one over MAX_MESSAGE_CHARS is refused, before
    anything reads it whole."""
    return clean_text(text, field, max_chars=MAX_MESSAGE_CHARS, allow_empty=allow_empty)


def warm_up() -> None:
    """Load the segmenter, the tagger and the background frequencies (the word tables are read from the cache
    folder in milliseconds, a first start builds them in a few seconds; the tagger's HMM tables take about half
    a second) and compile the patterns start-up leaves out (the secrets, the time words, the same-fact rule, CJK
    runs), so the first recall or write does not pay for them; run in a worker thread when the app opens, or by a
    server after its handshake."""
    segmenter()
    termstats.background_share("")
    for compiled in (privacy.patterns, timeexpr.patterns, sameness.patterns, runs_pattern):
        compiled()
    versions.warm_up()


@dataclass
class RecallRequest:
    query: str
    context: Sequence[str] = ()
    keywords: Sequence[str] = ()
    top_k: int | None = None
    categories: Sequence[Category] | None = None
    include_history: bool = False
    explain: bool = False
    record: bool = True  # count hits as used; benchmarks turn it off to keep queries independent
    used: Sequence[str] = ()  # ids the agent says shaped its previous reply (review.record_used)
    temporary: bool = False  # recall nothing, record nothing
    lang: str | None = None  # the language shown, when the caller has decided it (usercard.user_language)


class Retrieval:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        store_vectors: Vectors,
        clock: Clock,
        library: LibraryRecall | None = None,
    ) -> None:
        self.settings = settings
        self.library = library
        self.store = store
        # Whether the store's vectors are this embedder's: checked in each recall's read transaction.
        self.store_vectors = store_vectors
        self.embedder = embedder = store_vectors.embedder
        self.clock = clock
        self.calibration = store_vectors.calibration
        self.uses = UseLedger(store)  # recall's bookkeeping; a server defers it off the answer's path
        # While the store is being re-embedded (embed_queue.py): why the vectors cannot be used yet, else None.
        self.vectors_pending: Callable[[], str | None] = lambda: None
        self.weights = Weights(
            semantic=settings.weight_semantic,
            keyword=settings.weight_keyword,
            freshness=settings.weight_freshness,
            importance=settings.weight_importance,
        )
        # Set by the app for the recall tool (`answer`): take in a person's edit of the profile files (what keeps
        # them from being read or written, else None); the onboarding instruction while the profile is unconfirmed.
        self.files_check: Callable[[str], Awaitable[str | None]] | None = None
        self.onboarding: Callable[[str, str], Awaitable[str | None]] | None = None
        self.rules = CandidateRules(
            importance_pool=settings.candidate_limit,
            threshold=settings.relevance_threshold,
            zone=settings.zone,
            lexical=embedder.lexical,
        )

    def parse(self, req: RecallRequest) -> Query:
        message = read_window(checked_message(req.query, "query"))
        if len(req.context) > MAX_CONTEXT_LINES:
            raise InvalidInput("context", f"at most {MAX_CONTEXT_LINES} recent lines, got {len(req.context)}")
        context = [
            line
            for i, raw in enumerate(req.context)
            if (line := read_window(checked_message(raw, f"context[{i}]", allow_empty=True)))
        ]
        if len(req.keywords) > MAX_QUERY_KEYWORDS:
            raise InvalidInput("keywords", f"at most {MAX_QUERY_KEYWORDS} short terms, got {len(req.keywords)}")
        keywords = [
            clean_text(raw, f"keywords[{i}]", max_chars=MAX_QUERY_KEYWORD_CHARS) for i, raw in enumerate(req.keywords)
        ]
        recent: dict[str, float] = {}
        for line in context:
            for term, weight in weighted_query_terms(line).items():
                recent[term] = max(recent.get(term, 0.0), weight)
        terms = {term: CONTEXT_WEIGHT * weight for term, weight in recent.items()}
        own = weighted_query_terms(message)
        for term, weight in own.items():
            terms[term] = max(terms.get(term, 0.0), weight)
        base = dict(terms)
        sources = [weighted_query_terms(kw) for kw in keywords]
        for source in sources:
            for term, weight in source.items():
                terms[term] = max(terms.get(term, 0.0), weight)
        today = self.clock.now().astimezone(self.settings.zone).date()
        return Query(
            message, context, keywords, terms, list(own), base, relevance.keyword_words(sources),
            timeexpr.parse(message, today), frozenset(stem_word(w) for w in named_words(message)), recent,
            refers_to_past(message),
        )

    async def scale(self, q: Query, health: fallback.Health) -> Scale | None:
        """What a cosine means for the message's language: read from the store, or measured, once (so call it
        outside a read transaction). None when there are no vectors, recorded in `health`: while the store is
        re-embedded (embed_queue.py) or when the embedder fails; the words answer alone."""
        if (pending := self.vectors_pending()) is not None:
            health.fail(fallback.VectorsPending(pending))
            return None
        if (foreign := self.store_vectors.note()) is not None:  # as last read: the query is not encoded
            health.fail(fallback.VectorsOfAnotherModel(foreign))
            return None
        try:
            return await self.calibration.scale(guess_language(q.message))
        except PocketmemError as exc:
            health.fail(fallback.EmbedderFailed(exc))
            return None

    async def vectors(self, q: Query, scale: Scale | None, health: fallback.Health) -> QueryVectors:
        """The query's vectors, encoded in a worker thread (the store is not touched: this runs beside the
        store's word searches); none without a scale or when the embedder fails (recorded in `health`)."""
        if scale is None:
            return QueryVectors(None, None, NEUTRAL)
        try:
            vector, own, named = await self._encode(q)
        except PocketmemError as exc:
            health.fail(fallback.EmbedderFailed(exc))
            return QueryVectors(None, None, NEUTRAL)
        return QueryVectors(vector, own, scale, None if self.embedder.lexical else named)

    async def _encode(self, q: Query) -> tuple[list[float], list[float], list[float] | None]:
        """The query's vector (message, context and keywords), the message's own vector and the keywords' own
        (none without keywords)."""
        texts = [q.message]
        weights = [1.0]
        if q.context:
            texts.append("\n".join(q.context))
            weights.append(CONTEXT_WEIGHT)
        if q.keywords:
            texts.append(" ".join(q.keywords))
            weights.append(KEYWORDS_VECTOR_WEIGHT)
        vectors = await self.embedder.embed_many(texts)
        combined = [weights[0] * x for x in vectors[0]]
        for weight, vector in zip(weights[1:], vectors[1:], strict=True):
            combined = [a + weight * b for a, b in zip(combined, vector, strict=True)]
        norm = math.hypot(*combined) or 1.0
        return [x / norm for x in combined], vectors[0], vectors[-1] if q.keywords else None

    async def answer(self, user_id: str, req: RecallRequest) -> RecallResult:
        """What the recall tool answers: the recall, after a person's edit of the profile files is taken in,
        with the onboarding instruction while the user has not confirmed their profile (the app sets both
        hooks; docs/architecture.md, *A recall, traced*). Profile files that cannot be read or written are named
        in `degraded`: they mirror the store, which answers."""
        files = await self.files_check(user_id) if self.files_check is not None else None
        lang = await user_language(self.store, user_id, self.settings, req.query, self.clock.now())
        result = await self.recall(user_id, replace(req, lang=lang))
        if files is not None:
            degraded = "; ".join(filter(None, [result.degraded, str(fallback.ProfileFilesFailed(files))]))
            result = result.model_copy(update={"degraded": degraded})
        if result.temporary or self.onboarding is None:
            return result
        return result.model_copy(update={"onboarding": await self.onboarding(user_id, lang)})

    async def recall(self, user_id: str, req: RecallRequest) -> RecallResult:
        q = self.parse(req)
        top_k = req.top_k or self.settings.top_k
        if not 1 <= top_k <= 50:
            raise InvalidInput("top_k", "must be between 1 and 50")
        if req.temporary or self.settings.temporary:
            return RecallResult(memories=[], injection="", temporary=True)
        locale = req.lang or await user_language(self.store, user_id, self.settings, q.message, self.clock.now())
        # 我以前…用过什么 asks for earlier versions as include_history does (core/timeexpr.py)
        history = req.include_history or q.time.earlier
        statuses = (Status.active, Status.superseded) if history else (Status.active,)
        now = self.clock.now()
        health = fallback.Health()
        reinforced: list[str] = []
        if req.used:
            try:
                async with self.store.write(user_id=user_id) as tx:
                    reinforced = await record_used(tx, user_id, req.used, now)
            except StoreError as exc:  # the reinforcement is lost, the recall is not
                log.warning("recall could not reinforce the used memories: %s", exc)
                health.fail(fallback.BookkeepingFailed(exc))
        if self.store.damage is not None:
            health.fail(fallback.StoreDamaged(f"{self.store.damage}; run `pocketmem doctor`"))
        # The query is encoded in a worker thread while the store's word searches run (gather_candidates).
        encoding = asyncio.ensure_future(self.vectors(q, await self.scale(q, health), health))
        try:
            asked = None
            if self.library is not None:
                asked = self.library.ask(
                    lambda: self._library_search(user_id, q, encoding, statuses, now, req.categories), encoding
                )
            async with self.store.read() as reader:
                ranked = await self._ranked(reader, user_id, q, encoding, statuses, health, req, now)
                pending = await reader.due_pending(user_id, now, PENDING_SHOWN)
                due = await due_reminders(reader, user_id, now)
        finally:
            encoding.cancel()  # only when a read failed before the vectors were needed
        reminders = [reminder_view(todo, now, self.settings.zone, locale) for todo in due]
        if health.path == fallback.CARD_ONLY or (health.path and not ranked):
            # Both indexes down, or a fallback path that found nothing: the card's core memories.
            result = await self._card_only(user_id, locale, pending, health)
            return result.model_copy(update={"reminders": reminders, "reinforced": reinforced})
        ranked = ranked[:top_k]
        hits = [self._hit(r, locale, req.explain) for r in ranked]
        if asked is not None and len(ranked) < top_k:
            # Local first: the library's hits fill what room the notebook leaves.
            answer = await asked.result()
            if answer.problem:
                health.fail(fallback.LibraryFailed(answer.problem))
            extra = answer.ranked[: top_k - len(ranked)]
            hits += [self._hit(r, locale, req.explain, source="library") for r in extra]
            ranked = [*ranked, *extra]
        if req.record:
            try:
                await self.uses.record(user_id, [r.memory.id for r in ranked], health.messages(), now)
            except StoreError as exc:  # bookkeeping only: a read-only or full store still answers recall
                log.warning("recall could not record its hits: %s", exc)
        return RecallResult(
            memories=hits,
            injection=self._injection(ranked, reminders, locale, now),
            reminders=reminders,
            pending_confirmations=[PendingView.of(p) for p in pending],
            reinforced=reinforced,
            degraded=health.describe(),
        )

    async def _ranked(
        self,
        reader: StoreReader,
        user_id: str,
        q: Query,
        encoding: asyncio.Future[QueryVectors],
        statuses: tuple[Status, ...],
        health: fallback.Health,
        req: RecallRequest,
        now: datetime,
    ) -> list[Ranked]:
        """The admitted candidates in order: ranked, the older of two same-topic memories shadowed, and the
        newest version of a fact the question asks about first (service/recall/versions.py)."""
        if not await self._vectors_usable(reader, health):
            encoding = asyncio.get_running_loop().create_future()
            encoding.set_result(QueryVectors(None, None, NEUTRAL))
        # Superseded memories are searched too: a hit on one brings its current version (versions.py).
        candidates = await gather_candidates(reader, user_id, q, encoding, versions.SEARCHED, health, self.rules, now)
        vector, _, scale, _ = encoding.result()
        if health.path == fallback.CARD_ONLY:
            return []
        candidates = await versions.bring_current(reader, user_id, candidates, statuses)
        admitted = [c for c in _usable(candidates, req.categories, now) if self.rules.passes(c, health, q)]
        ranked = rank(admitted, q.terms, weights=self.weights, now=now, temporal=q.time.intent,
                      agenda=q.time.agenda)
        pool = ranked[:SHADOW_POOL]
        if len(pool) > 1 and vector is not None:
            # In the same snapshot: the pairs must be the memories just ranked.
            pairs = await reader.pairwise_similarities(user_id, [r.memory.id for r in pool])
            ranked = shadow_older(pool, pairs, scale)
        return await versions.newest_first(reader, user_id, q.message, ranked, now, req.categories)

    async def _vectors_usable(self, reader: StoreReader, health: fallback.Health) -> bool:
        """Whether this recall may search and compare the store's vectors, read in its own snapshot: a store
        another process switched to another embedder meanwhile is answered through the keyword index, and
        `degraded` says why (a store that records no embedder has no vectors to search: nothing to say)."""
        if await self.store_vectors.agree_in(reader):
            return True
        note = self.store_vectors.note()
        if note is not None and not any(isinstance(f, fallback.VectorsOfAnotherModel) for f in health.failures):
            health.fail(fallback.VectorsOfAnotherModel(note))
        return False

    def _injection(self, ranked: list[Ranked], reminders: list[ReminderView], locale: str, now: datetime) -> str:
        """Due reminders come first: they are the lines the agent must not miss when the budget is tight."""
        reminded = {r.id for r in reminders}
        return injection_block(
            [InjectionItem(content=r.content, days=0, reminder=r.label) for r in reminders]
            + [
                shown_item(
                    r.memory, calendar_days(r.memory.created_at, now, self.settings.zone), now, self.settings.zone,
                    locale, outdated=r.outdated,
                )
                for r in ranked
                if r.memory.id not in reminded
            ],
            locale,
            self.settings.injection_budget,
        )

    async def _library_search(
        self,
        user_id: str,
        q: Query,
        encoding: asyncio.Future[QueryVectors],
        statuses: tuple[Status, ...],
        now: datetime,
        categories: Sequence[Category] | None,
    ) -> LibraryHits:
        """Large-library recall: the same candidates and ranking, over the cloud library."""
        assert self.library is not None
        health = fallback.Health()  # the library's own: its failures are not the notebook's
        async with self.library.cloud.read() as reader:
            candidates = await gather_candidates(reader, user_id, q, encoding, statuses, health, self.rules, now)
            unreadable = [f"{e.table} row {e.row_id} in the library cannot be read ({e.why})" for e in reader.left_out]
        admitted = [c for c in _usable(candidates, categories, now) if self.rules.passes(c, health, q)]
        ranked = rank(admitted, q.terms, weights=self.weights, now=now, temporal=q.time.intent,
                      agenda=q.time.agenda)
        problem = "; ".join(filter(None, [health.describe(), *unreadable])) or None
        return LibraryHits(await self.library.new_to_the_notebook(user_id, ranked), problem)

    def _hit(self, r: Ranked, locale: str, explain: bool, source: str = "local") -> RecallHit:
        now = self.clock.now()
        days = calendar_days(r.memory.created_at, now, self.settings.zone)
        return RecallHit(
            id=r.memory.id,
            content=r.memory.content,
            category=r.memory.category,
            created_at=r.memory.created_at,
            age=age_label(days, locale),
            age_days=days,
            score=round(r.score, 4),
            importance=round(r.importance, 4),
            core=r.memory.core,
            outdated=r.outdated,
            due_at=r.memory.due_at,
            remind_at=r.memory.remind_at,
            completed_at=r.memory.completed_at,
            source=source,
            breakdown=ScoreBreakdown(
                semantic=round(r.semantic, 4),
                keyword=round(r.keyword, 4),
                freshness=round(r.freshness, 4),
                importance=round(r.importance, 4),
                relevance=round(r.relevance, 4),
            )
            if explain
            else None,
        )

    async def _card_only(self, user_id: str, locale: str, pending: list, health: fallback.Health) -> RecallResult:
        now = self.clock.now()
        card = await render_user_card(self.store, user_id, self.settings, now, locale)
        await self.uses.record(user_id, [], health.messages(), now)
        return RecallResult(
            memories=[],
            injection=cut(card, self.settings.injection_budget),
            pending_confirmations=[PendingView.of(p) for p in pending],
            degraded=f"{fallback.CARD_ONLY} — " + "; ".join(health.messages()),
        )


def _usable(candidates: list[Candidate], categories: Sequence[Category] | None, now: datetime) -> list[Candidate]:
    """The candidates of the asked categories (all when none are named) that have not expired."""
    allowed = set(categories) if categories else None
    fresh = [c for c in candidates if not expired(c.memory.expires_at, now)]
    return [c for c in fresh if allowed is None or c.memory.category in allowed]

