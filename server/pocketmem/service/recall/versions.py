"""Which version of a fact answers: the current fact wins.

Linked versions. When a fact changes (`add_memory` with `supersedes`), the new memory often shares no words
with what the user asks: 用户住在北京朝阳区 was replaced by 用户上个月搬到杭州了, and the question is
我还住在朝阳区吗. So recall searches the superseded memories too, and each superseded candidate is replaced
by its current version (the `supersedes` chain followed forward to the active memory), which inherits the
evidence and relevance that found it (`bring_current`, before the bar). Without include_history the old
version is then left out; with it, both are kept and the older is ranked lower (ranking.OUTDATED_FACTOR),
so the current fact comes first.

Unlinked versions. Agents often forget `supersedes`: 用户住在北京 is stored, later 我上个月搬到杭州了 is
stored as a new memory, and 我现在住哪？ finds only the first (the second shares no word with the question).
So after ranking (`newest_first`), for each recalled memory this step looks for newer active memories of the
same user that fill the same slot for the same person (core/slots.py: where someone lives, works, their
phone, a pet, a preference that flipped …) and brings the newest one in, ranked directly above the older. A
version must say that something changed (搬到, 换成, moved, switched; 现在 / now with a new value), so the
older is marked `outdated` (the injection's existing （已过时）/ (outdated) marker); it is never dropped: the
rule is a heuristic, and a distinct fact must not be lost.

Where the newer versions come from: the newest memories that hold the slots' cue words (CUE_HITS per slot,
at most MAX_CUE_HITS), one indexed read that ranks nothing and reads only what the step weighs (`Holder`:
content, category, dates); whole rows are loaded for the few it lists. Any store failure leaves the ranking
as it was.

The message itself may ask about a slot (我现在住哪？ where do I live now?; only a question, only slots not keyed
by a thing). When that slot holds one value for the same person and the question names that person (我, my,
妹妹, a name; 广州南站坐地铁怎么走 names nobody), that value comes at rank ASKED_RANK + 1 at the latest:
用户住在北京朝阳区，离公司很近 shares only 住 with 我住在哪, too little for the bar. When it holds two or more, the
newest does, above the older ones (for broad slots only when it says it changed or names a value the older
does not: 用户住在北京 then, unlinked and without a change word, 用户住在杭州 answers 我住在哪). The older are
marked outdated only when the newest says it changed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from pocketmem.base.models import Category, Memory, Status, expired
from pocketmem.core import slots
from pocketmem.core.ranking import Candidate, Ranked, freshness
from pocketmem.core.scoring import importance_now
from pocketmem.store.roles import MemoryReads, StoreReader
from pocketmem.store.types import Holder

log = logging.getLogger(__name__)

MAX_CHAIN = 32  # versions followed at most (a chain is normally 1-3 long)
SEARCHED = (Status.active, Status.superseded)
POOL = 12  # recalled memories looked at (retrieval.SHADOW_POOL)
CUE_HITS = 32  # keyword hits on the cue words, per slot looked for
MAX_CUE_HITS = 128
ASKED_RANK = 1  # where the newest value of a slot the message asks about goes, at the latest


async def current_version(reader: MemoryReads, user_id: str, memory: Memory) -> Memory | None:
    """The active memory at the end of `memory`'s supersedes chain; None if the chain ends elsewhere (trashed)."""
    for _ in range(MAX_CHAIN):
        if memory.status == Status.active:
            return memory
        successor = await reader.successor_of(user_id, memory.id)
        if successor is None:
            return None
        memory = successor
    return None


def _merge(a: Candidate, b: Candidate) -> Candidate:
    """One memory found twice (itself, and through an older version): the stronger evidence counts."""
    cosines = [c for c in (a.cosine, b.cosine) if c is not None]
    best = a if a.relevance >= b.relevance else b
    return replace(best, memory=a.memory, cosine=max(cosines) if cosines else None, terms=a.terms | b.terms,
                   in_window=a.in_window or b.in_window)


async def earlier_versions(reader: MemoryReads, user_id: str, memory: Memory) -> list[Memory]:
    """The superseded memories `memory` replaced, newest first (its supersedes links followed back)."""
    out: list[Memory] = []
    while memory.supersedes is not None and len(out) < MAX_CHAIN:
        found = await reader.get_memories(user_id, [memory.supersedes])
        if not found or found[0].status != Status.superseded:
            break
        memory = found[0]
        out.append(memory)
    return out


