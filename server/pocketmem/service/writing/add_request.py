"""What add_memory accepts, and the checks every write path runs on it before touching the store.

`clean_request` trims and bounds the text, checks scores and dates; `screen_secrets` redacts or refuses
secrets; `note_redactions` tells the caller what was removed. All pure apart from the settings and the
current time they are given.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from pocketmem.base.config import Settings
from pocketmem.base.errors import InvalidInput, InvalidReason
from pocketmem.base.models import REMINDER_RULE, Category, unreminded_field
from pocketmem.base.results import AddResult
from pocketmem.core import instants, privacy
from pocketmem.core.instants import Due
from pocketmem.core.scoring import CORE_PERSISTENCE, lifetime_end, may_be_core
from pocketmem.core.text import clean_text

MAX_KEYWORDS = 12
MAX_KEYWORD_CHARS = 40
MAX_SOURCE_CHARS = 500
CORE_RULE = (
    "1 makes a memory core, and a {category} is short-lived, never core (a todo, episode or context); give it less "
    "than 1, or store what lasts (an allergy, a name) as a fact or preference with persistence 1"
)
MAX_OPERATION_ID_CHARS = 200

DATE_FIELDS = ("created_at", "valid_from", "due_at", "remind_at", "expires_at")


class AddRequest(BaseModel):
    """Everything add_memory accepts, already type-checked by the MCP layer or the CLI."""

    content: str
    category: Category = Category.fact
    keywords: list[str] = Field(default_factory=list)
    scores: dict[str, float | None] | None = None
    confidence: float = 1.0
    supersedes: str | None = None
    created_at: datetime | None = None
    valid_from: datetime | None = None
    due_at: Due | None = None
    remind_at: datetime | None = None
    expires_at: datetime | None = None
    source: str | None = None
    source_ref: str | None = None
    operation_id: str | None = None
    completed_at: datetime | None = Field(
        None, description="a todo stored as done: a new version of a completed todo (curation.revise); the tools "
        "never send it (mark_memory completes a todo)",
    )


def instant(settings: Settings, field: str, value: datetime | None) -> datetime | None:
    """An aware UTC instant within the supported years (checked in UTC); no offset means the user's zone."""
    return None if value is None else instants.accept(field, value, settings.zone)


def clean_request(req: AddRequest, settings: Settings, now: datetime) -> AddRequest:
    """The request with its text trimmed and bounded, keywords deduplicated, dates as UTC instants.

    Raises InvalidInput for anything add_memory refuses (too long, bad scores, a date in the future...).
    """
    content = clean_text(req.content, "content", max_chars=settings.max_content_chars)
    if len(req.keywords) > MAX_KEYWORDS:
        raise InvalidInput("keywords", f"at most {MAX_KEYWORDS} short terms, got {len(req.keywords)}")
    keywords: list[str] = []
    for i, keyword in enumerate(req.keywords):
        cleaned = clean_text(keyword, f"keywords[{i}]", max_chars=MAX_KEYWORD_CHARS)
        if cleaned not in keywords:
            keywords.append(cleaned)
    side = {
        name: privacy.kept_text(getattr(req, name), name, max_chars=limit)
        for name, limit in (("source", MAX_SOURCE_CHARS), ("source_ref", MAX_SOURCE_CHARS),
                            ("operation_id", MAX_OPERATION_ID_CHARS))
        if getattr(req, name) is not None
    }
    if not 0.0 <= req.confidence <= 1.0:
        raise InvalidInput("confidence", "must be between 0 and 1", InvalidReason.between, low=0, high=1)
    for key, value in (req.scores or {}).items():
        if key not in ("emotion", "info", "persistence", "judge"):
            raise InvalidInput(f"scores.{key}", "unknown score; use emotion, info, persistence, judge")
        if value is not None and not 0.0 <= value <= 1.0:
            raise InvalidInput(f"scores.{key}", "must be between 0 and 1", InvalidReason.between, low=0, high=1)
    persistence = (req.scores or {}).get("persistence")
    if persistence is not None and persistence >= CORE_PERSISTENCE and not may_be_core(req.category):
        raise InvalidInput("scores.persistence", CORE_RULE.format(category=req.category.value))
    dates = {name: instant(settings, name, getattr(req, name)) for name in DATE_FIELDS}
    req = req.model_copy(update=dates)
    if req.created_at is not None and req.created_at > now + timedelta(days=1):
        raise InvalidInput("created_at", "is in the future; leave it out to use the current time")
    if req.valid_from is not None and req.valid_from > now + timedelta(days=1):
        raise InvalidInput(
            "valid_from", "is in the future; a fact is stored once it holds (a plan is a todo with due_at)"
        )
    if (field := unreminded_field(req.category, req.due_at, req.remind_at)) is not None:
        raise InvalidInput(field, REMINDER_RULE.format(field=field))
    _refuse_expired(req, settings, now)
    req = _reminded_all_day(req, settings)
    if req.remind_at is not None and req.due_at is not None and req.remind_at > req.due_at:
        raise InvalidInput("remind_at", "must not be after due_at")
    return req.model_copy(update={"content": content, "keywords": keywords, **side})


