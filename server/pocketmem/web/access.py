"""Who is looking at the management page, and whether a change may go through.

The rules of the HTTP transport (mcp/http.py), applied to a browser:

    anonymous (no sign-in)   only on a loopback host, and only while the policy allows it: with
                             --auth auto until the first token exists (re-checked on every request),
                             with --auth none always; the visitor acts as POCKETMEM_USER
    signed in                a bearer token typed into the sign-in form; the page then acts as the
                             token's user and sees nothing of anyone else's. The token itself is not
                             kept: a random session id in an HttpOnly, SameSite=Strict cookie maps to
                             the token's id, whose record is re-read on every request, so revoking
                             the token ends its sessions at once
    every change (POST)      carries the session's CSRF token (a form field or X-CSRF-Token header),
                             and an Origin header, when sent, must name this server
    every request            its Host header must be one the server answers to (DNS rebinding)
"""

from __future__ import annotations

import hmac
import logging
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from pocketmem.base.clock import Clock
from pocketmem.mcp.http import Anonymous
from pocketmem.service.tokens import TokenService

log = logging.getLogger(__name__)

COOKIE = "pocketmem_ui"
SESSION_DAYS = 7
MAX_SESSIONS = 1000


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
class _Session:
    token_id: str
    user_id: str
    csrf: str
    expires: datetime


@dataclass
class WebAccess:
    tokens: TokenService
    clock: Clock
    anonymous: Anonymous
    local_user: str
    allowed_hosts: tuple[str, ...]  # host names (without port) the server answers to
    _sessions: dict[str, _Session] = field(default_factory=dict)
    _anonymous_csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def host_allowed(self, host_header: str | None) -> bool:
        if not host_header:
            return False
        return _host_name(host_header) in self.allowed_hosts

    def origin_allowed(self, origin: str | None) -> bool:
        if origin is None:
            return True
        if origin == "null":
            return False
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and parts.netloc != "" and self.host_allowed(parts.netloc)

    async def anonymous_allowed(self) -> bool:
        if self.anonymous is Anonymous.always:
            return True
        if self.anonymous is Anonymous.never:
            return False
        try:
            return await self.tokens.count_active() == 0
        except Exception:
            log.warning("could not count tokens; asking for a sign-in", exc_info=True)
            return False

    async def visitor(self, session_id: str | None) -> Visitor | None:
        """Who sends this request: the signed-in session, else the anonymous visitor where allowed."""
        if session_id:
            session = self._sessions.get(session_id)
            if session is not None:
                if session.expires > self.clock.now() and await self._token_active(session.token_id):
                    return Visitor(session.user_id, session.csrf, session.token_id, session_id)
                self._sessions.pop(session_id, None)
        if await self.anonymous_allowed():
            return Visitor(self.local_user, self._anonymous_csrf)
        return None

    async def _token_active(self, token_id: str) -> bool:
        try:
            async with self.tokens.store.read() as reader:
                record = await reader.get_token(token_id)
        except Exception:
            log.warning("token check failed: the store is unavailable", exc_info=True)
            return False
        return record is not None and record.active

    async def sign_in(self, token: str) -> Visitor | None:
        record = await self.tokens.verify(token.strip())
        if record is None:
            return None
        now = self.clock.now()
        if len(self._sessions) >= MAX_SESSIONS:
            self._forget_expired(now)
            while len(self._sessions) >= MAX_SESSIONS:
                self._sessions.pop(next(iter(self._sessions)))
        session_id = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(32)
        self._sessions[session_id] = _Session(record.id, record.user_id, csrf, now + timedelta(days=SESSION_DAYS))
        return Visitor(record.user_id, csrf, record.id, session_id)

    def sign_out(self, session_id: str | None) -> None:
        if session_id:
            self._sessions.pop(session_id, None)

    def _forget_expired(self, now: datetime) -> None:
        for key in [k for k, s in self._sessions.items() if s.expires <= now]:
            del self._sessions[key]

    @staticmethod
    def csrf_ok(visitor: Visitor, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(visitor.csrf.encode(), (sent or "").encode())


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def allowed_host_names(host: str, allowed_hosts: tuple[str, ...]) -> tuple[str, ...]:
    """The names a browser may use to reach a server bound to `host` (as transport_security in mcp/http.py)."""
    from pocketmem.mcp.http import transport_security

    patterns = transport_security(host, allowed_hosts).allowed_hosts or []
    return tuple(sorted({p.removesuffix(":*") for p in patterns}))
