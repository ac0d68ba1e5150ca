"""`notifications/resources/updated` for memory://user-card, the profile resources (memory://persona,
memory://project, memory://insights), the listing memory://memories (a memory added, changed or removed) and
each memory://memories/{id} a client subscribed to (patched, superseded, forgotten, restored, expired), on both
protocol eras.

    2025-11-25 (hosts, `Client(mode="legacy")`): the client sends `resources/subscribe`; we keep a weak
               reference to its connection and send the notification on the connection's own stream.
    2026-07-28: the client opens a `subscriptions/listen` stream; the SDK's ListenHandler serves it over
               a bus that remembers each stream's user, so one user's changes never wake another's client.

Only while the client's bearer token is active: the token each subscription was made with is re-read before a
notification goes out, and a revoked token's sessions and streams get nothing more (mcp/http.py also ends its
stateful sessions, streams included, within SESSION_CHECK_SECONDS).

When does a resource change? After every committed write (store.on_commit) for a user someone is
watching, each watched resource is rendered again and compared with the last one sent: a new core memory, a patch,
a todo added or completed, an expiry, a restore... all change it; a recall does not. The maintenance
timer also checks, which catches changes made by another process (`pocketmem import`) and todos
turning overdue. Nothing is rendered for users nobody watches.
"""

from __future__ import annotations

import hashlib
import json
import logging
import weakref
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import ListenHandler, ResourceUpdated, ServerEvent
from mcp.shared.exceptions import MCPError

from pocketmem.app import PocketMem
from pocketmem.base.errors import NotFound
from pocketmem.base.models import EventKind
from pocketmem.mcp.profile_resources import PROFILE_URIS, render_resource
from pocketmem.mcp.resources import MEMORIES_URI, MEMORY_URI_TEMPLATE, REVIEW_URI, STATS_URI, USER_CARD_URI, listing

log = logging.getLogger(__name__)

# The resources announced when they change: the card, the profile layer's views and the listing; and one
# memory (memory://memories/{id}) when a client subscribed to it.
WATCHED_URIS = (USER_CARD_URI, *PROFILE_URIS, MEMORIES_URI)
ONE_MEMORY = MEMORIES_URI + "/"
# What changes by itself with every recall or every hour: not worth a notification.
RESTLESS = frozenset({"importance", "use_count", "last_active_at"})


def watchable(uri: str) -> bool:
    return uri in WATCHED_URIS or (uri.startswith(ONE_MEMORY) and len(uri) > len(ONE_MEMORY))


def unwatchable(uri: str) -> str:
    """Why a subscription to `uri` is refused: a resource that changes with every recall, or none at all."""
    if uri in (STATS_URI, REVIEW_URI):
        return f"cannot subscribe to {uri}: it changes with every recall and is never announced; read it when needed"
    named = ", ".join((*WATCHED_URIS, MEMORY_URI_TEMPLATE))
    return f"cannot subscribe to {uri}: no such resource; these can be subscribed to: {named}"

# Writes that never change the card: skip the re-render on the hot path.
QUIET_KINDS = frozenset({EventKind.recalled, EventKind.retrieval_fail, EventKind.used, EventKind.discarded})


async def _none_revoked(clients: set[str]) -> set[str]:
    return set()


@dataclass(frozen=True)
class Clients:
    """Which client (bearer token) the current request comes from, and which of some clients have lost their
    token since they subscribed. Without a token verifier (stdio) there is one client and none is revoked."""

    current: Callable[[], str | None] = lambda: None
    revoked: Callable[[set[str]], Awaitable[set[str]]] = _none_revoked


