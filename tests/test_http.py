"""`pocketmem serve --transport http|sse` as a real server on 127.0.0.1, reached by the official client.

Authentication (bearer tokens), the loopback policy, DNS-rebinding protection and the request size
limit, through real HTTP; who-sees-what between users is in test_isolation.py.
"""

from __future__ import annotations

import json
import sqlite3

import httpx2
import pytest

from tests.servers import ServerProcess, cli, connect, create_token

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
JSON_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


async def post_initialize(
    url: str, headers: dict[str, str] | None = None, body: bytes | None = None
) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30) as http:
        content = body if body is not None else json.dumps(INITIALIZE).encode()
        return await http.post(url, content=content, headers={**JSON_HEADERS, **(headers or {})})


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def add(client, content: str) -> str:
    result = await client.call_tool("add_memory", {"content": content})
    assert not result.is_error, result.content[0].text
    return result.structured_content["memory_id"]


async def contents(client) -> list[str]:
    result = await client.call_tool("list_memories", {"limit": 500})
    return sorted(item["content"] for item in result.structured_content["items"])


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"


async def test_a_token_is_needed_and_checked(home):
    alice = create_token(home, "alice", "laptop")
    with ServerProcess(home, "http") as server:
        assert "bearer token required" in server.log()
        missing = await post_initialize(server.url)
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer ")
        for wrong in ("nonsense", alice[:-1] + ("A" if alice[-1] != "A" else "B"), "pm_000000000000_" + "x" * 43):
            assert (await post_initialize(server.url, bearer(wrong))).status_code == 401, wrong
        assert (await post_initialize(server.url, {"authorization": f"Basic {alice}"})).status_code == 401
        assert (await post_initialize(server.url, bearer(alice))).status_code == 200

        for mode in ("legacy", "auto"):
            async with connect(server.url, alice, mode=mode) as client:
                await add(client, f"用户的猫叫小白 ({mode})")
        async with connect(server.url, alice) as client:
            assert await contents(client) == ["用户的猫叫小白 (auto)", "用户的猫叫小白 (legacy)"]

        token_id = alice.split("_")[1]
        revoked = cli(home, "token", "revoke", token_id)
        assert revoked.returncode == 0, revoked.stderr
        assert (await post_initialize(server.url, bearer(alice))).status_code == 401  # at once, no restart


async def test_loopback_needs_no_token_until_the_first_one_exists(home):
    with ServerProcess(home, "http", env={"POCKETMEM_USER": "owner"}) as server:
        assert "no token needed until one is created" in server.log()
        async with connect(server.url) as client:
            await add(client, "用户喜欢爬山")
        # A token that is sent is checked even while none is needed.
        assert (await post_initialize(server.url, bearer("pm_0123456789ab_" + "y" * 43))).status_code == 401

        bob = create_token(home, "bob")
        assert (await post_initialize(server.url)).status_code == 401  # on as soon as a token exists
        async with connect(server.url, bob) as client:
            assert await contents(client) == []  # bob, not owner

        cli(home, "token", "revoke", bob.split("_")[1])
        # Revoking the last token does not reopen the server: a token has existed, so one stays required.
        assert (await post_initialize(server.url)).status_code == 401
    with ServerProcess(home, "http", env={"POCKETMEM_USER": "owner"}) as server:
        assert "a token existed before" in server.log() and "allow-anonymous" in server.log()
        assert (await post_initialize(server.url)).status_code == 401
        opened = cli(home, "token", "allow-anonymous")
        assert opened.returncode == 0, opened.stderr
        async with connect(server.url) as client:  # the operator chose to open it again
            assert await contents(client) == ["用户喜欢爬山"]
        create_token(home, "carol")
        assert (await post_initialize(server.url)).status_code == 401  # a new token closes it again


async def test_stdio_acts_as_pocketmem_user_over_the_same_file(home):
    import sys

    from mcp import Client, StdioServerParameters

    from tests.servers import server_env

    alice = create_token(home, "alice")
    bob = create_token(home, "bob")
    with ServerProcess(home, "http") as server:
        async with connect(server.url, alice) as client:
            await add(client, "alice: 用户对花生过敏")
        async with connect(server.url, bob) as client:
            await add(client, "bob: 用户在学日语")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "pocketmem", "serve"], env=server_env(home, POCKETMEM_USER="alice")
    )
    async with Client(params, mode="legacy") as client:
        assert await contents(client) == ["alice: 用户对花生过敏"]


