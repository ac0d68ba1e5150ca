"""Two devices patched one core memory before syncing: what the later version keeps of the earlier one.

Each patch left a revision row (previous text, new text, mode). Following them back from each side's text
gives the patches made on each side since the version both started from; where the two differ:

    appends only   the later text takes the earlier side's appended parts that it lacks, each where it was
                   made among the later text's own (before the first made after it, else at the end), so all
                   read in the order they were made, as a new version one millisecond after the later one (with
                   its own revision), so it wins on every device and a second sync changes nothing
    a replace      on either side, the later version wins as it is (a replace is a deliberate rewrite); the
                   earlier side's patches stay in the revisions, and the sync report lists the conflict. When the
                   library keeps its own version against patches new to it, that version travels again, one
                   millisecond on, so the devices that already hold it receive those revisions too
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
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
    """What an append added to the text (its dated part, 「（2026-11-27：…）」); None for any other patch, and for
    a merge (`joins`), which may have put parts between others."""
    base = revision.previous_content.rstrip()
    if revision.mode != "append" or revision.reason == REASON or not revision.new_content.startswith(base):
        return None
    return revision.new_content[len(base):]


def joins(revision: Revision) -> bool:
    """Whether the patch only added to the text: an append, or a merge of appends made here."""
    return appended(revision) is not None or (revision.mode == "append" and revision.reason == REASON)


def parts(chain: Iterable[Revision], pool: Sequence[Revision]) -> list[Revision]:
    """The appends whose parts a chain of patches put in the text: its appends, and for a merge in it the appends
    of the pool whose parts the merge added."""
    out: dict[str, Revision] = {}
    for revision in chain:
        if appended(revision) is not None:
            out[revision.id] = revision
        elif joins(revision):
            out |= {
                r.id: r for r in pool
                if (part := appended(r)) and part in revision.new_content and part not in revision.previous_content
            }
    return list(out.values())


def reconcile(later: Memory, earlier: Memory, revisions: Iterable[Revision]) -> CoreConflict | None:
    """How two versions of one core memory meet (`later` wins by version); None when only one side patched
    it since their common version, or the later text already holds what the earlier side appended."""
    if later.content == earlier.content:
        return None
    pool = list({r.id: r for r in revisions}.values())
    kept = history(later.content, pool)
    lost = history(earlier.content, pool)
    in_later = {r.id for r in kept} | {r.id for r in parts(kept, pool)}
    lost_ids = {r.id for r in lost}
    lost = [r for r in lost if r.id not in in_later]
    if not lost:
        return None
    if not all(joins(r) for r in [*lost, *(r for r in kept if r.id not in lost_ids)]):
        return CoreConflict("later_wins")
    missing = [r for r in parts(lost, pool) if r.id not in in_later]
    text = in_order(later.content, missing, parts(kept, pool))
    if text == later.content:
        return None
    return CoreConflict("merged", *_merged_version(later, text))


def in_order(text: str, missing: Sequence[Revision], held: Sequence[Revision]) -> str:
    """`text` with the parts of the `missing` appends it lacks, each put before the first part of `held` (the
    appends it holds) made after it, else at the end: the parts read in the order they were made."""
    placed = list(held)
    for revision in sorted(missing, key=_made):
        part = appended(revision)
        if not part or part in text:
            continue
        after = [text.find(p) for r in placed if _made(r) > _made(revision) and (p := appended(r)) and p in text]
        at = min(after, default=None)
        text = text.rstrip() + part if at is None else text[:at] + part + text[at:]
        placed.append(revision)
    return text


def _made(revision: Revision) -> tuple[datetime, str]:
    return revision.created_at, revision.id


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