class UserScopedBus:
    """A SubscriptionBus whose listeners belong to the user (and client) of the request that opened them."""

    def __init__(self, current_user: Callable[[], str], clients: Clients | None = None) -> None:
        self._current_user = current_user
        self._clients = clients or Clients()
        self._listeners: dict[object, tuple[str, str | None, Callable[[ServerEvent], None]]] = {}

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        token = object()
        self._listeners[token] = (self._current_user(), self._clients.current(), listener)

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    async def publish(self, event: ServerEvent) -> None:
        """Everyone (tool or prompt list changes are the same for all users)."""
        await self._deliver(event, None)

    async def publish_to(self, user_id: str, event: ServerEvent, revoked: Collection[str] = ()) -> None:
        """`user_id`'s listeners, but not those opened with a `revoked` client."""
        await self._deliver(event, user_id, revoked)

    async def _deliver(self, event: ServerEvent, user_id: str | None, revoked: Collection[str] = ()) -> None:
        for owner, client, listener in list(self._listeners.values()):
            if (user_id is None or owner == user_id) and client not in revoked:
                try:
                    listener(event)
                except Exception:  # one broken stream must not starve the others
                    log.exception("subscription listener failed")
        await anyio.lowlevel.checkpoint()

    def users(self) -> set[str]:
        return {owner for owner, _, _ in self._listeners.values()}

    def clients(self, user_id: str) -> set[str]:
        return {client for owner, client, _ in self._listeners.values() if owner == user_id and client is not None}


