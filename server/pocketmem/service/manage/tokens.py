"""Bearer tokens for the network transports: create, list, revoke, verify.

A token reads `pm_<id>_<secret>`: the id (12 hex characters) is public — `pocketmem token list`
shows it and `revoke` takes it — and finds the stored record; the secret (256 random bits) is
never stored. The store keeps sha256(token), compared in constant time. Each token belongs to
one user; a request carrying it acts as that user and sees nothing of anyone else's.

A check of who a request is (`verify`, `active`, `serves_anonymous`) that cannot read the store raises
StoreUnavailable: the request is refused (fail closed), but as "the store is unreachable, try again", never as
a wrong or revoked token, which would send a host into re-authentication.

Verification does the same work for every token it is shown, well-formed or not, known or not: one
record lookup and one hash comparison, so its time tells nothing about which token ids exist.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from pocketmem.base.clock import Clock
from pocketmem.base.config import USER_ID_PATTERN
from pocketmem.base.errors import InvalidInput, NotFound, PocketmemError, StoreError, StoreUnavailable
from pocketmem.base.models import ApiToken, EventKind
from pocketmem.core.text import clean_text
from pocketmem.store.base import MetaStore

log = logging.getLogger(__name__)

TOKEN_PREFIX = "pm_"
ID_HEX_CHARS = 12
SECRET_BYTES = 32
MAX_TOKEN_CHARS = 200
MAX_NAME_CHARS = 100
# Every verified request carries this scope, and the network transports require it.
SCOPE = "memory"
# last_used_at is informational: writing it at most once a minute keeps verification a pure read.
TOUCH_INTERVAL = timedelta(minutes=1)

# Looked up in place of the id of a malformed token: no record has it (ids are 12 hex characters).
_NO_SUCH_ID = "-"
_NO_SUCH_HASH = "0" * 64
_TOKEN_SHAPE = re.compile(rf"^{TOKEN_PREFIX}([0-9a-f]{{{ID_HEX_CHARS}}})_[A-Za-z0-9_-]{{20,}}$")
_USER_ID = re.compile(USER_ID_PATTERN)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()  # any text a client sends


def token_id_of(token: str) -> str | None:
    """The id inside a well-formed token, else None."""
    if len(token) > MAX_TOKEN_CHARS:
        return None
    match = _TOKEN_SHAPE.match(token)
    return match.group(1) if match else None


def check_user_id(user_id: str) -> str:
    if not _USER_ID.match(user_id):
        raise InvalidInput("user", "1-64 characters from letters, digits and _ . @ : - (e.g. alice or team:bob)")
    return user_id


@dataclass(frozen=True)
class NewToken:
    token: str  # shown once, never stored
    record: ApiToken


ANONYMOUS_KEY = "auth.anonymous"  # store_meta: "open" (operator allowed it) or "closed" (a token was created)


# What a request refused because the store failed is told (HTTP 503), and how long it waits before trying again.
STORE_DOWN = (
    "the memory store cannot be reached or read right now, so the token could not be checked (this says "
    "nothing against the token); try again shortly"
)
RETRY_AFTER_SECONDS = 10


@asynccontextmanager
async def access_check(what: str) -> AsyncIterator[None]:
    """Around a read that decides who a request is: a store failure becomes StoreUnavailable (logged with its cause)."""
    try:
        yield
    except StoreUnavailable:
        raise
    except Exception as exc:
        # One line for the expected (the store's own error says why); the traceback for anything else.
        log.warning("%s failed, the store is unavailable: %s", what, exc, exc_info=not isinstance(exc, StoreError))
        raise StoreUnavailable(STORE_DOWN) from exc


class Anonymous(StrEnum):
    """The server's policy for a request without a token (mcp/http.py access_policy decides it at start)."""

    never = "never"
    until_first_token = "until_first_token"  # --auth auto on loopback: the stored state decides, per request
    always = "always"


