"""What the page says about things the services name in English: event kinds as sentences, review reasons,
error kinds, times. Each returns text in the page's language (markup escaped by the caller's template)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, tzinfo
from functools import cached_property
from typing import Any

from markupsafe import Markup

from pocketmem.base.errors import Conflict, InvalidInput, NotFound, PocketmemError
from pocketmem.base.models import CHAIN_LINKS, Event, Status
from pocketmem.core.formatting import ELLIPSIS, cut
from pocketmem.core.instants import whole_day
from pocketmem.core.shown_time import absolute, as_instant, day, relative
from pocketmem.service.manage.browse import MemoryDetail
from pocketmem.web.i18n import MESSAGES

Translate = Callable[..., str]

_USED = re.compile(r"^shaped (\d+) replies")
_RECALLED = re.compile(r"^recalled (\d+) times")
_DECAY = re.compile(r"^importance fell to ([\d.]+) \(< ([\d.]+)\) from ([\d.]+)")
SNIPPET = 60  # characters of another memory's text an event sentence shows


def percent(value: float | None) -> str:
    """Importance and similar 0..1 figures as a person reads them: 81%."""
    return "—" if value is None else f"{round(value * 100)}%"


def moment(value: datetime | str | None, now: datetime, zone: tzinfo, locale: str, *, due: bool = False) -> Markup:
    """A relative time (3天前, "3 days ago") carrying the absolute one, with its offset, on hover; a due time
    (`due`) that is a date alone (core/instants.whole_day) is that date."""
    if value is None:
        return Markup("—")
    instant = as_instant(value)
    if due and whole_day(instant, zone):
        return Markup('<time datetime="{0}">{0}</time>').format(day(instant, zone))
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        instant.isoformat(), absolute(instant, zone), relative(instant, now, zone, locale)
    )


@dataclass(frozen=True)
class History:
    """What the sentences of one memory's events say them with: the page's words and times, and the memory's
    detail (the memory as it is now, its events newest first, the memories its chain events name)."""

    t: Translate
    when: Callable[[Any], Markup]
    now: datetime
    detail: MemoryDetail
    base: str

    @cached_property
    def _trashed_by(self) -> int | None:
        """The event that put the memory in the trash it is in now (the newest move there), if it is there."""
        if self.detail.memory.status != Status.trashed:
            return None
        return next((e.id for e in self.detail.events if "purge_at" in e.payload), None)

    def sentence(self, event: Event) -> Markup:
        """One event as a sentence: a chain event names the other memory; the move to the trash the memory is in
        says when it will be purged; the user's own note stays as written, marked as user text."""
        kind = event.kind.value
        payload = event.payload
        if kind == "deleted":
            reason = self.t(f"reason.{payload.get('reason') or 'user_delete'}")
            text = self._say("event.deleted", reason=Markup.escape(reason))
        elif event.kind in CHAIN_LINKS:
            text = self._say(f"event.{kind}", memory=self._other(event.other_memory))
        else:
            text = self._say(f"event.{kind}" if f"event.{kind}" in MESSAGES else "event.other")
        if event.id == self._trashed_by and (purge_at := self.detail.memory.purge_at) is not None:
            key = "event.purge_due" if purge_at > self.now else "event.purge_waiting"
            text += Markup(" ") + self._say(key, when=self.when(purge_at))
        note = payload.get("note")
        if isinstance(note, str) and note and kind == "deleted":
            text += Markup(' <span class="muted">{}</span> <q data-user>{}</q>').format(self.t("event.note"), note)
        return text

    def _say(self, key: str, **parts: Markup) -> Markup:
        """The page's sentence for `key` with `parts` (markup) in its places."""
        text = Markup.escape(self.t(key, **{name: f"\0{name}\0" for name in parts}))
        for name, part in parts.items():
            text = text.replace(f"\0{name}\0", part)
        return text

    def _other(self, memory_id: str | None) -> Markup:
        """The other memory of a chain event: a link to it, its text shortened; or that it is no longer kept."""
        other = self.detail.named.get(memory_id or "")
        if other is None:
            return Markup.escape(self.t("event.gone"))
        shown = other.content if len(other.content) <= SNIPPET else cut(other.content, SNIPPET - 1) + ELLIPSIS
        return Markup('<a href="{}/memories/{}" data-user>{}</a>').format(self.base, other.id, shown)


def review_why(why: str, t: Translate) -> str:
    if found := _USED.match(why):
        return t("review.why.used", n=found.group(1))
    if found := _RECALLED.match(why):
        return t("review.why.recalled", n=found.group(1))
    if found := _DECAY.match(why):
        now, bar, was = (percent(float(x)) for x in found.groups())
        return t("review.why.decay", now=now, bar=bar, was=was)
    return why


class FormTooLarge(InvalidInput):
    """A posted body over the form's limit (413): declared by Content-Length, or counted as it arrives."""

    def __init__(self, limit: int) -> None:
        super().__init__("form", f"is larger than {limit} bytes")
        self.limit = limit


def error_text(exc: PocketmemError, t: Translate, locale: str, zone: tzinfo) -> str:
    """The error kinds the page shows, in the page's language: a conflict whose reason it knows in its own words
    from the error's facts (either language); otherwise English keeps the service's own words."""
    if isinstance(exc, Conflict) and exc.reason is not None:
        facts = {k: absolute(v, zone) if isinstance(v, datetime) else v for k, v in exc.facts.items()}
        return t(f"error.conflict.{exc.reason.value}", **facts)
    if locale == "en":
        return str(exc)
    if isinstance(exc, FormTooLarge):
        return t("error.too_large", limit=f"{exc.limit:,}")
    if isinstance(exc, NotFound):
        return t("error.not_found")
    if isinstance(exc, InvalidInput):
        return t("error.invalid", field=field_label(exc.field, t), rule=t("error.rule"))
    if isinstance(exc, Conflict):
        return t("error.conflict")
    return t("error.internal")


def field_label(field: str, t: Translate) -> str:
    """The page's word for a field an error names (scores.info -> 信息 I); never the raw English name."""
    name = field.rsplit(".", 1)[-1]
    for key in (f"field.{name}", f"profile.{field}", name):
        if key in MESSAGES:
            return t(key)
    return t("field.unknown")
