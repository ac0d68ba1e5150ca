"""The current fact wins: a recalled memory that has a newer version brings that version.

When a fact changes (`add_memory` with `supersedes`), the new memory often shares no words with what the
user asks: 用户住在北京朝阳区 was replaced by 用户上个月搬到杭州了, and the question is 我还住在朝阳区吗. So
recall searches the superseded memories too, and each superseded candidate is replaced by its current
version (the `supersedes` chain followed forward to the active memory), which inherits the evidence and
relevance that found it. Without include_history the old version is then left out; with it, both are kept
and the older is ranked lower (ranking.OUTDATED_FACTOR), so the current fact comes first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pocketmem.base.models import Memory, Status
from pocketmem.core.ranking import Candidate
from pocketmem.store.roles import MemoryReads

MAX_CHAIN = 32  # versions followed at most (a chain is normally 1-3 long)
SEARCHED = (Status.active, Status.superseded)


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