class TokenService:
    def __init__(self, store: MetaStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    async def create(self, user_id: str, name: str | None = None) -> NewToken:
        check_user_id(user_id)
        label = clean_text(name, "name", max_chars=MAX_NAME_CHARS) if name is not None else None
        token_id = secrets.token_hex(ID_HEX_CHARS // 2)
        token = f"{TOKEN_PREFIX}{token_id}_{secrets.token_urlsafe(SECRET_BYTES)}"
        now = self.clock.now()
        record = ApiToken(id=token_id, user_id=user_id, name=label, token_hash=hash_token(token), created_at=now)
        async with self.store.write(user_id=user_id) as tx:
            await tx.ensure_user(user_id, now)
            await tx.insert_token(record)
            await tx.put_meta(ANONYMOUS_KEY, "closed")
            await tx.add_event(user_id, EventKind.token_created, now, payload={"token_id": token_id, "name": label})
        return NewToken(token=token, record=record)

    async def list(self, user_id: str | None = None, *, include_revoked: bool = False) -> list[ApiToken]:
        async with self.store.read() as reader:
            return await reader.list_tokens(user_id, include_revoked=include_revoked)

    async def count_active(self) -> int:
        async with self.store.read() as reader:
            return await reader.count_active_tokens()

    async def anonymous_allowed(self) -> bool:
        """May a loopback request without a token act as POCKETMEM_USER (--auth auto)?

        Only while no token has ever existed, or after the operator ran `pocketmem token allow-anonymous`
        with no active token left. Revoking the last token does not reopen the server.
        """
        async with self.store.read() as reader:
            if await reader.count_active_tokens():
                return False
            state = await reader.meta(ANONYMOUS_KEY)
            if not state:  # stores from before the setting: closed once any token exists
                return not await reader.list_tokens(None, include_revoked=True)
            return state == "open"

    async def serves_anonymous(self, policy: Anonymous) -> bool:
        """The one auth state of every surface (/mcp, the page, `pocketmem ui`): may this request without a
        token act as POCKETMEM_USER now? Read from the store on every call; StoreUnavailable when it cannot be read."""
        if policy is not Anonymous.until_first_token:
            return policy is Anonymous.always
        async with access_check("reading the auth state"):
            return await self.anonymous_allowed()

    async def allow_anonymous(self) -> int:
        """The operator's choice: loopback requests without a token are served again once no token is active.
        Returns the number of tokens still active (those keep the server closed until revoked)."""
        async with self.store.write() as tx:
            await tx.put_meta(ANONYMOUS_KEY, "open")
            return await tx.count_active_tokens()

    async def revoke(self, token_id: str) -> ApiToken:
        """Revoke at once: the next request carrying the token gets 401. Revoking twice is harmless."""
        now = self.clock.now()
        async with self.store.write() as tx:
            record = await tx.get_token(token_id)
            if record is None:
                raise NotFound(f"no token with id {token_id!r}; `pocketmem token list` shows the ids")
            if await tx.revoke_token(token_id, now):
                await tx.add_event(record.user_id, EventKind.token_revoked, now, payload={"token_id": token_id})
            updated = await tx.get_token(token_id)
        assert updated is not None
        return updated

    async def inactive(self, token_ids: set[str]) -> set[str]:
        """The ids among `token_ids` that no longer open anything (revoked, or unknown), read together."""
        async with self.store.read() as reader:
            records = {token_id: await reader.get_token(token_id) for token_id in token_ids}
        return {token_id for token_id, record in records.items() if record is None or not record.active}

    async def active(self, token_id: str) -> ApiToken | None:
        """The token's record while it is active (a signed-in page's session re-reads it on every request)."""
        async with access_check("token check"), self.store.read() as reader:
            record = await reader.get_token(token_id)
        return record if record is not None and record.active else None

    async def verify(self, token: str) -> ApiToken | None:
        """The active record the token belongs to, or None. Never raises for a bad token; StoreUnavailable when the
        store cannot be read."""
        token_id = token_id_of(token)
        async with access_check("token check"), self.store.read() as reader:
            record = await reader.get_token(token_id or _NO_SUCH_ID)
        expected = record.token_hash if record is not None else _NO_SUCH_HASH
        matches = hmac.compare_digest(expected, hash_token(token[:MAX_TOKEN_CHARS]))
        if token_id is None or record is None or not record.active or not matches:
            return None
        now = self.clock.now()
        if record.last_used_at is None or now - record.last_used_at >= TOUCH_INTERVAL:
            try:
                async with self.store.write() as tx:
                    await tx.touch_token(record.id, now)
            except PocketmemError:  # bookkeeping only: a busy store must not refuse a valid token
                log.debug("could not record the use of token %s", record.id, exc_info=True)
        return record