async def bring_current(
    reader: MemoryReads, user_id: str, candidates: Sequence[Candidate], statuses: Sequence[Status]
) -> list[Candidate]:
    """Candidates found among active and superseded memories -> those of `statuses`, each superseded one
    joined (or replaced) by its current version carrying its evidence. With the history (superseded memories
    among `statuses`), every version of a found memory's chain comes, each with the evidence that found any of
    them, so the order among them is by recency: the current first, then each earlier one."""
    out: dict[str, Candidate] = {}
    history = Status.superseded in statuses

    def join(memory: Memory, found: Candidate) -> None:
        inherited = replace(found, memory=memory)
        out[memory.id] = _merge(out[memory.id], inherited) if memory.id in out else inherited

    chains: list[list[Memory]] = []
    for candidate in candidates:
        memory = candidate.memory
        current = await current_version(reader, user_id, memory) if memory.status == Status.superseded else None
        if current is not None:
            join(current, candidate)
        if memory.status in statuses:
            out[memory.id] = _merge(out[memory.id], candidate) if memory.id in out else candidate
        head = current or (memory if memory.status == Status.active else None)
        if history and head is not None and head.supersedes is not None:
            chains.append([head, *await earlier_versions(reader, user_id, head)])
    for chain in chains:  # every version carries what found any of them
        found = [out[m.id] for m in chain if m.id in out]
        merged = found[0]
        for other in found[1:]:
            merged = _merge(merged, other)
        for version in chain:
            join(version, merged)
    return list(out.values())


async def newest_first(
    reader: StoreReader,
    user_id: str,
    message: str,
    ranked: Sequence[Ranked],
    now: datetime,
    categories: Sequence[Category] | None = None,
) -> list[Ranked]:
    """`ranked` with, above each recalled memory, the newest memory that states the same slot of the same
    person (brought in if it was not recalled), the older marked outdated when the newer says it changed;
    and, when the message asks about a slot whose value has changed, its newest value near the top."""
    pool = [r for r in ranked[:POOL] if r.memory.status == Status.active]
    facts = {r.memory.id: slots.describe(r.memory.content) for r in pool}
    # Only a question asks about a slot (the tagger behind describe is the costly part: statements skip it).
    asked = (
        {n: who for n, who in slots.describe(message).slots.items() if n not in slots.KEYED}
        if slots.is_question(message)
        else {}
    )
    names = sorted({name for fact in facts.values() for name in fact.slots} | set(asked))
    if not names:
        return list(ranked)
    try:
        mates = await _slot_mates(reader, user_id, names)
    except Exception as exc:  # noqa: BLE001 - a sick index leaves recall as it was, never fails it
        log.warning("recall could not look for newer versions: %s", exc)
        return list(ranked)
    allowed = set(categories) if categories else None
    mates = [
        m
        for m in mates
        if not expired(m.expires_at, now) and (allowed is None or m.category in allowed)
    ]
    aliases = slots.alias_map([*facts.values(), *(slots.describe(m.content) for m in mates)])
    newer_of: dict[str, Holder] = {}
    for r in pool:
        newest = _newest_version(r.memory, facts[r.memory.id], mates, aliases)
        if newest is not None:
            newer_of[r.memory.id] = newest
    answers = {name: _versions(name, who, mates, aliases) for name, who in asked.items()}
    if not slots.names_a_party(message):  # one value answers only a question about someone (我住在哪)
        answers = {name: versions for name, versions in answers.items() if len(versions) > 1}
    # Whole rows only for the versions the step may list that recall did not.
    whole = {r.memory.id: r.memory for r in ranked}
    wanted = {h.id for h in newer_of.values()} | {v[0].id for v in answers.values() if v}
    try:
        whole |= {m.id: m for m in await reader.get_memories(user_id, sorted(wanted - set(whole)))}
    except Exception as exc:  # noqa: BLE001
        log.warning("recall could not load the newer versions: %s", exc)
        return list(ranked)
    out = _reorder(ranked, newer_of, whole, now) if newer_of else list(ranked)
    for name, versions in answers.items():
        out = _answer_asked(out, name, versions, whole, now)
    return out


def _versions(name: str, who: frozenset[str], mates: Sequence[Holder], aliases: slots.Aliases) -> list[Holder]:
    """The values the slot `name` holds for the person `who`, newest first."""
    found = [
        m for m in mates if slots.same_person(who, slots.describe(m.content).slots.get(name, frozenset()), aliases)
    ]
    return sorted(found, key=lambda m: m.valid_from, reverse=True)


