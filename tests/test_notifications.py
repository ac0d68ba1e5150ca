"""notifications/resources/updated for memory://user-card: legacy resources/subscribe and 2026-07-28 listen."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.subscriptions import ResourceUpdated

from pocketmem.app import PocketMem
from pocketmem.base.models import Category
from pocketmem.mcp import http
from pocketmem.mcp.notifications import UserScopedBus
from pocketmem.mcp.server import build_server
from pocketmem.service.writing.add_request import AddRequest

from .asgi import serve_in_process
from .helpers import START

pytestmark = [pytest.mark.anyio]
CARD = "memory://user-card"
MEMORIES = "memory://memories"


class Inbox:
    """A legacy client's message handler that keeps the resource-updated notifications."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.arrived = anyio.Event()

    async def __call__(self, message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(message.params.uri)
            self.arrived.set()

    async def expect(self, count: int) -> None:
        with anyio.fail_after(5):
            while len(self.uris) < count:
                self.arrived = anyio.Event()
                await self.arrived.wait()
        await anyio.sleep(0.05)  # and nothing more right behind it
        assert len(self.uris) == count, self.uris

    async def quiet(self) -> None:
        await anyio.sleep(0.2)


async def subscribe(client: Client, uri: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # removed at 2026-07-28; hosts still use it
        await client.subscribe_resource(uri)


@pytest.mark.backends
async def test_legacy_subscribers_hear_when_the_card_changes(app, settings):
    inbox = Inbox()
    async with Client(build_server(settings, app=app), mode="legacy", message_handler=inbox) as client:
        assert client.server_capabilities.resources.subscribe is True
        await subscribe(client, CARD)
        core = await client.call_tool("add_memory", {"content": "用户叫小林", "scores": {"persistence": 1}})
        await inbox.expect(1)
        assert inbox.uris == [CARD]

        await client.call_tool("add_memory", {"content": "用户喜欢喝乌龙茶", "keywords": ["茶"]})  # not on the card
        await client.call_tool("recall_memories", {"query": "来杯茶", "keywords": ["茶"]})
        await inbox.quiet()
        assert len(inbox.uris) == 1

        await client.call_tool("patch_core_memory", {"memory_id": core.structured_content["memory_id"],
                                                     "patch": "同事叫他林子"})
        await inbox.expect(2)
        todo = await client.call_tool("add_memory", {"content": "周五交报告", "category": "todo"})
        await inbox.expect(3)
        await client.call_tool("mark_memory", {"memory_id": todo.structured_content["memory_id"], "action": "complete"})
        await inbox.expect(4)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            await client.unsubscribe_resource(CARD)
        await client.call_tool("add_memory", {"content": "用户对花生过敏", "scores": {"persistence": 1}})
        await inbox.quiet()
        assert len(inbox.uris) == 4


async def test_a_subscription_to_a_resource_never_announced_is_refused_naming_it(app, settings):
    """memory://stats and memory://review change with every recall and are never announced (README), and
    memory://nothing is no resource: a subscription to them is refused as invalid params, not accepted and left
    silent; a memory's own URI is accepted."""
    from mcp.shared.exceptions import MCPError

    async with Client(build_server(settings, app=app), mode="legacy") as client:
        for uri, why in (("memory://stats", "it changes with every recall"), ("memory://review", "it changes"),
                         ("memory://nothing", "no such resource")):
            with pytest.raises(MCPError) as refused:
                await subscribe(client, uri)
            assert refused.value.error.code == types.INVALID_PARAMS, refused.value.error
            assert f"cannot subscribe to {uri}: {why}" in refused.value.error.message
        await subscribe(client, MEMORIES)
        await subscribe(client, MEMORIES + "/0123456789abcdef0123456789abcdef")


@pytest.mark.backends
async def test_modern_listen_streams_hear_when_the_card_changes(app, settings):
    async with Client(build_server(settings, app=app)) as client:
        async with client.listen(resource_subscriptions=[CARD]) as subscription:
            await client.call_tool("add_memory", {"content": "用户叫小林", "scores": {"persistence": 1}})
            with anyio.fail_after(5):
                async for event in subscription:
                    assert event == ResourceUpdated(uri=CARD)
                    break


@pytest.mark.backends
async def test_the_timer_announces_todos_turning_overdue(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, maintain_interval=0.05)
    app = PocketMem(settings, clock=clock)
    await app.open()
    inbox = Inbox()
    try:
        async with Client(build_server(settings, app=app), mode="legacy", message_handler=inbox) as client:
            await client.call_tool("add_memory", {"content": "交房租", "category": "todo",
                                                  "due_at": (START + timedelta(days=1)).isoformat()})
            await subscribe(client, CARD)
            await inbox.quiet()
            assert inbox.uris == []
            clock.advance(days=2)  # nothing was written, but the card now says 已逾期 (overdue)
            await inbox.expect(1)
            assert "（已逾期：截止" in (await client.read_resource(CARD)).contents[0].text
    finally:
        await app.close()


@pytest.mark.backends
async def test_changes_made_elsewhere_reach_subscribers_at_the_next_maintenance(tmp_path, clock, make_settings):
    settings = make_settings(tmp_path, maintain_interval=0.05)
    app = PocketMem(settings, clock=clock)
    await app.open()
    inbox = Inbox()
    try:
        async with Client(build_server(settings, app=app), mode="legacy", message_handler=inbox) as client:
            await subscribe(client, CARD)
            async with PocketMem(settings, clock=clock) as other_process:
                await other_process.writing.add(
                    "global", AddRequest(content="用户对花生过敏", category=Category.fact, scores={"persistence": 1})
                )
            await inbox.expect(1)
            assert "用户对花生过敏" in (await client.read_resource(CARD)).contents[0].text
    finally:
        await app.close()


async def test_the_bus_keeps_users_apart():
    current = {"user": "alice"}
    bus = UserScopedBus(lambda: current["user"])
    got: dict[str, list] = {"alice": [], "bob": []}
    bus.subscribe(got["alice"].append)
    current["user"] = "bob"
    unsubscribe = bus.subscribe(got["bob"].append)
    await bus.publish_to("alice", ResourceUpdated(uri=CARD))
    assert (len(got["alice"]), len(got["bob"])) == (1, 0)
    await bus.publish(ResourceUpdated(uri="memory://stats"))
    assert (len(got["alice"]), len(got["bob"])) == (2, 1)
    unsubscribe()
    assert bus.users() == {"alice"}


LISTING = "memory://memories"


class Heard:
    """The resource URIs a client was told changed, on either era: legacy notifications or a listen stream."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.changed = anyio.Event()

    def add(self, uri: str) -> None:
        self.uris.append(uri)
        self.changed.set()

    async def legacy(self, message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.add(message.params.uri)

    async def until(self, uri: str, times: int) -> None:
        with anyio.fail_after(5):
            while self.uris.count(uri) < times:
                self.changed = anyio.Event()
                await self.changed.wait()


async def _memory_lifecycle(client: Client, app: PocketMem, clock, heard: Heard, listen) -> None:
    """Patch, supersede, forget, restore and expiry each reach a subscriber of that memory; an added memory
    reaches a subscriber of memory://memories."""
    core = (await client.call_tool("add_memory", {"content": "用户叫小林", "scores": {"persistence": 1}}))
    plain = await client.call_tool("add_memory", {"content": "用户在学吉他"})
    episode = await client.call_tool("add_memory", {"content": "今天聊了搬家的事", "category": "episode"})
    uri = {name: f"{LISTING}/{result.structured_content['memory_id']}"
           for name, result in (("core", core), ("plain", plain), ("episode", episode))}
    async with listen([*uri.values(), LISTING]):
        await client.call_tool("add_memory", {"content": "用户喜欢乌龙茶"})
        await heard.until(LISTING, 1)
        await client.call_tool("patch_core_memory", {"memory_id": uri["core"].rsplit("/", 1)[1], "patch": "小名林子"})
        await heard.until(uri["core"], 1)
        plain_id = uri["plain"].rsplit("/", 1)[1]
        await client.call_tool("forget_memory", {"memory_id": plain_id})
        await heard.until(uri["plain"], 1)
        await client.call_tool("restore", {"memory_id": plain_id})
        await heard.until(uri["plain"], 2)
        await client.call_tool("add_memory", {"content": "用户改学钢琴了", "supersedes": plain_id})
        await heard.until(uri["plain"], 3)
        clock.advance(days=app.settings.episode_days + 1)
        await app.maintenance.run()
        await heard.until(uri["episode"], 1)
    assert "superseded" in (await client.read_resource(uri["plain"])).contents[0].text


@pytest.mark.backends
async def test_legacy_subscribers_hear_about_each_memory(app, settings, clock):
    heard = Heard()
    async with Client(build_server(settings, app=app), mode="legacy", message_handler=heard.legacy) as client:

        @asynccontextmanager
        async def listen(uris: list[str]) -> AsyncIterator[None]:
            for one in uris:
                await subscribe(client, one)
            yield

        await _memory_lifecycle(client, app, clock, heard, listen)


@pytest.mark.backends
async def test_listen_streams_hear_about_each_memory(app, settings, clock):
    heard = Heard()
    async with Client(build_server(settings, app=app)) as client:

        @asynccontextmanager
        async def listen(uris: list[str]) -> AsyncIterator[None]:
            async with client.listen(resource_subscriptions=uris) as subscription, anyio.create_task_group() as tasks:

                async def pump() -> None:
                    async for event in subscription:
                        if isinstance(event, ResourceUpdated):
                            heard.add(event.uri)

                tasks.start_soon(pump)
                yield
                tasks.cancel_scope.cancel()

        await _memory_lifecycle(client, app, clock, heard, listen)


@pytest.mark.backends
async def test_a_revoked_tokens_subscriptions_hear_nothing_more(tmp_path, backend, monkeypatch):
    """Checked as each notification is sent: both eras, before the server gets round to closing the sessions."""
    monkeypatch.setattr(http, "SESSION_CHECK_SECONDS", 3600)
    async with serve_in_process(backend, tmp_path, "http") as server:
        phone, laptop = await server.create_token("carol", "phone"), await server.create_token("carol", "laptop")
        inbox = Inbox()
        async with (server.connect(phone, mode="legacy", message_handler=inbox) as legacy,
                    server.connect(phone, mode="auto") as modern, server.connect(laptop) as other,
                    modern.listen(resource_subscriptions=[MEMORIES]) as subscription):
            await subscribe(legacy, MEMORIES)
            await other.call_tool("add_memory", {"content": "carol 周五去杭州"})
            await inbox.expect(1)
            with anyio.fail_after(5):
                assert await anext(aiter(subscription)) == ResourceUpdated(uri=MEMORIES)
            await server.revoke_token(phone)
            await other.call_tool("add_memory", {"content": "carol 买牛奶"})
            await inbox.quiet()
            assert inbox.uris == [MEMORIES]
            with anyio.move_on_after(0.2):
                event = await anext(aiter(subscription))
                raise AssertionError(f"a revoked token's listen stream heard {event}")
