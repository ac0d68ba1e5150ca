"""Two devices patched one core memory before syncing: what the later version keeps of the earlier one.

Each patch left a revision row (previous text, new text, mode). Following them back from each side's text
gives the patches made on each side since the version both started from; where the two differ:

    appends only   the later text keeps the earlier side's appended parts that it lacks, in the order they
                   were made, as a new version one millisecond after the later one (with its own revision),
                   so it wins on every device and a second sync changes nothing
    a replace      on either side, the later version wins as it is (a replace is a deliberate rewrite); the
                   earlier side's patches stay in the revisions, and the sync report lists the conflict. When the
                   library keeps its own version against patches new to it, that version travels again, one
                   millisecond on, so the devices that already hold it receive those revisions too
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from pocketmem.base.models import Memory, Revision
from pocketmem.core.text import content_hash
from pocketmem.store.roles import StoreWriter

STEP = timedelta(milliseconds=1)  # the stores keep instants to the millisecond
REASON = "sync: kept what another device appended meanwhile"
Resolution = Literal["merged", "later_wins"]


@dataclass(frozen=True)
class CoreConflict:
    """Both sides patched the memory since their common version: how it was settled."""

    resolution: Resolution
    settled: Memory | None = None  # a new version to write: the later one with the earlier side's appends, or
    # the kept one again (`later_wins` where the library keeps its own), one millisecond after the later one
    revision: Revision | None = None  # the merged version's revision (previous: the later text)


async def settle(
    tx: StoreWriter, ours: Memory, incoming: Memory, revisions: Sequence[Revision], *, incoming_wins: bool,
    announce: bool,
) -> CoreConflict | None:
    """How `incoming` (with its `revisions`) meets `ours`, the version in the store behind `tx`. `announce`: the
    store's changes travel on (the library), so a version kept against patches new to it is written again."""
    known = await tx.list_revisions(ours.user_id, ours.id)
    later, earlier = (incoming, ours) if incoming_wins else (ours, incoming)
    conflict = reconcile(later, earlier, [*known, *revisions])
    if conflict is None or conflict.settled is not None or incoming_wins or not announce:
        return conflict
    if not {r.id for r in revisions} - {r.id for r in known}:
        return conflict  # sent again: the others have had them since the first time
    return CoreConflict(conflict.resolution, ours.model_copy(update={"updated_at": ours.updated_at + STEP}))


def history(content: str, revisions: Iterable[Revision]) -> list[Revision]:
    """The patches that made `content`, newest first: each revision's previous text traced back."""
    pool = list(revisions)
    chain: list[Revision] = []
    seen: set[str] = set()
    text = content
    while True:
        made = [r for r in pool if r.new_content == text and r.id not in seen]
        if not made:
            return chain
        step = max(made, key=lambda r: (r.created_at, r.id))
        chain.append(step)
        seen.add(step.id)
        text = step.previous_content


def appended(revision: Revision) -> str | None:
    """What an append added to the text (its dated part, 「（2026-11-27：…）」); None for any other patch."""
    base = revision.previous_content.rstrip()
    if revision.mode != "append" or not revision.new_content.startswith(base):
        return None
    return revision.new_content[len(base):]


def reconcile(later: Memory, earlier: Memory, revisions: Iterable[Revision]) -> CoreConflict | None:
    """How two versions of one core memory meet (`later` wins by version); None when only one side patched
    it since their common version, or the later text already holds what the earlier side appended."""
    if later.content == earlier.content:
        return None
    pool = {r.id: r for r in revisions}.values()
    kept = history(later.content, pool)
    lost = history(earlier.content, pool)
    kept_ids, lost_ids = {r.id for r in kept}, {r.id for r in lost}
    lost = sorted((r for r in lost if r.id not in kept_ids), key=lambda r: (r.created_at, r.id))
    if not lost:
        return None
    if any(appended(r) is None for r in [*lost, *(r for r in kept if r.id not in lost_ids)]):
        return CoreConflict("later_wins")
    text = later.content
    for revision in lost:
        part = appended(revision)
        if part and part not in text:
            text = text.rstrip() + part
    if text == later.content:
        return None
    return CoreConflict("merged", *_merged_version(later, text))


def _merged_version(later: Memory, text: str) -> tuple[Memory, Revision]:
    when = later.updated_at + STEP
    # The same merge made in two places is one revision (an id from what it joins).
    digest = hashlib.sha256("\x00".join((later.id, later.content, text)).encode()).hexdigest()[:32]
    revision = Revision(
        id=digest, memory_id=later.id, user_id=later.user_id, previous_content=later.content, new_content=text,
        mode="append", reason=REASON, created_at=when,
    )
    memory = later.model_copy(update={"content": text, "content_hash": content_hash(text), "updated_at": when})
    return memory, revision
