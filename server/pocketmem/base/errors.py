"""Errors raised inside pocketmem.

Each edge translates them once: the MCP tools into a tool error the model can act on,
the CLI into a one-line message and a non-zero exit.

    PocketmemError
    ├── InvalidInput          bad argument: names the field, the rule and what to send instead
    ├── NotFound              no such memory / pending item for this user
    ├── Conflict              the request contradicts the memory's state (patching a non-core memory, …)
    ├── ConfigError           a setting is missing or malformed (start-up)
    ├── EmbedderMismatch      the store's vectors were made by another embedder; run `pocketmem reindex`
    ├── ProviderUnavailable   an embedding / LLM endpoint cannot be reached or answered badly
    ├── FileNotWritten        a file pocketmem writes (an export) could not be written; the old one is kept
    └── StoreError            the database cannot be opened or is not a pocketmem store
        ├── UnreadableRow     one stored row cannot be read back (names table, user, id, why)
        └── StoreUnavailable  the store failed while checking who a request is (down, unreadable): refused
                              as "try again", never as a wrong token (HTTP 503)
"""

from __future__ import annotations

from enum import StrEnum


class PocketmemError(Exception):
    """Base class of every error pocketmem raises on purpose."""


class InvalidInput(PocketmemError):
    """An argument breaks a rule; the message names the field and the rule."""

    def __init__(self, field: str, rule: str) -> None:
        self.field = field
        self.rule = rule
        super().__init__(f"{field}: {rule}")


class NotFound(PocketmemError):
    """The id names nothing this user can see."""


class ConflictReason(StrEnum):
    """The cases of Conflict an edge says in its own words (the page, in either language) from the error's facts."""

    pending_confirmed = "pending_confirmed"  # facts: pending_id
    pending_rejected = "pending_rejected"  # facts: pending_id
    episode_expired = "episode_expired"  # facts: pending_id, said, expired (datetimes), days


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
