"""The context package's token budget (docs/profile.md, "The context package"). Pure.

    max_context_tokens = 4000:  system memory 600, recent context 2000, long-term evidence 900, reserve 500

Other totals keep the same proportions. Each part fills up to its share, its lines in priority order; the
package (everything but the reserve, which is left for the model's answer) never passes total - reserve.
When it would, lines are dropped in the seed's order: long-term evidence first (from the least relevant),
then recent context (from the oldest); the system memory (persona and user card) never. The system memory
is compiled to its share beforehand (`fit_lines`), cutting only the core-memory list, never the persona,
the identity or the onboarding note.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

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


def fit_lines(lines: Sequence[str], limit: int, estimate: Estimate, more: Callable[[int], str]) -> list[str]:
    """As many of `lines` as fit `limit` tokens (with a `more(n)` line for the rest when anything was left)."""
    out: list[str] = []
    used = 0
    for i, line in enumerate(lines):
        cost = estimate(line)
        left = len(lines) - i
        tail = estimate(more(left - 1)) if left > 1 else 0
        if used + cost + tail > limit:
            note = more(left)
            if used + estimate(note) <= limit:
                out.append(note)
            break
        out.append(line)
        used += cost
    return out


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
