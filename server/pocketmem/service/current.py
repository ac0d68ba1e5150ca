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


async def bring_current(
    reader: MemoryReads, user_id: str, candidates: Sequence[Candidate], statuses: Sequence[Status]
) -> list[Candidate]:
    """Candidates found among active and superseded memories -> those of `statuses`, each superseded one
    joined (or replaced) by its current version carrying its evidence."""
    out: dict[str, Candidate] = {}
    for candidate in candidates:
        memory = candidate.memory
        if memory.status == Status.superseded:
            current = await current_version(reader, user_id, memory)
            if current is not None:
                inherited = replace(candidate, memory=current)
                out[current.id] = _merge(out[current.id], inherited) if current.id in out else inherited
        if memory.status in statuses:
            out[memory.id] = _merge(out[memory.id], candidate) if memory.id in out else candidate
    return list(out.values())