class CardNotifier:
    def __init__(
        self, app: PocketMem, bus: UserScopedBus, current_user: Callable[[], str], clients: Clients | None = None
    ) -> None:
        self._app = app
        self._bus = bus
        self._current_user = current_user
        self._clients = clients or Clients()
        self._listen = ListenHandler(bus)
        # legacy connections subscribed to watched resources: id(connection) -> (weak reference, user, client, uris);
        # a connection that goes away without unsubscribing drops out by itself
        self._sessions: dict[int, tuple[Callable[[], Any], str, str | None, set[str]]] = {}
        self._listens: dict[object, tuple[str, frozenset[str]]] = {}  # open listen streams: user, memory uris
        self._sent: dict[str, dict[str, str]] = {}  # user -> uri -> fingerprint last known to subscribers
        self._locks: dict[str, anyio.Lock] = {}

    def install(self, mcp: MCPServer) -> None:
        # MCPServer has no public hook for resources/subscribe, so the handlers go on its low-level server.
        server = mcp._lowlevel_server  # noqa: SLF001
        server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, self._subscribe)
        server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, self._unsubscribe)
        server.add_request_handler(
            "subscriptions/listen", types.SubscriptionsListenRequestParams, self._listen_for
        )
        self._app.store.on_commit(self._on_commit)

    # -- subscribing ------------------------------------------------------------------------------
    async def _subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        if watchable(params.uri):
            user = self._current_user()
            key = _key(ctx)
            _, _, _, uris = self._sessions.get(key, (None, user, None, set()))
            self._sessions[key] = (_reference(ctx), user, self._clients.current(), uris | {params.uri})
            await self._prime(user)  # the new URI's first fingerprint
            return types.EmptyResult()
        raise MCPError(types.INVALID_PARAMS, unwatchable(params.uri))

    async def _unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        entry = self._sessions.get(_key(ctx))
        if entry is not None and params.uri in entry[3]:
            entry[3].discard(params.uri)
            if not entry[3]:
                self._sessions.pop(_key(ctx), None)
        return types.EmptyResult()

    async def _listen_for(self, ctx: Any, params: types.SubscriptionsListenRequestParams) -> Any:
        wanted = frozenset(uri for uri in params.notifications.resource_subscriptions or () if watchable(uri))
        if not wanted:
            return await self._listen(ctx, params)
        token, user = object(), self._current_user()
        self._listens[token] = (user, wanted)
        await self._prime(user)
        try:
            return await self._listen(ctx, params)
        finally:
            self._listens.pop(token, None)

    # -- watching -------------------------------------------------------------------------------
    def watched(self) -> set[str]:
        return {user for ref, user, _, _ in self._sessions.values() if ref() is not None} | self._bus.users()

    async def _prime(self, user_id: str) -> None:
        async with self._lock(user_id):
            self._sent[user_id] = await self._fingerprints(user_id)

    async def _on_commit(self, changes: Mapping[str, frozenset[EventKind]]) -> None:
        watched = self.watched()
        for user_id, kinds in changes.items():
            if user_id in watched and not kinds <= QUIET_KINDS:
                await self.check(user_id)

    async def check_all(self, *_: object) -> None:
        for user_id in self.watched():
            await self.check(user_id)

    async def check(self, user_id: str) -> None:
        async with self._lock(user_id):
            fingerprints = await self._fingerprints(user_id)
            before = self._sent.get(user_id, {})
            changed = [uri for uri, print_ in fingerprints.items() if uri in before and before[uri] != print_]
            self._sent[user_id] = fingerprints
        if not changed:
            return
        revoked = await self._revoked(user_id)
        for uri in changed:
            await self._notify(user_id, uri, revoked)

    async def _revoked(self, user_id: str) -> set[str]:
        """The clients watching `user_id` whose token has been revoked since they subscribed."""
        clients = {client for _, owner, client, _ in self._sessions.values() if owner == user_id and client}
        clients |= self._bus.clients(user_id)
        if not clients:
            return set()
        try:
            return await self._clients.revoked(clients)
        except Exception:  # fail closed: a store error must never let a revoked token's client hear of a change
            log.warning("token check failed: the store is unavailable; changes not announced", exc_info=True)
            return clients

    def _memory_uris(self, user_id: str) -> set[str]:
        """The memory://memories/{id} URIs this user's connections subscribed to."""
        legacy = {uri for ref, user, _, uris in self._sessions.values() if user == user_id and ref() is not None
                  for uri in uris}
        listening = {uri for user, uris in self._listens.values() if user == user_id for uri in uris}
        return {uri for uri in legacy | listening if uri.startswith(ONE_MEMORY)}

    async def _fingerprints(self, user_id: str) -> dict[str, str]:
        texts = {USER_CARD_URI: await self._app.user_card(user_id)}
        for uri in PROFILE_URIS:
            texts[uri] = await render_resource(self._app, user_id, uri)
        listed = await listing(self._app, user_id)
        texts[MEMORIES_URI] = _steady([_steady(item) for item in listed["items"]] + [listed["total"]])
        for uri in sorted(self._memory_uris(user_id)):
            try:
                texts[uri] = _steady(await self._app.get_memory(user_id, uri[len(ONE_MEMORY):]))
            except NotFound:
                texts[uri] = "not found"
        return {uri: hashlib.sha256(text.encode()).hexdigest() for uri, text in texts.items()}

    def _lock(self, user_id: str) -> anyio.Lock:
        return self._locks.setdefault(user_id, anyio.Lock())

    async def _notify(self, user_id: str, uri: str, revoked: set[str]) -> None:
        for key, (ref, owner, client, uris) in list(self._sessions.items()):
            if owner != user_id or uri not in uris:
                continue
            connection = ref()
            if connection is None or client in revoked:  # a revoked token's session never hears again
                self._sessions.pop(key, None)
                continue
            try:
                await connection.send_resource_updated(uri)
            except Exception:  # a closed session stops being notified
                log.debug("dropping a closed subscription", exc_info=True)
                self._sessions.pop(key, None)
        await self._bus.publish_to(user_id, ResourceUpdated(uri=uri), revoked)


def _steady(value: Any) -> str:
    """A resource's JSON without the fields that move on their own (importance decays, recalls count)."""
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k not in RESTLESS}
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _key(ctx: Any) -> int:
    return id(getattr(ctx.session, "_connection", ctx.session))


def _reference(ctx: Any) -> Callable[[], Any]:
    """Something that can send standalone notifications to the client, for as long as it is connected.

    `ctx.session` is a per-request proxy; the SDK (2.3) keeps the connection, which outlives requests and
    has send_resource_updated, in a private attribute. We hold it weakly so a client that disconnects
    without unsubscribing drops out by itself. Should the attribute go away, the proxy is kept instead.
    """
    connection = getattr(ctx.session, "_connection", None)
    if connection is not None:
        return weakref.ref(connection)
    session = ctx.session
    return lambda: session
