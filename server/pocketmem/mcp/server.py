"""build_server(settings) -> the MCP server, with the store opened in its lifespan."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

from pocketmem import __version__
from pocketmem.app import PocketMem
from pocketmem.base.clock import Clock
from pocketmem.base.config import Settings
from pocketmem.mcp.calls import PocketMCPServer
from pocketmem.mcp.notifications import CardNotifier, Clients, UserScopedBus
from pocketmem.mcp.profile_resources import register_profile_resources
from pocketmem.mcp.profile_tools import register_profile_tools
from pocketmem.mcp.prompts import register_prompts
from pocketmem.mcp.remember import register_remember_tool
from pocketmem.mcp.resources import register_resources
from pocketmem.mcp.tools import register_tools

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
pocketmem is the user's long-term memory. Before answering a user message, call recall_memories with the message
(and up to 3 recent lines as context, plus a few keywords you infer: synonyms, the other language, and what the
message involves, e.g. 香菜 for 火锅) and use the returned `injection` text naturally. When the user tells you
something worth keeping (a preference, a fact about their life or work, a lesson, a plan, a person, a todo),
call add_memory in the user's language. Correct outdated memories with add_memory(supersedes=...) or, for core
memories, patch_core_memory. Ask the user about pending_confirmations and answer with confirm_pending. The
extract_memories prompt explains scoring. Mention due `reminders` once and mark_memory(action="complete") todos
the user has done. On your next recall, pass `used` with the ids of memories that shaped your reply. While
recall returns `onboarding`, ask the user what it says once and save the answers with update_profile. Now and
then read memory://review and decide each candidate with mark_memory (promote, keep or forget). If the user asks
for a temporary (off-the-record) conversation, pass temporary=true to recall_memories and add_memory.

Every few turns you may instead call remember_conversation with the recent messages (your reply included):
pocketmem then decides with an LLM what to add, update, patch, reinforce or forget."""


def current_user_resolver(settings: Settings) -> Callable[[], str]:
    """The user of the current request: the bearer token's user over HTTP, POCKETMEM_USER otherwise."""

    def current_user() -> str:
        token = get_access_token()
        if token is not None:
            return token.subject or token.client_id
        return settings.user

    return current_user


def _bearer_auth() -> AuthSettings:
    from pocketmem.service.manage.tokens import SCOPE  # the network transports' alone: not loaded over stdio

    # pocketmem issues its own opaque tokens: no OAuth server and no protected-resource metadata.
    # The SDK requires an issuer URL, which is only ever published alongside that metadata.
    return AuthSettings(issuer_url="https://pocketmem.invalid/", resource_server_url=None, required_scopes=[SCOPE])


AFTER_HANDSHAKE = 1.0  # seconds after start: the handshake (initialize, the lists) is answered without contention


async def _after_handshake(task: Callable[..., Awaitable[None]], *args: Any) -> None:
    await anyio.sleep(AFTER_HANDSHAKE)
    await task(*args)


async def _warm_up(app: PocketMem) -> None:
    try:
        await app.warm_up()
    except Exception as exc:  # noqa: BLE001 - the first call that needs the model reports it properly
        log.warning("the embedder could not be loaded in the background: %s", exc)


def build_server(
    settings: Settings,
    *,
    clock: Clock | None = None,
    app: PocketMem | None = None,
    token_verifier: TokenVerifier | None = None,
    clients: Clients | None = None,
) -> MCPServer:
    """The MCP server. With a token verifier (network transports) every HTTP request needs a bearer token, and
    `clients` tells which token a subscription came with, so a revoked one is not notified."""
    app = app or PocketMem(settings, clock=clock)
    current_user = current_user_resolver(settings)
    bus = UserScopedBus(current_user, clients)
    notifier = CardNotifier(app, bus, current_user, clients)

    async def after_maintenance(*_: object) -> None:
        await app.profile_files.sync_all()  # edits people saved in the Markdown files
        await notifier.check_all()
        app.embed_queue.wake()  # memories other processes stored without a vector (vectors.py)

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[PocketMem]:
        await app.open(serving=True, warm=False)  # the text tools and the model load after the handshake (_warm_up)
        log.info(
            "ready: database %s, embedder %s, user %s, transport %s",
            settings.database_label, app.embedder.tag, settings.user,
            "http/sse (users by bearer token)" if token_verifier is not None else "stdio",
        )
        try:
            async with anyio.create_task_group() as tasks:
                # In the background: the handshake never waits for maintenance.
                if settings.maintain_interval > 0:
                    tasks.start_soon(app.maintenance.run_periodically, settings.maintain_interval, after_maintenance)
                if settings.use_flush_interval > 0:
                    # Recall answers first; its use counts are written together on this timer (and at close).
                    app.retrieval.uses.deferred = True
                    tasks.start_soon(app.retrieval.uses.run_periodically, settings.use_flush_interval)
                if app.sync is not None and settings.sync_interval > 0:
                    tasks.start_soon(app.sync.run_periodically, settings.sync_interval)
                # Once the client has its lists: vectors for memories imported, or stored while the embedding
                # endpoint was down (embed_queue.py); text tools and a local model, loaded in a worker thread.
                tasks.start_soon(_after_handshake, app.embed_queue.run_forever)
                tasks.start_soon(_after_handshake, _warm_up, app)
                try:
                    yield app
                finally:
                    tasks.cancel_scope.cancel()
        finally:
            app.retrieval.uses.deferred = False
            try:
                await app.retrieval.uses.flush()  # the app may outlive this server: write what this one deferred
            except Exception:  # noqa: BLE001 - close() tries again; the log says why
                log.warning("could not write recall bookkeeping at shutdown", exc_info=True)
            await app.close()

    mcp = PocketMCPServer(
        "pocketmem",
        current_user=current_user,
        log_content=settings.log_content,
        title="pocketmem",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level=settings.log_level,
        subscriptions=bus,
        token_verifier=token_verifier,
        auth=_bearer_auth() if token_verifier is not None else None,
    )
    register_tools(mcp, app, current_user)
    register_remember_tool(mcp, app, current_user)
    register_resources(mcp, app, current_user)
    register_profile_tools(mcp, app, current_user)
    register_profile_resources(mcp, app, current_user)
    register_prompts(mcp, app, current_user)
    notifier.install(mcp)
    return mcp
