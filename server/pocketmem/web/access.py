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
                             request, so revoking the token ends its sessions at once. The signature also
                             covers the token's sign-out mark (store_meta, re-read on every request):
                             signing out changes it, which ends every page session of that token on the
                             server, wherever a copy of the cookie went (another service on 127.0.0.1
                             receives it: cookies are not kept apart by port). The cookie is Secure over
                             https and for a host name given with --allowed-host (reached over https)
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
import ipaddress
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from pocketmem.base.clock import Clock
from pocketmem.mcp.http import ServedNames, authority, is_loopback
from pocketmem.service.manage.tokens import Anonymous, TokenService, access_check

COOKIE = "pocketmem_ui"
SESSION_DAYS = 7
# The key that signs session cookies and CSRF tokens, kept in the store so every worker and restart agrees;
# made on first use and only inserted, never overwritten (store.claim_meta), so racing first sign-ins share it.
SECRET_META = "ui_session_secret"
# + a token's id: a random mark the token's sessions are signed with; signing out sets a new one, so every session
# signed before it ends (on every worker, after a restart)
SIGNED_OUT_META = "ui_signed_out:"


def https_names(allowed_hosts: Sequence[str]) -> frozenset[str]:
    """The --allowed-host names reached only over https (a public name behind a reverse proxy, docs/http-and-tokens.md):
    every host name but the loopback ones; an IP address may be reached over plain http on a local network."""

    def is_address(name: str) -> bool:
        try:
            ipaddress.ip_address(name.strip("[]"))
        except ValueError:
            return False
        return True

    names = (name.strip().lower() for name in allowed_hosts)
    return frozenset(name for name in names if name and not is_loopback(name) and not is_address(name))


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
    https_only: frozenset[str] = frozenset()  # host names reached over https only (https_names)
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
        session = f"{body}.{await self._sign_session(body, record.id)}"
        return Visitor(record.user_id, await self._sign(f"csrf:{session}"), record.id, session)

    async def sign_out(self, session: str | None) -> None:
        """End the session on the server, with every other page session of its token: a copy of the cookie is
        refused from now on. A cookie that is no live session changes nothing."""
        token_id = await self._session_token(session) if session else None
        if token_id is not None:
            async with access_check("ending the session"):
                await self.tokens.store.set_meta(SIGNED_OUT_META + token_id, secrets.token_hex(16))

    def cookie_secure(self, scheme: str, host: str | None) -> bool:
        """Whether the session cookie is sent over https only: when the request came over https (behind a proxy, by
        its X-Forwarded-Proto, which uvicorn honours from loopback), and always for a host name reached over https
        only, even through a proxy that does not say so. Plain http on 127.0.0.1 keeps working."""
        named = authority(host or "")
        return scheme == "https" or (named is not None and named[0] in self.https_only)

    async def _session_token(self, session: str) -> str | None:
        """The token id a session cookie names, if it has not expired and its signature holds (the token not
        signed out since)."""
        parts = session.split(".")
        if len(parts) != 3 or not parts[1].isdigit() or len(session) > 200:
            return None
        if int(parts[1]) <= self.clock.now().timestamp():
            return None
        signed = await self._sign_session(f"{parts[0]}.{parts[1]}", parts[0])
        return parts[0] if hmac.compare_digest(parts[2].encode(), signed.encode()) else None

    async def _sign_session(self, body: str, token_id: str) -> str:
        async with access_check("reading the session's sign-out mark"):
            mark = await self.tokens.store.get_meta(SIGNED_OUT_META + token_id) or ""
        return await self._sign(f"{body}.{mark}")

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