def _answer_asked(
    ranked: list[Ranked], name: str, versions: Sequence[Holder], whole: dict[str, Memory], now: datetime
) -> list[Ranked]:
    """The message names a slot (我现在住哪？ where do I live now?) that holds values for the same person
    (`versions`, newest first): the newest comes at ASKED_RANK at the latest, the others below it, marked when
    it changed. A slot with one value answers with it (newest_first keeps that for questions naming someone)."""
    if not versions or versions[0].id not in whole:
        return ranked
    newest = versions[0]
    if len(versions) == 1:
        return _place(ranked, whole[newest.id], ASKED_RANK, now)
    older_fact, newest_fact = slots.describe(versions[1].content), slots.describe(newest.content)
    change = slots.changed(older_fact, newest_fact)
    if name in slots.BROAD and not change and not newest_fact.things - older_fact.things:
        return ranked  # a broad cue names the topic too: without a change or a new value, no answer
    older = {m.id for m in versions[1:]}
    ids = [r.memory.id for r in ranked]
    first_older = min((i for i, mid in enumerate(ids) if mid in older), default=len(ids))
    placed = _place(ranked, whole[newest.id], min(ASKED_RANK, first_older), now)
    if not change:
        return placed
    return [replace(r, earlier=True) if r.memory.id in older else r for r in placed]


def _place(ranked: list[Ranked], memory: Memory, at: int, now: datetime) -> list[Ranked]:
    """`memory` at index `at` at the latest: moved up if listed lower, brought in if not listed."""
    ids = [r.memory.id for r in ranked]
    if memory.id in ids and ids.index(memory.id) <= at:
        return ranked
    listed = next((r for r in ranked if r.memory.id == memory.id), None)
    rest = [r for r in ranked if r.memory.id != memory.id]
    if listed is None:
        listed = _brought(memory, rest[min(at, len(rest) - 1)], now) if rest else _alone(memory, now)
    return [*rest[:at], listed, *rest[at:]]


def _newest_version(
    memory: Memory, fact: slots.Fact, mates: Sequence[Holder], aliases: slots.Aliases
) -> Holder | None:
    best: Holder | None = None
    for mate in mates:
        if mate.id == memory.id or mate.valid_from <= memory.valid_from:
            continue
        if (best is None or mate.valid_from > best.valid_from) and slots.shared_slots(
            fact, slots.describe(mate.content), aliases
        ):
            best = mate
    return best


async def _slot_mates(reader: StoreReader, user_id: str, names: Sequence[str]) -> list[Holder]:
    """Active memories that may fill these slots: the newest written that hold the slots' cue words (a newer
    version is what is looked for; ranking every match of a common cue word grew with the store)."""
    k = min(MAX_CUE_HITS, CUE_HITS * len(names))
    return await reader.newest_holders(user_id, slots.cue_terms(list(names)), k)


def _reorder(
    ranked: Sequence[Ranked], newer_of: dict[str, Holder], whole: dict[str, Memory], now: datetime
) -> list[Ranked]:
    out: list[Ranked] = []
    placed: set[str] = set()
    by_id = {r.memory.id: r for r in ranked}
    for r in ranked:
        if r.memory.id in placed:
            continue  # already listed above an older version of itself
        newer = newer_of.get(r.memory.id)
        if newer is not None and newer.id not in placed:
            out.append(by_id.get(newer.id) or _brought(whole[newer.id], r, now))
            placed.add(newer.id)
        out.append(replace(r, earlier=True) if newer is not None else r)  # a version says it changed
        placed.add(r.memory.id)
    return out


def _brought(memory: Memory, older: Ranked, now: datetime) -> Ranked:
    """A newer version recall did not find by itself: it takes the place (score, relevance) of the older."""
    age = (now - memory.valid_from).total_seconds() / 86400.0
    imp = importance_now(memory, now)
    return Ranked(memory, older.score, older.relevance, 0.0, 0.0, freshness(age), imp)


def _alone(memory: Memory, now: datetime) -> Ranked:
    """The newest value of an asked slot when nothing else was recalled: relevant by the slot alone."""
    age = (now - memory.valid_from).total_seconds() / 86400.0
    imp = importance_now(memory, now)
    return Ranked(memory, 0.0, 0.0, 0.0, 0.0, freshness(age), imp)


def warm_up() -> None:
    """Load the part-of-speech tagger (its HMM tables, about half a second) before the first recall needs it."""
    slots.describe("用户住在北京。")