def _reminded_all_day(req: AddRequest, settings: Settings) -> AddRequest:
    """A todo due on a date alone (core/instants.whole_day) is due all that day: without a remind_at of its own,
    it is reminded from the day's start."""
    due, zone = req.due_at, settings.zone
    if req.category != Category.todo or req.remind_at is not None or due is None or not instants.whole_day(due, zone):
        return req
    return req.model_copy(update={"remind_at": instants.day_start(due, zone)})


def _refuse_expired(req: AddRequest, settings: Settings, now: datetime) -> None:
    """A memory that would have expired already is refused: stored, it would be listed but never recalled. That is
    an expires_at at or before now, or an episode (without one of its own) dated more than POCKETMEM_EPISODE_DAYS
    ago. (A later expires_at is the caller's own: maintenance moves the memory to the trash when it passes.)"""
    if req.expires_at is not None and req.expires_at <= now:
        raise InvalidInput(
            "expires_at", "is not in the future, so the memory would have expired already and never be recalled; "
            "leave it out to keep the memory, or give a later time"
        )
    if expired_episode(req, settings, now) is not None:
        raise InvalidInput(
            "created_at",
            f"an episode older than {settings.episode_days} days (POCKETMEM_EPISODE_DAYS) has already expired; "
            "store it as another category, or leave created_at out",
        )


def expired_episode(req: AddRequest, settings: Settings, now: datetime) -> datetime | None:
    """When the episode the request holds expired, if it already has (an episode without an expires_at of its own
    lasts POCKETMEM_EPISODE_DAYS from when it was said)."""
    if req.expires_at is None and req.created_at is not None:
        end = lifetime_end(req.category, req.created_at, settings.episode_days)
        if end is not None and end <= now:
            return end
    return None


def request_hash(req: AddRequest) -> str:
    """What an operation_id is bound to: the request without its operation_id (and without a completed_at it does
    not carry, so the hashes of requests recorded before that field existed still match)."""
    unsent = {"operation_id"} | ({"completed_at"} if req.completed_at is None else set())
    body = req.model_dump(mode="json", exclude=unsent)
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


def screen_secrets(req: AddRequest, settings: Settings) -> tuple[AddRequest, list[str], bool]:
    """(request with secrets redacted, kinds found, refused?) — every write path passes through here."""
    screened = privacy.screen_memory(req.content, req.keywords)
    if not screened.kinds:
        return req, [], False
    if settings.secrets == "refuse" or not privacy.meaningful(screened.content):
        return req, screened.kinds, True
    cleaned = req.model_copy(update={"content": screened.content, "keywords": screened.keywords})
    return cleaned, screened.kinds, False


def note_redactions(result: AddResult, kinds: list[str]) -> AddResult:
    """The result, telling the caller which kinds of secrets were removed before storing."""
    if not kinds:
        return result
    return result.model_copy(
        update={
            "redacted": kinds, "message": f"{result.message} Removed before storing: {privacy.describe(kinds)}."
        }
    )
