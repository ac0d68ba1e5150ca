"""Errors raised inside pocketmem.

Each edge translates them once: the MCP tools into a tool error the model can act on,
the CLI into a one-line message and a non-zero exit.

    PocketmemError
    ├── InvalidInput          bad argument: names the field, the rule and what to send instead (InvalidReason:
    │                         the rule, with its facts, for an edge that says it in other words)
    ├── NotFound              no such memory / pending item for this user
    ├── Conflict              the request contradicts the memory's state (patching a non-core memory, …)
    ├── ConfigError           a setting is missing or malformed (start-up)
    ├── EmbedderMismatch      the store's vectors were made by another embedder; run `pocketmem reindex`
    ├── ProviderUnavailable   an embedding / LLM endpoint cannot be reached or answered badly
    ├── FileNotWritten        a file pocketmem writes (an export) could not be written; the old one is kept
    └── StoreError            the database cannot be opened or is not a pocketmem store
        ├── NewerStore        the store records a migration this release does not know: upgrade pocketmem
        ├── UnreadableRow     one stored row cannot be read back (names table, user, id, why)
        └── StoreUnavailable  the store failed while checking who a request is (down, unreadable): refused
                              as "try again", never as a wrong token (HTTP 503)
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import ValidationError


class PocketmemError(Exception):
    """Base class of every error pocketmem raises on purpose."""


class InvalidReason(StrEnum):
    """The rules an InvalidInput may name, so an edge can say the refusal in other words (the page, in Chinese) with
    the same facts; the message says it in English for the tools and the CLI."""

    too_long = "too_long"  # facts: length, limit (characters)
    empty = "empty"  # nothing visible: empty, whitespace, or only invisible characters
    between = "between"  # facts: low, high
    at_least = "at_least"  # facts: limit
    at_most = "at_most"  # facts: limit
    missing = "missing"  # a required field left out
    one_of = "one_of"  # facts: choices (the values, a list)
    number = "number"  # not a number
    date = "date"  # not a date or time
    years = "years"  # facts: low, high (the years a store keeps, in UTC)
    other_user = "other_user"  # facts: found, expected (user ids: a file holding another user's rows)
    secret = "secret"  # facts: kinds (core/privacy.py KIND_LABELS)
    not_text = "not_text"  # bytes that are not UTF-8 text (a posted form's field)
    foreign_id = "foreign_id"  # facts: user (an imported memory's id is another user's memory's in the store)


class InvalidInput(PocketmemError):
    """An argument breaks a rule; the message names the field and the rule (and the line of a file, for an import).
    With a `reason`, `facts` carry the values the rule names."""

    def __init__(
        self, field: str, rule: str, reason: InvalidReason | None = None, *, line: int | None = None,
        **facts: object,
    ) -> None:
        self.field = field
        self.rule = rule
        self.reason = reason
        self.line = line
        self.facts = facts
        where = ": ".join(part for part in (f"line {line}" if line is not None else "", field) if part)
        super().__init__(f"{where}: {rule}")


class NotFound(PocketmemError):
    """The id names nothing this user can see."""


class ConflictReason(StrEnum):
    """The cases of Conflict an edge says in its own words (the page, in either language) from the error's facts."""

    pending_confirmed = "pending_confirmed"  # facts: pending_id
    pending_rejected = "pending_rejected"  # facts: pending_id
    episode_expired = "episode_expired"  # facts: pending_id, said, expired (datetimes), days
    never_core = "never_core"  # facts: category (a todo, episode or context: short-lived, never core)
    not_active = "not_active"  # facts: status (superseded or trashed: only an active memory is changed)
    core_patched = "core_patched"  # a core memory is changed by a patch, never superseded
    not_core = "not_core"  # only a core memory is patched; another is superseded by a new version


class Conflict(PocketmemError):
    """The request does not fit the current state of the memory. The message says why in English, for the tools and
    the CLI; with a `reason`, `facts` carry the values it names, so an edge can say the same in other words."""

    def __init__(self, message: str, reason: ConflictReason | None = None, **facts: object) -> None:
        super().__init__(message)
        self.reason = reason
        self.facts = facts


class ConfigError(PocketmemError):
    """A setting is missing or malformed."""


class EmbedderMismatch(PocketmemError):
    """The store was embedded by a different model than the one configured."""


class ProviderUnavailable(PocketmemError):
    """A remote embedding or LLM endpoint failed."""


class FileNotWritten(PocketmemError):
    """A file pocketmem writes beside the store (an export) could not be written; whatever was there is kept."""


class StoreError(PocketmemError):
    """The database cannot be used."""


class NewerStore(StoreError):
    """The store records a migration this release does not know: a newer pocketmem opened it, and this one would
    misread what it changed. Nothing is changed; the remedy is to upgrade."""

    def __init__(self, migrations: list[str]) -> None:
        self.migrations = migrations
        super().__init__(
            f"this store was last opened by a newer pocketmem (migration {', '.join(migrations)}); upgrade pocketmem "
            "to use it"
        )


class UnreadableRow(StoreError):
    """A stored row cannot be decoded; work on other rows and users goes on, and the row is reported."""

    def __init__(self, table: str, user_id: str, row_id: str, why: str) -> None:
        self.table = table
        self.user_id = user_id
        self.row_id = row_id
        self.why = why
        super().__init__(
            f"{table} row {row_id} of user {user_id!r} cannot be read ({why}); run `pocketmem doctor --repair`"
        )

    def as_report(self) -> dict[str, str]:
        return {"table": self.table, "user_id": self.user_id, "id": self.row_id, "why": self.why}


class StoreUnavailable(StoreError):
    """The store could not answer a check of who a request is (a token, a session, the auth state): the request is
    refused, but as "try again later", never as if the token were wrong."""


# pydantic's error types, as the rule they break (the first error of a ValidationError is the one reported)
_PYDANTIC: dict[str, tuple[InvalidReason, str | None]] = {
    "missing": (InvalidReason.missing, None),
    "literal_error": (InvalidReason.one_of, "expected"),
    "enum": (InvalidReason.one_of, "expected"),
    "less_than_equal": (InvalidReason.at_most, "le"),
    "greater_than_equal": (InvalidReason.at_least, "ge"),
    "int_parsing": (InvalidReason.number, None),
    "float_parsing": (InvalidReason.number, None),
    "date_parsing": (InvalidReason.date, None),
    "date_from_datetime_parsing": (InvalidReason.date, None),
    "datetime_parsing": (InvalidReason.date, None),
    "datetime_from_date_parsing": (InvalidReason.date, None),
}


_QUOTED = re.compile(r"'([^']*)'")


def choices_of(expected: object) -> list[str]:
    """The values pydantic's `expected` of an enum or literal error lists (`'a', 'b' or 'c'`)."""
    return _QUOTED.findall(str(expected))


def invalid_from(exc: ValidationError, under: str | None = None, *, line: int | None = None) -> InvalidInput:
    """The first error of a pydantic ValidationError as InvalidInput: its place (below `under`; "form" when it has
    none), pydantic's own words, and the rule they break when it is one of InvalidReason's."""
    first = exc.errors()[0]
    field = ".".join(str(p) for p in [under, *first["loc"]] if p not in (None, "")) or "form"
    reason, fact = _PYDANTIC.get(first["type"], (None, None))
    facts: dict[str, object] = {}
    if reason is not None and fact is not None:
        value = (first.get("ctx") or {}).get(fact)
        facts = {"choices": choices_of(value)} if reason == InvalidReason.one_of else {"limit": value}
    return InvalidInput(field, first["msg"], reason, line=line, **facts)
