"""`pocketmem serve --transport http|sse`, reached by the official client: in process through the same ASGI app
(tests/asgi.py), and once per transport as a real server on 127.0.0.1.

Authentication (bearer tokens), the loopback policy, DNS-rebinding protection and the request size
limit, through HTTP; who-sees-what between users is in test_isolation.py.
"""

from __future__ import annotations

import json
import sqlite3

import anyio
import httpx2
import pytest
from mcp import Client

from pocketmem.app import PocketMem
from pocketmem.base.errors import ConfigError
from pocketmem.mcp.http import AuthMode
from pocketmem.mcp.server import build_server
from tests.asgi import InProcessServer, serve_in_process
from tests.servers import ServerProcess, cli, connect, create_token, run_cli

pytestmark = [pytest.mark.anyio]

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
JSON_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


async def post_initialize(
    server: InProcessServer | str, headers: dict[str, str] | None = None, body: bytes | None = None
) -> httpx2.Response:
    content = body if body is not None else json.dumps(INITIALIZE).encode()
    if isinstance(server, str):
        async with httpx2.AsyncClient(timeout=30) as http:
            return await http.post(server, content=content, headers={**JSON_HEADERS, **(headers or {})})
    async with server.http() as http:
        return await http.post(server.url, content=content, headers={**JSON_HEADERS, **(headers or {})})


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


# -- one real server per transport ----------------------------------------------------------------------------
@pytest.mark.slow
async def test_streamable_http_in_a_real_process(home, backend):
    alice = create_token(backend, home, "alice", "laptop")
    with ServerProcess(backend, home, "http") as server:
        assert "bearer token required" in server.log()
        missing = await post_initialize(server.url)
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer ")
        assert (await post_initialize(server.url, bearer(alice))).status_code == 200
        for mode in ("legacy", "auto"):
            async with connect(server.url, alice, mode=mode) as client:
                await add(client, f"用户的猫叫小白 ({mode})")
        async with connect(server.url, alice) as client:
            assert await contents(client) == ["用户的猫叫小白 (auto)", "用户的猫叫小白 (legacy)"]
        revoked = cli(backend, home, "token", "revoke", alice.split("_")[1])
        assert revoked.returncode == 0, revoked.stderr
        assert (await post_initialize(server.url, bearer(alice))).status_code == 401  # at once, no restart
        assert "Traceback" not in server.log()


@pytest.mark.slow
async def test_sse_in_a_real_process(home, backend):
    alice = create_token(backend, home, "alice")
    with ServerProcess(backend, home, "sse") as server:
        assert server.url.endswith("/sse")
        async with httpx2.AsyncClient(timeout=10) as http:
            assert (await http.get(server.url)).status_code == 401
        async with connect(server.url, alice) as client:
            await add(client, "用户每天早上跑步")
            recalled = await client.call_tool("recall_memories", {"query": "跑步", "keywords": ["跑步"]})
            assert recalled.structured_content["memories"], recalled.content[0].text
        assert "Traceback" not in server.log()


# -- in process -----------------------------------------------------------------------------------------------
async def test_a_token_is_needed_and_checked(tmp_path, backend):
    # `pocketmem token create`, before the server starts
    async with serve_in_process(backend, tmp_path, "http") as server:
        alice = await server.create_token("alice", "laptop")
    async with serve_in_process(backend, tmp_path, "http") as server:
        assert "bearer token required" in server.log()
        missing = await post_initialize(server)
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer ")
        for wrong in ("nonsense", alice[:-1] + ("A" if alice[-1] != "A" else "B"), "pm_000000000000_" + "x" * 43):
            assert (await post_initialize(server, bearer(wrong))).status_code == 401, wrong
        assert (await post_initialize(server, {"authorization": f"Basic {alice}"})).status_code == 401
        assert (await post_initialize(server, bearer(alice))).status_code == 200

        for mode in ("legacy", "auto"):
            async with server.connect(alice, mode=mode) as client:
                await add(client, f"用户的猫叫小白 ({mode})")
        async with server.connect(alice) as client:
            assert await contents(client) == ["用户的猫叫小白 (auto)", "用户的猫叫小白 (legacy)"]

        await server.revoke_token(alice)
        assert (await post_initialize(server, bearer(alice))).status_code == 401  # at once, no restart
        assert server.errors == []


