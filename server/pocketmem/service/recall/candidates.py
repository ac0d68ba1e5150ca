"""Recall's candidate choice: which memories are weighed at all, how many, and how core memories join.

The store only searches (nearest vectors, keyword hits, similarities of given ids, the core memories,
the most important memories); this module decides what becomes a candidate (docs/ranking.md, section 4):

    semantic pool  (embedders that capture meaning only): every core memory (scoring.CORE_PERSISTENCE)
                   + the `importance_pool` most important memories + the VECTOR_NEIGHBOURS nearest vectors
    dated          the WINDOW_CANDIDATES newest memories inside the time window the message names (of a day
                   named by its date all, otherwise episodes and events), and the open
                   todos due inside it when the message asks what lies there
    keyword pool   the best keyword hits for the query's terms the user has written (the 32 strongest by
                   weight x rarity), max(KEYWORD_HITS, KEYWORD_HITS_SHARE of the user's memories) of them, at
                   most MAX_KEYWORD_HITS; with agent keywords the message's own search runs too
    shortlist      keyword hits + dated + semantic-pool memories whose similarity alone can pass the bar
    candidates     the shortlisted memories whose relevance (core/relevance.py, computed here once per
                   memory) can pass the bar, loaded whole; `CandidateRules.passes` then admits those that do

`gather_candidates` is the one entry point; service/recall/retrieval.py calls it for the notebook and the library.
Index failures are recorded in the call's `fallback.Health` as they happen (typed, service/recall/fallback.py).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta, tzinfo
from typing import NamedTuple

from pocketmem.base.models import Status
from pocketmem.core import relevance, termstats, timeexpr
from pocketmem.core.ranking import TIMED_CATEGORIES, Candidate, semantic_score
from pocketmem.core.similarity import Scale
from pocketmem.core.text import single_nouns
from pocketmem.service.recall import fallback
from pocketmem.store.roles import StoreReader
from pocketmem.store.types import IndexedText

log = logging.getLogger(__name__)

VECTOR_NEIGHBOURS = 32
KEYWORD_HITS = 64
KEYWORD_HITS_SHARE = 0.004  # the keyword shortlist grows with the user's store: 400 at 100,000 memories
MAX_KEYWORD_HITS = 1000
MAX_MATCH_TERMS = 32
SEARCH_FLOOR = 0.05  # a term weaker than this (weight x rarity) is weighed but not searched (docs/speed.md)
WINDOW_CANDIDATES = 50


@dataclass
class Query:
    """A parsed recall query (retrieval.Retrieval.parse)."""

    message: str
    context: list[str]
    keywords: list[str]
    terms: dict[str, float] = field(default_factory=dict)
    message_terms: list[str] = field(default_factory=list)
    base_terms: dict[str, float] = field(default_factory=dict)  # the message's and context's, no keywords
    keyword_words: list[list[str]] = field(default_factory=list)  # each keyword's own words (relevance.py)
    time: timeexpr.TimeQuery = timeexpr.TimeQuery(intent=False, window=None)
    names: frozenset[str] = frozenset()  # Latin words the message writes as names (text.named_words), stemmed
    recent_terms: dict[str, float] = field(default_factory=dict)  # the earlier lines' terms at their own weight
    past: bool = False  # the message refers to the past (triggers.refers_to_past): it presumes a memory


class QueryVectors(NamedTuple):
    """The query's vectors and what a cosine means for them (retrieval.Retrieval.vectors); no vectors while
    the embedder is down or the store is re-embedded, and the words answer alone."""

    query: list[float] | None  # the message, context and keywords
    own: list[float] | None  # the message's own
    scale: Scale
    keywords: list[float] | None = None  # the agent's keywords' own (none without keywords)


@dataclass(frozen=True)
class CandidateRules:
    """What candidate choice needs beyond the query: settings and the embedder's kind."""

    importance_pool: int  # Settings.candidate_limit: the most important memories weighed by meaning
    threshold: float  # Settings.relevance_threshold, before a fallback path lowers it
    zone: tzinfo  # the user's time zone, for the window a message names
    lexical: bool  # the embedder's similarity is shared wording (the built-in), not meaning

    def model(self, health: fallback.Health) -> relevance.Model:
        """The decision for this call: the embedder's, or the words alone when no similarity was computed."""
        return relevance.model_for(not self.lexical and health.semantic)

    def lowest_bar(self, health: fallback.Health) -> float:
        """The lowest bar any memory must reach in this call (a core memory's): below it nothing is loaded."""
        return fallback.threshold(self.threshold, health, self.lexical, self.model(health).core_lift)

    def passes(self, candidate: Candidate, health: fallback.Health, q: Query) -> bool:
        """Recalled: its relevance reaches the bar (a core memory's, or any memory's when the message refers to
        the past, is the lower one), or its date alone makes it relevant to the window the question names
        (`_dated` chooses which)."""
        if candidate.in_window:
            return True
        lift = self.model(health).core_lift if candidate.memory.core or q.past else 0.0
        return candidate.relevance >= fallback.threshold(self.threshold, health, self.lexical, lift)