async def test_sse_transport(home):
    alice = create_token(home, "alice")
    bob = create_token(home, "bob")
    with ServerProcess(home, "sse") as server:
        assert server.url.endswith("/sse")
        async with httpx2.AsyncClient(timeout=10) as http:
            assert (await http.get(server.url)).status_code == 401
            assert (await http.get(server.url, headers=bearer("pm_0123456789ab_" + "z" * 43))).status_code == 401
            assert (await http.post(server.base + "/messages/?session_id=00", json=INITIALIZE)).status_code == 401
        for mode in ("legacy", "auto"):
            async with connect(server.url, alice, mode=mode) as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                assert len(tools) == 11
                await add(client, f"用户每天早上跑步 {mode}")
                recalled = await client.call_tool("recall_memories", {"query": "跑步", "keywords": ["跑步"]})
                assert recalled.structured_content["memories"], recalled.content[0].text
        async with connect(server.url, bob) as client:
            assert await contents(client) == []
            recalled = await client.call_tool("recall_memories", {"query": "跑步", "keywords": ["跑步"]})
            assert recalled.structured_content["memories"] == []


async def test_dns_rebinding_protection_and_request_size_limit(home):
    alice = create_token(home, "alice")
    with ServerProcess(home, "http", env={"POCKETMEM_MAX_REQUEST_BYTES": "16384"}) as server:
        port = server.url.split(":")[2].split("/")[0]
        ok = await post_initialize(server.url, {**bearer(alice), "host": f"localhost:{port}"})
        assert ok.status_code == 200
        rebound = await post_initialize(server.url, {**bearer(alice), "host": f"attacker.example:{port}"})
        assert rebound.status_code == 421
        foreign = await post_initialize(server.url, {**bearer(alice), "origin": "http://attacker.example"})
        assert foreign.status_code == 403
        big = dict(INITIALIZE, params={**INITIALIZE["params"], "padding": "x" * 20_000})
        too_big = await post_initialize(server.url, bearer(alice), json.dumps(big).encode())
        assert too_big.status_code == 413

        async with connect(server.url, alice) as client:
            long = await client.call_tool("add_memory", {"content": "长" * 2001})
            assert long.is_error and "limit is 2000" in long.content[0].text
            assert await contents(client) == []


async def test_a_wildcard_host_needs_tokens_and_allowed_hosts(home):
    refused = cli(home, "serve", "--transport", "http", "--host", "0.0.0.0", "--allowed-host", "memory.test")
    assert refused.returncode == 2
    assert "without authentication" in refused.stderr and "pocketmem token create" in refused.stderr

    token = create_token(home, "alice")
    no_names = cli(home, "serve", "--transport", "http", "--host", "0.0.0.0")
    assert no_names.returncode == 2 and "--allowed-host" in no_names.stderr
    unsafe = cli(home, "serve", "--transport", "http", "--host", "0.0.0.0", "--auth", "none", "--allowed-host", "x")
    assert unsafe.returncode == 2 and "--auth none is for a loopback host" in unsafe.stderr
    proxied = cli(home, "serve", "--transport", "http", "--auth", "none", "--allowed-host", "memory.example.com")
    assert proxied.returncode == 2 and "refusing --auth none on memory.example.com" in proxied.stderr

    with ServerProcess(home, "http", "--host", "0.0.0.0", "--allowed-host", "memory.test") as server:
        url = server.url.replace("0.0.0.0", "127.0.0.1")
        assert "bearer token required" in server.log()
        assert (await post_initialize(url)).status_code == 401
        assert (await post_initialize(url, bearer(token))).status_code == 200
        port = url.split(":")[2].split("/")[0]
        named = await post_initialize(url, {**bearer(token), "host": f"memory.test:{port}"})
        assert named.status_code == 200
        assert (await post_initialize(url, {**bearer(token), "host": f"other.test:{port}"})).status_code == 421