async def test_loopback_needs_no_token_until_the_first_one_exists(tmp_path, backend):
    async with serve_in_process(backend, tmp_path, "http", user="owner") as server:
        assert "no token needed until one is created" in server.log()
        async with server.connect() as client:
            await add(client, "用户喜欢爬山")
        # A token that is sent is checked even while none is needed.
        assert (await post_initialize(server, bearer("pm_0123456789ab_" + "y" * 43))).status_code == 401

        bob = await server.create_token("bob")
        assert (await post_initialize(server)).status_code == 401  # on as soon as a token exists
        async with server.connect(bob) as client:
            assert await contents(client) == []  # bob, not owner

        await server.revoke_token(bob)
        # Revoking the last token does not reopen the server: a token has existed, so one stays required.
        assert (await post_initialize(server)).status_code == 401
    async with serve_in_process(backend, tmp_path, "http", user="owner") as server:
        assert "a token existed before" in server.log() and "allow-anonymous" in server.log()
        assert (await post_initialize(server)).status_code == 401
        await server.allow_anonymous()
        async with server.connect() as client:  # the operator chose to open it again
            assert await contents(client) == ["用户喜欢爬山"]
        await server.create_token("carol")
        assert (await post_initialize(server)).status_code == 401  # a new token closes it again


async def test_stdio_acts_as_pocketmem_user_over_the_same_file(tmp_path, backend, make_settings):
    async with serve_in_process(backend, tmp_path, "http") as server:
        alice = await server.create_token("alice")
        bob = await server.create_token("bob")
        async with server.connect(alice) as client:
            await add(client, "alice: 用户对花生过敏")
        async with server.connect(bob) as client:
            await add(client, "bob: 用户在学日语")
    settings = make_settings(tmp_path, user="alice")
    async with PocketMem(settings) as app, Client(build_server(settings, app=app), mode="legacy") as client:
        assert await contents(client) == ["alice: 用户对花生过敏"]


async def test_sse_transport(tmp_path, backend):
    async with serve_in_process(backend, tmp_path, "sse") as server:
        alice = await server.create_token("alice")
        bob = await server.create_token("bob")
    async with serve_in_process(backend, tmp_path, "sse") as server:
        assert server.url.endswith("/sse")
        async with server.http() as http:
            assert (await http.get(server.url)).status_code == 401
            assert (await http.get(server.url, headers=bearer("pm_0123456789ab_" + "z" * 43))).status_code == 401
            assert (await http.post(server.base + "/messages/?session_id=00", json=INITIALIZE)).status_code == 401
        for mode in ("legacy", "auto"):
            async with server.connect(alice, mode=mode) as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                assert len(tools) == 11
                await add(client, f"用户每天早上跑步 {mode}")
                recalled = await client.call_tool("recall_memories", {"query": "跑步", "keywords": ["跑步"]})
                assert recalled.structured_content["memories"], recalled.content[0].text
        async with server.connect(bob) as client:
            assert await contents(client) == []
            recalled = await client.call_tool("recall_memories", {"query": "跑步", "keywords": ["跑步"]})
            assert recalled.structured_content["memories"] == []
        assert server.errors == []


async def test_dns_rebinding_protection_and_request_size_limit(tmp_path, backend):
    async with serve_in_process(backend, tmp_path, "http") as server:
        alice = await server.create_token("alice")
    async with serve_in_process(backend, tmp_path, "http", max_request_bytes=16384) as server:
        port = server.url.split(":")[2].split("/")[0]
        ok = await post_initialize(server, {**bearer(alice), "host": f"localhost:{port}"})
        assert ok.status_code == 200
        rebound = await post_initialize(server, {**bearer(alice), "host": f"attacker.example:{port}"})
        assert rebound.status_code == 421
        foreign = await post_initialize(server, {**bearer(alice), "origin": "http://attacker.example"})
        assert foreign.status_code == 403
        # The Origin and Host are parsed (scheme, host, numeric port), never matched by their start.
        own = await post_initialize(server, {**bearer(alice), "origin": f"http://127.0.0.1:{port}"})
        assert own.status_code == 200
        for origin in (f"http://127.0.0.1:{port}.evil.example", f"http://127.0.0.1:{port}@evil.example",
                       "http://127.0.0.1:evil.example", f"http://localhost:{port}/path", "null"):
            hostile = await post_initialize(server, {**bearer(alice), "origin": origin})
            assert hostile.status_code == 403, origin
        for host in (f"127.0.0.1:{port}.evil.example", f"127.0.0.1:{port}@evil.example", "localhost:evil.example"):
            hostile = await post_initialize(server, {**bearer(alice), "host": host})
            assert hostile.status_code == 421, host
        big = dict(INITIALIZE, params={**INITIALIZE["params"], "padding": "x" * 20_000})
        too_big = await post_initialize(server, bearer(alice), json.dumps(big).encode())
        assert too_big.status_code == 413

        async with server.connect(alice) as client:
            long = await client.call_tool("add_memory", {"content": "长" * 2001})
            assert long.is_error and "limit is 2000" in long.content[0].text
            assert await contents(client) == []