def keyword_shortlist_size(user_memories: int) -> int:
    """How many keyword hits are kept: grows with the store so the answer is not cut off at scale."""
    return min(MAX_KEYWORD_HITS, max(KEYWORD_HITS, int(user_memories * KEYWORD_HITS_SHARE)))


async def gather_candidates(
    reader: StoreReader,
    user_id: str,
    q: Query,
    vectors: Awaitable[QueryVectors],
    statuses: tuple[Status, ...],
    health: fallback.Health,
    rules: CandidateRules,
    now: datetime,
) -> list[Candidate]:
    """The candidates for `q` among the user's memories of `statuses`, asked at `now`.

    Ids and similarities are gathered cheaply in SQL; each shortlisted memory's relevance is decided once,
    and only memories that can pass the bar are loaded. Index failures are recorded in `health` (recall
    degrades, never fails). The word searches need no vector: they run while `vectors` (the query's
    encoding, in a worker thread) is still being computed.
    """
    in_window = await _dated(reader, user_id, q, statuses, rules.zone, now)
    keyword_ids, rarities = await _keyword_pool(reader, user_id, q, statuses, health)
    vector, own, scale, named = await vectors
    sims: dict[str, float] = {}
    # A lexical embedder's similarity is shared wording: every memory it could score above the threshold
    # shares a term with the query, and the keyword index enumerates exactly those. The core and importance
    # pass and the neighbour scan are for embedders that capture meaning.
    named_sims: dict[str, float] = {}
    if vector is not None and not rules.lexical:
        pools = (sims, named_sims)
        await _semantic_pool(reader, user_id, (vector, named), statuses, rules.importance_pool, pools, health)
    if vector is not None and rules.lexical and not health.keywords:
        sims.update(await fallback.vector_path(reader, user_id, vector, statuses, health))
    # Only memories that can pass the relevance threshold are loaded: keyword hits, dated matches, and
    # those whose similarity alone is high enough to be worth the evidence check.
    enough = scale.cosine_for(min(1.0, rules.model(health).semantic_needed(rules.lowest_bar(health))))
    unscored = [mid for mid in [*sims, *keyword_ids, *in_window] if mid not in named_sims]
    named_sims.update(await _similarities_to(reader, user_id, named, unscored, health))
    near = [mid for found in (sims, named_sims) for mid, cos in found.items() if cos >= enough]
    shortlist = list(dict.fromkeys([*keyword_ids, *in_window, *near]))
    own_sims, terms = await _details(reader, user_id, q, vector, own, shortlist, sims, bool(rarities), health)
    model, bar = rules.model(health), rules.lowest_bar(health)
    weighing = relevance.Weighing(q.terms, q.message_terms, rarities, q.keyword_words, q.base_terms, q.recent_terms)
    judged = {}
    for mid in shortlist:
        semantic = max(semantic_score(found.get(mid), scale) for found in (sims, own_sims, named_sims))
        ev = weighing.evidence(terms.get(mid, ()), semantic)
        judged[mid] = (ev, model.probability(ev))
    # Whole rows only for what can pass the bar (or is dated inside the window a question names).
    loading = [mid for mid in shortlist if mid in in_window or judged[mid][1] >= bar]
    memories = [m for m in await reader.get_memories(user_id, loading) if m.status in statuses]
    return [
        Candidate(m, sims.get(m.id), terms.get(m.id, frozenset()), m.id in in_window, *judged[m.id])
        for m in memories
    ]


