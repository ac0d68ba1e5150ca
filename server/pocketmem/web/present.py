"""What the page says about things the services name in English: event kinds as sentences, review reasons,
error kinds, times. Each returns text in the page's language (markup escaped by the caller's template)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, tzinfo
from typing import Any

from markupsafe import Markup

from pocketmem.base.errors import Conflict, InvalidInput, NotFound, PocketmemError
from pocketmem.base.models import Event
from pocketmem.core.shown_time import absolute, as_instant, relative
from pocketmem.web.i18n import MESSAGES

Translate = Callable[..., str]

_USED = re.compile(r"^shaped (\d+) replies")
_RECALLED = re.compile(r"^recalled (\d+) times")
_DECAY = re.compile(r"^importance fell to ([\d.]+) \(< ([\d.]+)\) from ([\d.]+)")


def percent(value: float | None) -> str:
    """Importance and similar 0..1 figures as a person reads them: 81%."""
    return "—" if value is None else f"{round(value * 100)}%"


def moment(value: datetime | str | None, now: datetime, zone: tzinfo, locale: str) -> Markup:
    """A relative time (3天前, "3 days ago") carrying the absolute one, with its offset, on hover."""
    if value is None:
        return Markup("—")
    instant = as_instant(value)
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        instant.isoformat(), absolute(instant, zone), relative(instant, now, zone, locale)
    )


def event_sentence(event: Event, t: Translate, when: Callable[[Any], Markup]) -> Markup:
    """One event of a memory as a sentence; the user's own note stays as written, marked as user text."""
    kind = event.kind.value
    payload = event.payload or {}
    if kind == "deleted":
        reason = str(payload.get("reason") or "user_delete")
        text = Markup.escape(t("event.deleted", reason=t(f"reason.{reason}")))
    else:
        text = Markup.escape(t(f"event.{kind}") if f"event.{kind}" in MESSAGES else t("event.other"))
    if payload.get("purge_at"):
        text += Markup(" ") + Markup.escape(t("event.purge_at", when="\0")).replace("\0", when(payload["purge_at"]))
    note = payload.get("note")
    if isinstance(note, str) and note and kind == "deleted":
        text += Markup(' <span class="muted">{}</span> <q data-user>{}</q>').format(t("event.note"), note)
    return text


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


def error_text(exc: PocketmemError, t: Translate, locale: str) -> str:
    """The error kinds the page shows, in the page's language (English keeps the service's own words)."""
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
