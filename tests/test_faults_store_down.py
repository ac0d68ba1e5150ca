"""Faults: the store cannot be reached or read while `pocketmem serve --transport http --ui` runs. A request whose
token cannot be checked is refused (fail closed), but with 503 and Retry-After, saying the store is unreachable:
never the 401 / "invalid_token" of a wrong token, which makes a host (Claude Code, VS Code) re-authenticate and
tells the person their token was revoked. The page answers with an error page in its language, not the sign-in
form, and signing in says the store is unreachable, not that the token is invalid.

Real servers on 127.0.0.1: PostgreSQL reached through a TCP proxy that then refuses every connection; SQLite with
the token table's pages of the file overwritten (a damaged file), read again once another process has written.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
import httpx2
import pytest

from pocketmem.web.access import COOKIE

from .pg import PgTestServer, Proxy
from .servers import ServerProcess, cli

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def make_token(backend, home: Path, **env: str) -> str:
    made = cli(backend, home, "token", "create", "--user", "alice", **env)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


async def initialize(http: httpx2.AsyncClient, server: ServerProcess, token: str | None) -> httpx2.Response:
    headers = {**MCP_HEADERS, **({"authorization": f"Bearer {token}"} if token else {})}
    return await http.post(server.url, content=json.dumps(INITIALIZE).encode(), headers=headers)


async def signed_in(http: httpx2.AsyncClient, server: ServerProcess, token: str) -> str:
    """The page's session cookie for `token` (a Cookie header), signed in while the store is up."""
    login = await http.post(f"{server.base}/ui/login", data={"token": token})
    assert login.status_code == 303 and login.headers["location"].endswith("/ui/memories"), login.text
    cookie = f"{COOKIE}={login.cookies[COOKIE]}"
    assert (await http.get(f"{server.base}/ui/memories", headers={"cookie": cookie})).status_code == 200
    return cookie


async def refused_as_unavailable(server: ServerProcess, token: str, cookie: str) -> None:
    """Every surface, with the store failing: 503 saying so, nowhere a 401 or the sign-in form."""
    responses: dict[str, httpx2.Response] = {}
    async with httpx2.AsyncClient(timeout=60) as http:

        async def fetch(name: str, request: httpx2.Request) -> None:
            responses[name] = await http.send(request)

        requests = {
            "mcp": http.build_request(
                "POST", server.url, content=json.dumps(INITIALIZE).encode(),
                headers={**MCP_HEADERS, "authorization": f"Bearer {token}"},
            ),
            "mcp without a token": http.build_request(
                "POST", server.url, content=json.dumps(INITIALIZE).encode(), headers=MCP_HEADERS
            ),
            "page zh": http.build_request(
                "GET", f"{server.base}/ui/memories", headers={"cookie": cookie, "accept-language": "zh-CN"}
            ),
            "sign-in": http.build_request("POST", f"{server.base}/ui/login", data={"token": token}),
            "poll": http.build_request(
                "GET", f"{server.base}/ui/live?after=0",
                headers={"cookie": cookie, "hx-request": "true", "hx-trigger": "live"},
            ),
        }
        async with anyio.create_task_group() as tasks:  # each waits for the store once, side by side
            for name, request in requests.items():
                tasks.start_soon(fetch, name, request)

    mcp = responses["mcp"]
    assert mcp.status_code == 503, mcp.text
    assert mcp.json()["error"] == "temporarily_unavailable"
    assert "cannot be reached or read" in mcp.json()["error_description"]
    assert int(mcp.headers["retry-after"]) > 0 and "www-authenticate" not in mcp.headers
    assert responses["mcp without a token"].status_code == 503  # whether one is needed cannot be read either

    page = responses["page zh"]
    assert page.status_code == 503 and "location" not in page.headers and int(page.headers["retry-after"]) > 0
    assert 'id="error"' in page.text and "暂时无法连接或读取记忆存储" in page.text
    assert 'name="token"' not in page.text  # not the sign-in form

    sign_in = responses["sign-in"]
    assert sign_in.status_code == 503 and "cannot be reached or read" in sign_in.text
    assert "not valid or has been revoked" not in sign_in.text

    assert responses["poll"].status_code == 204  # an open page stays as it is and polls again


@pytest.fixture
def database(postgres: PgTestServer):
    name = postgres.database()
    try:
        yield name
    finally:
        postgres.drop(name)


async def test_postgres_down_gives_503_not_401_and_recovers(tmp_path, backend, postgres, database):
    home = tmp_path / "home"
    token = make_token(backend, home, POCKETMEM_DATABASE_URL=postgres.url(database))
    async with Proxy(postgres.socket_path) as proxy:
        url = postgres.url(database, host="127.0.0.1", port=proxy.port)
        server = ServerProcess(backend, home, "http", "--ui", env={"POCKETMEM_DATABASE_URL": url})
        await anyio.to_thread.run_sync(server.start)  # the proxy serves from this event loop meanwhile
        try:
            async with httpx2.AsyncClient(timeout=60) as http:
                assert (await initialize(http, server, token)).status_code == 200
                cookie = await signed_in(http, server, token)

            proxy.refuse = True
            proxy.cut()
            await refused_as_unavailable(server, token, cookie)

            proxy.refuse = False  # the database is back: the same token works, no re-authentication
            async with httpx2.AsyncClient(timeout=60) as http:
                # Calls fail at once for a few seconds after the store was found down, then it is tried again.
                with anyio.fail_after(30):
                    while (answer := await initialize(http, server, token)).status_code == 503:  # noqa: ASYNC110
                        await anyio.sleep(0.5)
                assert answer.status_code == 200, answer.text
                assert (await http.get(f"{server.base}/ui/memories", headers={"cookie": cookie})).status_code == 200
            assert "Exception in ASGI application" not in server.log(), server.log()
        finally:
            server.stop()


def damage_token_table(db: Path) -> None:
    """Overwrite the pages of `api_tokens` (and its indexes) in the file, then write elsewhere, as another process
    would, so the server reads the file again instead of the pages it keeps in memory."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("pragma wal_checkpoint(truncate)")
        size = conn.execute("pragma page_size").fetchone()[0]
        pages = [row[0] for row in conn.execute("select rootpage from sqlite_master where tbl_name = 'api_tokens'")]
        with db.open("r+b") as file:
            for page in pages:
                file.seek((page - 1) * size)
                file.write(b"\xff" * size)
        conn.execute("insert or replace into store_meta (key, value) values ('elsewhere', 'x')")
    finally:
        conn.close()


async def test_an_unreadable_sqlite_file_gives_503_not_401(tmp_path, backend):
    home = tmp_path / "home"
    token = make_token(backend, home)
    with ServerProcess(backend, home, "http", "--ui") as server:
        async with httpx2.AsyncClient(timeout=60) as http:
            assert (await initialize(http, server, token)).status_code == 200
            cookie = await signed_in(http, server, token)
        damage_token_table(home / "memory.db")
        await refused_as_unavailable(server, token, cookie)
