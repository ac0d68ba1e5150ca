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

from pocketmem.base.errors import Conflict, InvalidInput, InvalidReason, NotFound, PocketmemError
from pocketmem.base.models import CHAIN_LINKS, Event, Status
from pocketmem.base.results import AddResult
from pocketmem.core.formatting import ELLIPSIS, cut
from pocketmem.core.instants import whole_day
from pocketmem.core.privacy import KIND_LABELS, named
from pocketmem.core.shown_time import absolute, as_instant, day, relative
from pocketmem.service.manage.browse import MemoryDetail
from pocketmem.service.transfer.import_checks import Refused
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
        return sentence(self.t, key, **parts)

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


def sentence(t: Translate, key: str, **parts: Markup | str) -> Markup:
    """The page's sentence for `key` with `parts` in its places: markup kept as it is, text escaped."""
    text = Markup.escape(t(key, **{name: f"\0{name}\0" for name in parts}))
    for name, part in parts.items():
        text = text.replace(f"\0{name}\0", part)  # Markup.replace escapes a str part
    return text


AS_WRITTEN = ("found", "expected", "user")  # facts that are the person's or a file's own values (user ids...)
GROUPED = ("length", "limit")  # counts shown with thousands separators


def _facts(facts: dict[str, Any], t: Translate, locale: str, zone: tzinfo) -> dict[str, Markup | str]:
    """An error's facts in the page's words: times as absolute times in the user's zone, categories and kinds of
    secret by the page's names, counts grouped, a user's or a file's own values marked as such."""
    said: dict[str, Markup | str] = {}
    for key, value in facts.items():
        if isinstance(value, datetime):
            said[key] = absolute(value, zone)
        elif key in ("category", "status"):
            said[key] = t(f"{key}.{value}")
        elif key == "kinds":
            said[key] = secret_kinds(value, locale)
        elif key == "choices":
            said[key] = alternatives(value, t)
        elif key in AS_WRITTEN:
            said[key] = Markup("<code data-user>{}</code>").format(value)
        else:
            said[key] = f"{value:,}" if key in GROUPED and isinstance(value, int) else str(value)
    return said


def alternatives(values: list[str], t: Translate) -> Markup:
    """The values a field takes, each as written, joined in the page's language: `a, b or c` / `a、b 或 c`."""
    shown = [Markup("<code data-user>{}</code>").format(value) for value in values]
    head = Markup.escape(t("list.and")).join(shown[:-1])
    return head + Markup.escape(t("list.or")) + shown[-1] if head else Markup("").join(shown)


def _at(line: int | None, t: Translate) -> Markup:
    """Where in an imported file, before what is wrong there: `line 4: ` / `第 4 行：`."""
    return Markup("") if line is None else sentence(t, "error.line", line=str(line))


def _invalid(reason: InvalidReason | None, field: str, facts: dict[str, Any], line: int | None,
             t: Translate, locale: str, zone: tzinfo) -> Markup:
    """A refused value in the page's words: the rule with its facts when the service names it, else (Chinese only)
    the field and the kind of error."""
    shown = field_label(field, t, locale, as_written=line is not None)
    if reason is not None:
        return _at(line, t) + sentence(t, f"error.invalid.{reason.value}", field=shown,
                                       **_facts(facts, t, locale, zone))
    return _at(line, t) + sentence(t, "error.invalid", field=shown, rule=t("error.rule"))


def error_text(exc: PocketmemError, t: Translate, locale: str, zone: tzinfo) -> Markup:
    """The error kinds the page shows, in the page's language: a conflict or a refused value whose reason the service
    names, in the page's own words from the error's facts (either language); a thing not found in the page's words
    (the service's would send a person to an agent's tools); otherwise English keeps the service's own words."""
    if isinstance(exc, Conflict) and exc.reason is not None:
        return sentence(t, f"error.conflict.{exc.reason.value}", **_facts(exc.facts, t, locale, zone))
    if isinstance(exc, NotFound):
        return sentence(t, "error.not_found")
    if isinstance(exc, InvalidInput) and exc.reason is not None:
        return _invalid(exc.reason, exc.field, exc.facts, exc.line, t, locale, zone)
    if locale == "en":
        return Markup.escape(str(exc))
    if isinstance(exc, FormTooLarge):
        return sentence(t, "error.too_large", limit=f"{exc.limit:,}")
    if isinstance(exc, InvalidInput):
        return _invalid(None, exc.field, {}, exc.line, t, locale, zone)
    if isinstance(exc, Conflict):
        return sentence(t, "error.conflict")
    return sentence(t, "error.internal")


def refused_text(item: Refused, t: Translate, locale: str, zone: tzinfo) -> Markup:
    """Why an imported line was left out: as `pocketmem import` says it in English, in the page's words in Chinese."""
    if item.reason is None and locale == "en":
        return _at(item.line, t) + Markup.escape(f"{item.field}: {item.why}")
    return _invalid(item.reason, item.field, item.facts, item.line, t, locale, zone)


def discarded(result: AddResult, t: Translate, locale: str) -> str:
    """Why an edit was not stored (add_memory's reason): a secret (which kinds), temporary mode, an earlier
    rejection."""
    return t(f"edit.discarded.{result.reason or 'low_confidence'}", kinds=secret_kinds(result.redacted, locale))


def secret_kinds(kinds: list[str], locale: str) -> str:
    """Kinds of secret (core/privacy.py) by their names in the page's language: 密码、API 密钥 / a password, an API
    key."""
    return "、".join(KIND_LABELS[k][0] for k in kinds) if locale == "zh" else named(kinds)


def field_label(field: str, t: Translate, locale: str, *, as_written: bool = False) -> Markup | str:
    """How the page names a field an error names. In English, as the service names it (scores.info); in Chinese by
    the page's word for it (scores.info -> 信息 I), never the raw English name, except a field of an imported file
    (`as_written`), which is shown as the file has it, so it can be found there."""
    if locale == "en":
        return field
    if as_written:  # a line the file cannot give at all has no field of its own
        return Markup("<code data-user>{}</code>").format(field) if field not in ("", "line") else t("field.line")
    name = field.rsplit(".", 1)[-1]
    for key in (f"field.{name}", f"profile.{field}", name):
        if key in MESSAGES:
            return t(key)
    return t("field.unknown")