def test_the_command_line_refuses_unsafe_hosts_and_auth_modes(home, capsys):
    def cli(*args: str):
        return run_cli(capsys, home, *args)

    refused = cli("serve", "--transport", "http", "--host", "0.0.0.0", "--allowed-host", "memory.test")
    assert refused.returncode == 2
    assert "without authentication" in refused.stderr and "pocketmem token create" in refused.stderr
    refused = cli("serve", "--transport", "http", "--auth", "token")
    assert refused.returncode == 2 and "no token exists yet" in refused.stderr
    stdio = cli("serve", "--auth", "none")
    assert stdio.returncode == 2 and "http or sse" in stdio.stderr

    assert cli("token", "create", "--user", "alice").returncode == 0
    no_names = cli("serve", "--transport", "http", "--host", "0.0.0.0")
    assert no_names.returncode == 2 and "--allowed-host" in no_names.stderr
    unsafe = cli("serve", "--transport", "http", "--host", "0.0.0.0", "--auth", "none", "--allowed-host", "x")
    assert unsafe.returncode == 2 and "--auth none is for a loopback host" in unsafe.stderr
    proxied = cli("serve", "--transport", "http", "--auth", "none", "--allowed-host", "memory.example.com")
    assert proxied.returncode == 2 and "refusing --auth none on memory.example.com" in proxied.stderr


async def test_a_wildcard_host_needs_tokens_and_allowed_hosts(tmp_path, backend):
    with pytest.raises(ConfigError, match="without authentication"):
        async with serve_in_process(backend, tmp_path, "http", host="0.0.0.0", allowed_hosts=("memory.test",)):
            pass
    async with serve_in_process(backend, tmp_path, "http") as server:
        token = await server.create_token("alice")
    async with serve_in_process(backend, tmp_path, "http", host="0.0.0.0", allowed_hosts=("memory.test",)) as server:
        url = server.url.replace("0.0.0.0", "127.0.0.1")
        assert "bearer token required" in server.log()
        async with server.http() as http:

            async def initialize(headers: dict[str, str] | None = None) -> int:
                answer = await http.post(url, json=INITIALIZE, headers={**JSON_HEADERS, **(headers or {})})
                return answer.status_code

            assert await initialize() == 401
            assert await initialize(bearer(token)) == 200
            port = url.split(":")[2].split("/")[0]
            assert await initialize({**bearer(token), "host": f"memory.test:{port}"}) == 200
            assert await initialize({**bearer(token), "host": f"other.test:{port}"}) == 421


async def test_auth_modes_on_loopback(tmp_path, backend):
    async with serve_in_process(backend, tmp_path, "http") as server:
        alice = await server.create_token("alice")
    async with serve_in_process(backend, tmp_path, "http", auth=AuthMode.none, user="owner") as server:
        assert (await post_initialize(server)).status_code == 200  # tokens exist, but --auth none
        assert (await post_initialize(server, bearer(alice + "x"))).status_code == 401
        async with server.connect() as client:
            await add(client, "owner: 用户住在杭州")
        async with server.connect(alice) as client:
            assert await contents(client) == []


def test_token_commands_store_only_a_hash(home, capsys):
    created = run_cli(capsys, home, "token", "create", "--user", "alice", "--name", "phone")
    assert created.returncode == 0 and "shown only this once" in created.stderr
    token = created.stdout.strip()
    assert token.startswith("pm_") and len(token) > 50
    token_id = token.split("_")[1]

    listed = run_cli(capsys, home, "token", "list", "--json")
    rows = json.loads(listed.stdout)
    assert [(r["id"], r["user_id"], r["name"], r["revoked_at"]) for r in rows] == [(token_id, "alice", "phone", None)]
    assert token not in listed.stdout and "hash" not in listed.stdout
    assert token_id in run_cli(capsys, home, "token", "list").stdout

    secret = token.split("_", 2)[2].encode()
    for path in (home / "memory.db", home / "memory.db-wal"):
        if path.exists():
            assert secret not in path.read_bytes()
    with sqlite3.connect(home / "memory.db") as db:
        (stored,) = db.execute("select token_hash from api_tokens").fetchone()
    import hashlib

    assert stored == hashlib.sha256(token.encode()).hexdigest()

    assert run_cli(capsys, home, "token", "revoke", token_id).returncode == 0
    assert json.loads(run_cli(capsys, home, "token", "list", "--json").stdout) == []
    assert json.loads(run_cli(capsys, home, "token", "list", "--all", "--json").stdout)[0]["revoked_at"] is not None
    unknown = run_cli(capsys, home, "token", "revoke", "ffffffffffff")
    assert unknown.returncode == 2 and "no token with id" in unknown.stderr
    bad_user = run_cli(capsys, home, "token", "create", "--user", "bad user!")
    assert bad_user.returncode == 2 and "user:" in bad_user.stderr


