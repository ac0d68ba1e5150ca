"""Server-side SVG pictures for the insights view: no script, no third-party library, readable as text.

Every bar carries a <title> (the browser's tooltip, and what a screen reader reads), and every chart a legend
naming its colours in the page's language (`name` turns a key, e.g. a category, into its words).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, timedelta

from markupsafe import Markup, escape

from pocketmem.base.models import Category

PALETTE = {
    Category.preference.value: "#e4572e",
    Category.fact.value: "#4c78a8",
    Category.lesson.value: "#54a24b",
    Category.goal.value: "#b279a2",
    Category.person.value: "#f58518",
    Category.todo.value: "#e45756",
    Category.event.value: "#72b7b2",
    Category.episode.value: "#9d755d",
    Category.context.value: "#bab0ac",
    "recalled": "#4c78a8",
    "used": "#54a24b",
}
EVICTED, KEPT, USED_PLACES, FREE_PLACES = "#e45756", "#4c78a8", "#54a24b", "#eee"
WIDTH, HEIGHT, PAD = 720, 180, 28
Name = Callable[[str], str]


def day_range(end: date, days: int) -> list[str]:
    return [(end - timedelta(days=days - 1 - i)).isoformat() for i in range(days)]


def stacked_days(
    counts: Sequence[tuple[str, str, int]], days: Sequence[str], label: str, name: Name, keys: Sequence[str] = ()
) -> Markup:
    """Bars per day, stacked by key (category or event kind), with a legend of `keys` and the keys present."""
    by_day: dict[str, dict[str, int]] = {d: {} for d in days}
    for day, key, n in counts:
        if day in by_day:
            by_day[day][key] = by_day[day].get(key, 0) + n
    top = max([sum(v.values()) for v in by_day.values()] + [1])
    keys = sorted({*keys, *(k for v in by_day.values() for k in v)})
    step = (WIDTH - PAD) / max(1, len(days))
    parts = [_open(label)]
    parts.append(_axis(top))
    for i, day in enumerate(days):
        y = float(HEIGHT - PAD)
        for key in keys:
            n = by_day[day].get(key, 0)
            if not n:
                continue
            h = (HEIGHT - 2 * PAD) * n / top
            y -= h
            parts.append(
                f'<rect x="{PAD + i * step:.1f}" y="{y:.1f}" width="{max(1.0, step - 1):.1f}" height="{h:.1f}" '
                f'fill="{PALETTE.get(key, "#888")}"><title>{escape(day)} · {escape(name(key))}: {n}</title></rect>'
            )
    for i in (0, len(days) - 1):
        if days:
            x = PAD + i * step
            anchor = "start" if i == 0 else "end"
            parts.append(
                f'<text x="{x + (step if i else 0):.1f}" y="{HEIGHT - 8}" text-anchor="{anchor}">'
                f"{escape(days[i])}</text>"
            )
    parts.append("</svg>")
    return Markup("".join(parts)) + _legend([(PALETTE.get(k, "#888"), name(k)) for k in keys])


def histogram(buckets: Sequence[int], label: str, legend: tuple[str, str], marked_below: float | None = None) -> Markup:
    """Counts over importance 0..100% in equal buckets; buckets under `marked_below` drawn in the eviction colour.
    `legend`: the words for (evicted first, the others)."""
    top = max([*buckets, 1])
    n = max(1, len(buckets))
    step = (WIDTH - PAD) / n
    parts = [_open(label), _axis(top)]
    seen: set[str] = set()
    for i, count in enumerate(buckets):
        lo, hi = i / n, (i + 1) / n
        h = (HEIGHT - 2 * PAD) * count / top
        colour = EVICTED if marked_below is not None and lo <= marked_below else KEPT
        if count:
            seen.add(colour)
        parts.append(
            f'<rect x="{PAD + i * step:.1f}" y="{HEIGHT - PAD - h:.1f}" width="{step - 2:.1f}" height="{h:.1f}" '
            f'fill="{colour}"><title>{lo:.0%}–{hi:.0%}: {count}</title></rect>'
        )
    for value in (0.0, 0.5, 1.0):
        parts.append(
            f'<text x="{PAD + value * (WIDTH - PAD):.1f}" y="{HEIGHT - 8}" '
            f'text-anchor="{"start" if value == 0 else "end" if value == 1 else "middle"}">{value:.0%}</text>'
        )
    parts.append("</svg>")
    entries = [(c, words) for c, words in zip((EVICTED, KEPT), legend, strict=True) if c in seen or not seen]
    return Markup("".join(parts)) + _legend(entries)  # the colours of the bars drawn (both on an empty chart)


def gauge(used: int, cap: int, label: str, legend: tuple[str, str]) -> Markup:
    """The share of the cap in use; `legend`: the words for (places used, free places)."""
    share = min(1.0, used / cap) if cap else 0.0
    colour = EVICTED if share >= 0.95 else "#f58518" if share >= 0.8 else USED_PLACES
    bar = Markup(
        f'<svg class="chart gauge" viewBox="0 0 {WIDTH} 24" role="img" aria-label="{escape(label)}">'
        f'<rect x="0" y="4" width="{WIDTH}" height="16" fill="{FREE_PLACES}"/>'
        f'<rect x="0" y="4" width="{WIDTH * share:.1f}" height="16" fill="{colour}">'
        f"<title>{used} / {cap}</title></rect></svg>"
    )
    return bar + _legend([(colour, f"{legend[0]} {used}"), (FREE_PLACES, f"{legend[1]} {max(0, cap - used)}")])


def _open(label: str) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(label)}" '
        'font-size="11" font-family="sans-serif">'
    )


def _axis(top: int) -> str:
    return (
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH}" y2="{HEIGHT - PAD}" stroke="#999"/>'
        f'<text x="{PAD - 4}" y="{PAD + 4}" text-anchor="end">{top}</text>'
        f'<text x="{PAD - 4}" y="{HEIGHT - PAD}" text-anchor="end">0</text>'
    )


def _legend(entries: Sequence[tuple[str, str]]) -> Markup:
    items = "".join(
        f'<li><span class="swatch" style="background:{colour}"></span>{escape(words)}</li>' for colour, words in entries
    )
    return Markup(f'<ul class="legend">{items}</ul>')