async def _semantic_pool(
    reader: StoreReader,
    user_id: str,
    vectors: tuple[list[float], list[float] | None],
    statuses: tuple[Status, ...],
    importance_pool: int,
    found: tuple[dict[str, float], dict[str, float]],
    health: fallback.Health,
) -> None:
    """Every core memory and the most important ones, with their similarity to the query's vector and (in the
    same reads) to the agent's keywords' own when there are keywords; the nearest vectors to the query's."""
    query, named = vectors
    sims, named_sims = found
    asked = [query] if named is None else [query, named]
    try:
        for mid, cosines in [
            *await reader.core_similarities(user_id, asked),
            *await reader.important_similarities(user_id, asked, importance_pool, statuses),
        ]:
            sims[mid] = cosines[0]
            if named is not None:
                named_sims[mid] = cosines[1]
    except Exception as exc:  # noqa: BLE001 - any index failure degrades, never fails recall
        health.fail(fallback.VectorScoringFailed(exc))
    try:
        sims.update(await reader.vector_neighbours(user_id, query, VECTOR_NEIGHBOURS, statuses))
    except Exception as exc:  # noqa: BLE001
        log.warning("vector search failed, using keywords only: %s", exc)
        health.fail(fallback.VectorIndexFailed(exc))


async def _dated(
    reader: StoreReader, user_id: str, q: Query, statuses: tuple[Status, ...], zone: tzinfo, now: datetime
) -> set[str]:
    """Ids of what the time window the message names makes relevant by date alone (none without one): the
    newest memories inside it (of a day named by its date, all; otherwise episodes and events), and the open todos
    due inside it when the message asks what lies there (这周有什么要做的事)."""
    if q.time.window is None or not (q.time.intent or q.time.agenda):
        return set()
    start, end = q.time.window
    lo = datetime.combine(start, time.min, zone)
    hi = datetime.combine(end + timedelta(days=1), time.min, zone)
    found: set[str] = set()
    if q.time.intent:
        # A day named by its date (5月2号, 上周六): all it holds; other windows (上周, 昨天): episodes and events.
        dated = await reader.memories_between(user_id, lo, hi, statuses, WINDOW_CANDIDATES)
        found |= {m.id for m in dated if q.time.named_day or m.category in TIMED_CATEGORIES}
    if q.time.agenda and Status.active in statuses:
        due = await reader.open_todos(user_id, now, WINDOW_CANDIDATES, due_by=hi)
        found |= {m.id for m in due if m.due_at is not None and lo <= m.due_at < hi}
    return found


async def _keyword_pool(
    reader: StoreReader, user_id: str, q: Query, statuses: tuple[Status, ...], health: fallback.Health
) -> tuple[list[str], dict[str, float]]:
    """Keyword hits for the query's terms, and the rarity of each term the user has written."""
    if not q.terms:
        return [], {}
    keyword_ids: list[str] = []
    rarities: dict[str, float] = {}
    try:
        counts, total = await reader.user_term_counts(user_id, list(q.terms))
        # Only terms the user has written: one found nowhere in their store matches nothing there.
        written = [t for t in q.terms if counts.get(t)]
        rarities = termstats.rarities(counts, total, written, q.names, single_nouns(q.message, q.base_terms))
        # Every term the user has written is weighed (termstats rarities); the search leaves out those too
        # common to find anything (_strongest).
        k = keyword_shortlist_size(total)
        # With keywords, the message's own search runs too: keywords only add candidates. When the keywords
        # bring no term of their own (they repeat the message's words), both searches are the same one.
        searched: dict[tuple[str, ...], list[str]] = {}
        for weighted in (q.terms, q.base_terms) if q.keywords else (q.terms,):
            found = tuple(_strongest(weighted, rarities))
            if found and found not in searched:
                searched[found] = [mid for mid, _ in await reader.keyword_hits(user_id, found, k, statuses)]
            keyword_ids += searched.get(found, [])
        if not searched:
            # Nothing the message names is in the store, or only words too common to search: one cheap look
            # still tells whether the index answers, so a broken one is reported (and the fallbacks run).
            await reader.keyword_hits(user_id, list(q.terms)[:1], 1, statuses)
    except Exception as exc:  # noqa: BLE001
        log.warning("keyword search failed: %s", exc)
        health.fail(fallback.KeywordIndexFailed(exc))
    return keyword_ids, rarities