async def test_malformed_requests_get_clean_errors(tmp_path, backend):
    """Broken JSON, bad bytes, lone surrogates, NaN / infinity: an error answer each, no crash, nothing stored."""
    async with serve_in_process(backend, tmp_path, "http") as server:
        async with server.http() as http:
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
            # No tool takes a user id; one smuggled in is refused by name and nothing is written.
            answer = await http.post(
                server.url, content=call(20, '{"content":"ok","user_id":"alice"}'), headers=session
            )
            assert '"isError":true' in answer.text and "user_id is not an argument of this tool" in answer.text
            await http.post(server.url, content=call(21, '{"content":"ok"}'), headers=session)
        async with server.connect() as client:
            assert await contents(client) == ["ok"]
        alice = await server.create_token("alice")
        async with server.connect(alice) as client:
            assert await contents(client) == []
        assert server.errors == []


async def subscribed_session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """A stateful session opened and subscribed to memory://memories: its request headers."""
    opened = await http.post(url, json=INITIALIZE, headers=JSON_HEADERS)
    assert opened.status_code == 200, opened.text
    session = {**JSON_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    subscribed = await http.post(url, headers=session, json={
        "jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": "memory://memories"}})
    assert subscribed.status_code == 200
    return session


class UpdateStream:
    """The session's GET event stream: the resource updates heard on it, and an event set at the first."""

    def __init__(self, http: httpx2.AsyncClient, url: str, session: dict[str, str]) -> None:
        self.http, self.url, self.session = http, url, session
        self.heard: list[str] = []
        self.first = anyio.Event()

    async def listen(self) -> None:
        headers = {**self.session, "accept": "text/event-stream"}
        async with self.http.stream("GET", self.url, headers=headers, timeout=None) as stream:
            assert stream.status_code == 200
            async for line in stream.aiter_lines():
                if line.startswith("data:") and "notifications/resources/updated" in line:
                    self.heard.append(line)
                    self.first.set()


@pytest.mark.slow
async def test_the_first_token_ends_the_event_streams_opened_without_one(home, backend):
    """On loopback with no token yet, a session opened without one subscribes to memory://memories; from the
    first `token create` on every request needs a token, and that session's stream ends and hears nothing more."""
    with ServerProcess(backend, home, "http") as server:
        async with httpx2.AsyncClient(timeout=30) as http:
            session = await subscribed_session(http, server.url)
            events = UpdateStream(http, server.url, session)

            with anyio.fail_after(60):  # the task group ends when the stream does: the server closes it
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(events.listen)
                    async with connect(server.url) as other:  # a second client, also without a token
                        while not events.first.is_set():
                            await add(other, "周五去杭州")
                            await anyio.sleep(0.2)
                    token = create_token(backend, home, "global", "laptop")
                    before = len(events.heard)
                    async with connect(server.url, token) as laptop:
                        for n in range(3):
                            await add(laptop, f"买牛奶 {n}")
            assert events.heard[before:] == []
            refused = await http.post(server.url, headers=session, json={"jsonrpc": "2.0", "id": 3, "method": "ping"})
            assert refused.status_code in (401, 404)
        assert "Traceback" not in server.log()


@pytest.mark.slow
async def test_revoking_a_token_ends_its_open_event_stream_and_its_notifications(home, backend):
    """A stateful session's GET event stream, subscribed to memory://memories, opened with a token that is then
    revoked from another process: it hears nothing more of the user's writes, and the stream ends."""
    phone, laptop = create_token(backend, home, "carol", "phone"), create_token(backend, home, "carol", "laptop")
    with ServerProcess(backend, home, "http") as server:
        async with httpx2.AsyncClient(timeout=30, headers=bearer(phone)) as http:
            session = await subscribed_session(http, server.url)
            events = UpdateStream(http, server.url, session)

            with anyio.fail_after(60):  # the task group ends when the stream does: the server closes it
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(events.listen)
                    async with connect(server.url, laptop) as other:
                        while not events.first.is_set():  # the stream works: the laptop's writes are announced on it
                            await add(other, "carol 周五去杭州")
                            await anyio.sleep(0.2)
                        revoked = cli(backend, home, "token", "revoke", phone.split("_")[1])
                        assert revoked.returncode == 0, revoked.stderr
                        before = len(events.heard)
                        for n in range(3):
                            await add(other, f"carol 买牛奶 {n}")
            assert events.heard[before:] == []
        assert "Traceback" not in server.log()
