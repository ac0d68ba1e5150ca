"""The context package's token budget (docs/profile.md, "The context package"). Pure.

    max_context_tokens = 4000:  system memory 600, recent context 2000, long-term evidence 900, reserve 500

Other totals keep the same proportions. Each part fills up to its share, its lines in priority order; the
package (everything but the reserve, which is left for the model's answer) never passes total - reserve.
When it would, lines are dropped in the seed's order: long-term evidence first (from the least relevant),
then recent context (from the oldest); the system memory (persona and user card) never. The system memory
is compiled beforehand (`fit_system`): the core-memory list is cut to its share (`- … +N`, never without that
note), a share that a long persona and identity cannot take below half of the system share; persona and
identity are whole, the other parts giving way to them, unless they would not leave the core list room in the
package: then they are shortened, the longest first (`shorten_evenly`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pocketmem.core.formatting import ELLIPSIS, cut

SPLIT = {"system": 600, "recent": 2000, "evidence": 900, "reserve": 500}
SPLIT_TOTAL = sum(SPLIT.values())

Estimate = Callable[[str], int]


@dataclass(frozen=True)
class Shares:
    total: int
    system: int
    recent: int
    evidence: int
    reserve: int

    @property
    def usable(self) -> int:
        return self.total - self.reserve


def shares(total: int) -> Shares:
    part = {k: total * v // SPLIT_TOTAL for k, v in SPLIT.items() if k != "reserve"}
    return Shares(total, part["system"], part["recent"], part["evidence"], total - sum(part.values()))


@dataclass
class Block:
    heading: str
    lines: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join([self.heading, *self.lines]) if self.lines else ""


@dataclass
class Package:
    text: str
    tokens: dict[str, int]
    left_out: dict[str, int]  # lines beyond their part's share
    trimmed: dict[str, int]  # lines dropped to keep the whole package within total - reserve
    shares: Shares

    @property
    def used(self) -> int:
        return sum(self.tokens.values())


def fit_lines(
    lines: Sequence[str], limit: int, estimate: Estimate, more: Callable[[int], str], total: int | None = None
) -> list[str]:
    """As many of `lines` as fit `limit` tokens, with a `more(n)` line for the rest when anything was left (n
    counted from `total` when only the first of them were read): the note is there even when it alone passes
    `limit`, so a list is never dropped without a word."""
    count = max(len(lines), total or 0)
    out: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        cost = estimate(line)
        left = count - i
        tail = estimate(more(left - 1)) if left > 1 else 0
        if used + cost + tail > limit:
            out.append(more(left))
            break
        out.append(line)
        used += cost
    else:
        if count > len(lines):  # room was kept for it by the last line's tail
            out.append(more(count - len(lines)))
    return out


def fit_system(
    profile: Sequence[str], core: Sequence[str], fixed: int, sh: Shares, room: int, estimate: Estimate,
    more: Callable[[int], str], total: int | None = None,
) -> tuple[list[str], list[str]]:
    """The system memory's persona and identity lines (`profile`) and core-memory lines (the first of `total`),
    with `fixed` tokens of headings and notes around them, for a package that has `room` tokens in all.

    The core list gets the system share less what the rest takes, but never less than half the share: a long
    persona cannot crowd out the allergies. The rest is whole (the other parts give way to it) while the whole
    fits `room`; past that, the profile lines are shortened (`shorten_evenly`), never the core list's note."""
    own = fixed + sum(map(estimate, profile))
    listed = fit_lines(core, sh.system - min(own, sh.system // 2), estimate, more, total)
    over = own + sum(map(estimate, listed)) - room
    if over > 0:
        profile = shorten_evenly(profile, sum(map(estimate, profile)) - over, estimate)
    return list(profile), listed


def shorten_evenly(lines: Sequence[str], room: int, estimate: Estimate) -> list[str]:
    """`lines` within `room` tokens: each line longer than one common length is cut to it (ending with `…`,
    between two characters as a reader sees them), the shorter ones stay whole; one that cannot keep even `…`
    becomes "" (the caller leaves it out)."""
    costs = [estimate(line) for line in lines]
    low, high = 0, max(costs, default=0)
    while low < high:  # the largest common length whose lines fit
        mid = (low + high + 1) // 2
        if sum(min(cost, mid) for cost in costs) <= room:
            low = mid
        else:
            high = mid - 1
    return [line if cost <= low else _shortened(line, low, estimate) for line, cost in zip(lines, costs, strict=True)]


def _shortened(line: str, limit: int, estimate: Estimate) -> str:
    """The longest start of `line` that, with `…`, costs at most `limit` tokens ("" when not even `…` fits)."""
    low, high = 0, len(line)
    while low < high:
        mid = (low + high + 1) // 2
        if estimate(cut(line, mid).rstrip() + ELLIPSIS) <= limit:
            low = mid
        else:
            high = mid - 1
    return cut(line, low).rstrip() + ELLIPSIS if estimate(ELLIPSIS) <= limit else ""


def _take(block: Block, limit: int, estimate: Estimate) -> tuple[Block, int]:
    """The block cut to `limit` tokens (heading included); how many lines were left out."""
    kept: list[str] = []
    used = estimate(block.heading)
    for line in block.lines:
        cost = estimate(line)
        if used + cost > limit:
            break
        kept.append(line)
        used += cost
    return Block(block.heading, kept), len(block.lines) - len(kept)


def _cost(block: Block, estimate: Estimate) -> int:
    return estimate(block.text())


def assemble(system: str, recent: Block, evidence: Block, sh: Shares, estimate: Estimate, footer: str = "") -> Package:
    recent, left_recent = _take(recent, sh.recent, estimate)
    evidence, left_evidence = _take(evidence, sh.evidence, estimate)
    dropped_recent = dropped_evidence = 0
    fixed = estimate(system) + estimate(footer)
    over = fixed + _cost(recent, estimate) + _cost(evidence, estimate) - sh.usable
    while over > 0 and evidence.lines:  # evidence first, the least relevant line first
        evidence.lines.pop()
        dropped_evidence += 1
        over = fixed + _cost(recent, estimate) + _cost(evidence, estimate) - sh.usable
    while over > 0 and recent.lines:  # then recent context, the oldest (last) line first
        recent.lines.pop()
        dropped_recent += 1
        over = fixed + _cost(recent, estimate) + _cost(evidence, estimate) - sh.usable
    parts = [p for p in (system, evidence.text(), recent.text(), footer) if p]  # what the message needs first
    return Package(
        text="\n\n".join(parts),
        tokens={"system": estimate(system), "recent": _cost(recent, estimate),
                "evidence": _cost(evidence, estimate), "footer": estimate(footer)},
        left_out={"recent": left_recent, "evidence": left_evidence},
        trimmed={"recent": dropped_recent, "evidence": dropped_evidence},
        shares=sh,
    )
