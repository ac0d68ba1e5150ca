"""Who is looking at the management page, and whether a change may go through.

The rules of the HTTP transport (mcp/http.py), applied to a browser:

    anonymous (no sign-in)   only on a loopback host, and only while the policy allows it: the same
                             stored auth state as /mcp (TokenService.serves_anonymous, re-read on every
                             request): with --auth auto until the first token is created, and again only
                             once the operator runs `pocketmem token allow-anonymous` (revoking every token
                             does not reopen it); with --auth none always; the visitor acts as POCKETMEM_USER
    signed in                a bearer token typed into the sign-in form; the page then acts as the
                             token's user and sees nothing of anyone else's. The token itself is not
                             kept: an HttpOnly, SameSite=Strict cookie holds the token's public id and
                             an expiry, signed (HMAC-SHA256) with a key kept in the store, so every
                             worker and restart accepts it; the token's record is re-read on every
                             request, so revoking the token ends its sessions at once
    every change (POST)      carries the session's CSRF token (an HMAC of the session cookie; a form
                             field or X-CSRF-Token header)
    every request            its Host header must be one the server answers to (DNS rebinding), and an
                             Origin header, when sent, must name this server on the port the request was
                             sent to: mcp/http.py's HeaderGuard around the whole page, as around /mcp
    the store fails          when the check cannot be made (the database is down, the file unreadable), the
                             page says so with 503 in its language, never the sign-in form or "token revoked"
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from datetime import timedelta

from pocketmem.base.clock import Clock
from pocketmem.mcp.http import ServedNames
from pocketmem.service.manage.tokens import Anonymous, TokenService, access_check

COOKIE = "pocketmem_ui"
SESSION_DAYS = 7
# The key that signs session cookies and CSRF tokens, kept in the store so every worker and restart agrees;
# made on first use and only inserted, never overwritten (store.claim_meta), so racing first sign-ins share it.
SECRET_META = "ui_session_secret"


@dataclass(frozen=True)
class Visitor:
    user_id: str
    csrf: str
    token_id: str | None = None  # None: the anonymous loopback visitor
    session_id: str | None = None

    @property
    def signed_in(self) -> bool:
        return self.token_id is not None


@dataclass
class WebAccess:
    tokens: TokenService
    clock: Clock
    anonymous: Anonymous
    local_user: str
    served: ServedNames  # the host names the server answers to, and the strict Host / Origin checks
    _key: bytes | None = field(default=None, repr=False)

    async def visitor(self, session: str | None) -> Visitor | None:
        """Who sends this request: the signed-in session, else the anonymous visitor where allowed. StoreUnavailable
        when the store cannot say (the page then answers 503, not the sign-in form)."""
        if session:
            token_id = await self._session_token(session)
            if token_id is not None:
                record = await self.tokens.active(token_id)
                if record is not None:
                    return Visitor(record.user_id, await self._sign(f"csrf:{session}"), record.id, session)
        if await self.tokens.serves_anonymous(self.anonymous):
            return Visitor(self.local_user, await self._sign("csrf:anonymous"))
        return None

    async def sign_in(self, token: str) -> Visitor | None:
        record = await self.tokens.verify(token.strip())
        if record is None:
            return None
        expires = int((self.clock.now() + timedelta(days=SESSION_DAYS)).timestamp())
        body = f"{record.id}.{expires}"
        session = f"{body}.{await self._sign(body)}"
        return Visitor(record.user_id, await self._sign(f"csrf:{session}"), record.id, session)

    async def _session_token(self, session: str) -> str | None:
        """The token id a session cookie names, if its signature holds and it has not expired."""
        parts = session.split(".")
        if len(parts) != 3 or not parts[1].isdigit() or len(session) > 200:
            return None
        body = f"{parts[0]}.{parts[1]}"
        if not hmac.compare_digest(parts[2].encode(), (await self._sign(body)).encode()):
            return None
        if int(parts[1]) <= self.clock.now().timestamp():
            return None
        return parts[0]

    async def _sign(self, text: str) -> str:
        if self._key is None:
            store = self.tokens.store
            async with access_check("reading the session key"):
                value = await store.get_meta(SECRET_META) or await store.claim_meta(SECRET_META, secrets.token_hex(32))
            self._key = bytes.fromhex(value)
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()

    @staticmethod
    def csrf_ok(visitor: Visitor, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(visitor.csrf.encode(), (sent or "").encode())
