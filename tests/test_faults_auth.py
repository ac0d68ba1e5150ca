"""Faults: the auth state is explicit. Once a token has existed, anonymous loopback requests stay refused until
the operator allows them again; revoking the last token is not that choice. On both backends.
(tests/test_http.py::test_loopback_needs_no_token_until_the_first_one_exists drives the same through HTTP.)
The MCP endpoint, the page under it and `pocketmem ui` read that one state."""

from __future__ import annotations

import httpx2
import pytest

from pocketmem.service.manage.tokens import ANONYMOUS_KEY, TokenService
from pocketmem.service.writing.add_request import AddRequest
from pocketmem.web.server import mount_page, standalone

from .asgi import serve_in_process

pytestmark = [pytest.mark.anyio, pytest.mark.backends]
USER = "global"


async def test_revoking_the_last_token_does_not_reopen_the_server(app):
    tokens = TokenService(app.store, app.clock)
    assert await tokens.anonymous_allowed()  # no token has ever existed
    first = await tokens.create("alice")
    assert not await tokens.anonymous_allowed()
    await tokens.revoke(first.record.id)
    assert not await tokens.anonymous_allowed()  # closed stays closed
    assert await tokens.allow_anonymous() == 0
    assert await tokens.anonymous_allowed()  # the operator's choice
    second = await tokens.create("bob")
    assert not await tokens.anonymous_allowed()  # a new token closes it again
    assert await tokens.allow_anonymous() == 1
    assert not await tokens.anonymous_allowed()  # ... while a token is active
    await tokens.revoke(second.record.id)
    assert await tokens.anonymous_allowed()


async def test_a_store_from_before_the_setting_is_closed_once_any_token_existed(app):
    tokens = TokenService(app.store, app.clock)
    made = await tokens.create("alice")
    await tokens.revoke(made.record.id)
    async with app.store.write() as tx:  # as an older version left it: tokens, no recorded state
        await tx.put_meta(ANONYMOUS_KEY, "")
    assert not await tokens.anonymous_allowed()


async def _surfaces_refuse(server, memory_id: str) -> None:
    """Every surface of a server whose tokens are all revoked asks for one: /mcp, the page, its changes."""
    async with server.http() as http:
        assert (await http.post("/mcp", json={})).status_code == 401
        for path in ("/ui/memories", f"/ui/memories/{memory_id}", "/ui/trash", "/ui/insights", "/ui/profile"):
            page = await http.get(path)
            assert page.status_code == 303 and page.headers["location"] == "/ui/login", path
        forget = await http.post(f"/ui/memories/{memory_id}/forget", data={"csrf": "x"})
        assert forget.status_code == 401
    assert (await server.app.get_memory(USER, memory_id))["status"] == "active"


async def _page_refuses(app, memory_id: str) -> None:
    """`pocketmem ui` over the same store (its own app, as a new process builds it)."""
    asgi, open_ = await standalone(app, "127.0.0.1")
    assert not open_
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=asgi), base_url="http://127.0.0.1:8000") as http:
        assert (await http.get("/ui/memories")).status_code == 303
        assert (await http.post(f"/ui/memories/{memory_id}/forget", data={"csrf": "x"})).status_code == 401


async def test_revoking_every_token_keeps_every_surface_closed_also_after_a_restart(tmp_path, backend):
    async with serve_in_process(backend, tmp_path, "http", mount=mount_page) as server:
        added = await server.app.writing.add(USER, AddRequest(content="用户的银行卡尾号是 4242"))
        memory_id = added.memory_id or ""
        async with server.http() as http:  # open before any token: the local user's page
            assert (await http.get("/ui/memories")).status_code == 200
        token = await server.create_token("alice")
        await server.revoke_token(token)
        await _surfaces_refuse(server, memory_id)
        await _page_refuses(server.app, memory_id)
    async with serve_in_process(backend, tmp_path, "http", mount=mount_page) as server:  # a restart over the same store
        assert "every one is revoked" in server.log()
        await _surfaces_refuse(server, memory_id)
        await _page_refuses(server.app, memory_id)
        await server.allow_anonymous()  # the operator's choice reopens every surface alike
        async with server.http() as http:
            assert (await http.get("/ui/memories")).status_code == 200
        asgi, open_ = await standalone(server.app, "127.0.0.1")
        assert open_