async def test_auth_modes_on_loopback(home):
    refused = cli(home, "serve", "--transport", "http", "--auth", "token")
    assert refused.returncode == 2 and "no token exists yet" in refused.stderr
    stdio = cli(home, "serve", "--auth", "none")
    assert stdio.returncode == 2 and "http or sse" in stdio.stderr

    alice = create_token(home, "alice")
    with ServerProcess(home, "http", "--auth", "none", env={"POCKETMEM_USER": "owner"}) as server:
        assert (await post_initialize(server.url)).status_code == 200  # tokens exist, but --auth none
        assert (await post_initialize(server.url, bearer(alice + "x"))).status_code == 401
        async with connect(server.url) as client:
            await add(client, "owner: 用户住在杭州")
        async with connect(server.url, alice) as client:
            assert await contents(client) == []


def test_token_commands_store_only_a_hash(home):
    created = cli(home, "token", "create", "--user", "alice", "--name", "phone")
    assert created.returncode == 0 and "shown only this once" in created.stderr
    token = created.stdout.strip()
    assert token.startswith("pm_") and len(token) > 50
    token_id = token.split("_")[1]

    listed = cli(home, "token", "list", "--json")
    rows = json.loads(listed.stdout)
    assert [(r["id"], r["user_id"], r["name"], r["revoked_at"]) for r in rows] == [(token_id, "alice", "phone", None)]
    assert token not in listed.stdout and "hash" not in listed.stdout
    assert token_id in cli(home, "token", "list").stdout

    secret = token.split("_", 2)[2].encode()
    for path in (home / "memory.db", home / "memory.db-wal"):
        if path.exists():
            assert secret not in path.read_bytes()
    with sqlite3.connect(home / "memory.db") as db:
        (stored,) = db.execute("select token_hash from api_tokens").fetchone()
    import hashlib

    assert stored == hashlib.sha256(token.encode()).hexdigest()

    assert cli(home, "token", "revoke", token_id).returncode == 0
    assert json.loads(cli(home, "token", "list", "--json").stdout) == []
    assert json.loads(cli(home, "token", "list", "--all", "--json").stdout)[0]["revoked_at"] is not None
    unknown = cli(home, "token", "revoke", "ffffffffffff")
    assert unknown.returncode == 2 and "no token with id" in unknown.stderr
    bad_user = cli(home, "token", "create", "--user", "bad user!")
    assert bad_user.returncode == 2 and "user:" in bad_user.stderr


async def test_malformed_requests_get_clean_errors(home):
    """Broken JSON, bad bytes, lone surrogates, NaN / infinity: an error answer each, no crash, nothing stored."""
    with ServerProcess(home, "http") as server:
        async with httpx2.AsyncClient(timeout=30) as http:
            opened = await http.post(server.url, json=INITIALIZE, headers=JSON_HEADERS)
            session = {**JSON_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"],
                       "mcp-protocol-version": "2025-11-25"}
            await http.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)

            def call(n: int, arguments: str) -> bytes:
                return (f'{{"jsonrpc":"2.0","id":{n},"method":"tools/call",'
                        f'"params":{{"name":"add_memory","arguments":{arguments}}}}}').encode()

            for body in (b"{bad json", b"\xff\xfe\x00", b"[]", call(2, r'{"content":"\ud800x"}')):
                answer = await http.post(server.url, content=body, headers=session)
                assert answer.status_code == 400, body
                assert answer.json()["error"]["code"] in (-32700, -32600, -32602), answer.text
            for n, arguments in enumerate((
                '{"content":"ok","confidence":NaN}', '{"content":"ok","confidence":1e999}',
                '{"content":"ok","scores":{"persistence":-Infinity}}', '{"content":"ok","created_at":"2026-02-30"}',
                '{"content":"ok","due_at":"0001-01-01T00:00:00+14:00"}',
            ), start=3):
                answer = await http.post(server.url, content=call(n, arguments), headers=session)
                assert answer.status_code == 200, arguments
                assert '"isError":true' in answer.text, (arguments, answer.text)
            # No tool takes a user id; one smuggled in is ignored and the write stays the caller's.
            answer = await http.post(
                server.url, content=call(20, '{"content":"ok","user_id":"alice"}'), headers=session
            )
            assert '"status\\": \\"stored' in answer.text, answer.text
        async with connect(server.url) as client:
            assert await contents(client) == ["ok"]
        alice = create_token(home, "alice")
        async with connect(server.url, alice) as client:
            assert await contents(client) == []
        assert "Traceback" not in server.log()