def _strongest(weighted: Mapping[str, float], rarities: Mapping[str, float]) -> list[str]:
    """The MAX_MATCH_TERMS terms the user has written, strongest (weight x rarity) first, none under
    SEARCH_FLOOR. A term that weak is still weighed in every candidate that holds it (its strongest and matched
    evidence is worth at most 0.18 in logit), but searching it would rank every memory that holds it: 去 or 周
    in a third of a large store."""
    strength = {t: weighted[t] * rarities[t] for t in weighted if t in rarities}
    found = sorted((t for t, s in strength.items() if s >= SEARCH_FLOOR), key=lambda t: -strength[t])
    return found[:MAX_MATCH_TERMS]


async def _details(
    reader: StoreReader,
    user_id: str,
    q: Query,
    vector: list[float] | None,
    own: list[float] | None,
    shortlist: Sequence[str],
    sims: dict[str, float],
    searched: bool,
    health: fallback.Health,
) -> tuple[dict[str, float], dict[str, frozenset[str]]]:
    """What the relevance decision needs of each shortlisted memory: its similarity (filled into `sims`), the
    message's own similarity, and its index terms. Read together when both indexes answer; separately (each
    failure named) when that read fails."""
    if vector is not None and shortlist and searched and health.keywords:
        try:
            found, indexed = await reader.similarities_and_terms(user_id, shortlist, vector)
        except Exception:  # noqa: BLE001 - the separate reads below tell which index failed
            pass
        else:
            sims.update({mid: cos for mid, cos in found.items() if mid not in sims})
            own_sims = await _similarities_to(reader, user_id, _own(q, own), shortlist, health)
            return own_sims, {mid: _terms(t) for mid, t in indexed.items()}
    own_sims = await _similarities(reader, user_id, q, vector, own, shortlist, sims, health)
    return own_sims, await _indexed(reader, user_id, shortlist, searched, health)


async def _similarities(
    reader: StoreReader,
    user_id: str,
    q: Query,
    vector: list[float] | None,
    own: list[float] | None,
    shortlist: Sequence[str],
    sims: dict[str, float],
    health: fallback.Health,
) -> dict[str, float]:
    """Fill in `sims` for the shortlisted ids not yet scored; returns the message's own similarities."""
    if vector is None or not shortlist:
        return {}
    unscored = [mid for mid in shortlist if mid not in sims]
    try:
        if unscored:
            sims.update(await reader.similarities(user_id, unscored, vector))
    except Exception as exc:  # noqa: BLE001
        health.fail(fallback.VectorScoringFailed(exc))
        return {}
    return await _similarities_to(reader, user_id, _own(q, own), shortlist, health)


async def _similarities_to(
    reader: StoreReader, user_id: str, vector: list[float] | None, ids: Sequence[str], health: fallback.Health
) -> dict[str, float]:
    """The similarity of each of `ids` to one of the query's other vectors (none without it). Both only add
    evidence, a memory's similarity being the best of the query's vectors: the message's own (keywords and
    context must not dilute it), and the agent's keywords' own (`seafood allergy` against 用户对海鲜过敏: mixed
    into the message's vector, what the agent named is diluted by everything else the message says)."""
    if vector is None or not ids:
        return {}
    try:
        return await reader.similarities(user_id, list(dict.fromkeys(ids)), vector)
    except Exception as exc:  # noqa: BLE001 - a sick vector index degrades recall, never fails it
        health.fail(fallback.VectorScoringFailed(exc))
        return {}


def _own(q: Query, own: list[float] | None) -> list[float] | None:
    """The message's own vector where it differs from the query's (keywords or context were mixed in)."""
    return own if q.keywords or q.context else None


async def _indexed(
    reader: StoreReader, user_id: str, shortlist: Sequence[str], searched: bool, health: fallback.Health
) -> dict[str, frozenset[str]]:
    """The index terms each shortlisted memory holds (empty when the keyword index is down)."""
    if not searched or not shortlist or not health.keywords:
        return {}
    try:
        indexed = await reader.indexed_terms(user_id, shortlist)
    except Exception as exc:  # noqa: BLE001 - a sick keyword index degrades recall, never fails it
        health.fail(fallback.KeywordIndexFailed(exc))
        return {}
    return {mid: _terms(t) for mid, t in indexed.items()}


def _terms(indexed: IndexedText) -> frozenset[str]:
    return frozenset(f"{indexed.terms} {indexed.keyword_terms}".split())
