"""Who may connect over HTTP, decided from the host, the auth mode and the tokens (no server needed)."""

from __future__ import annotations

import pytest

from pocketmem.base.errors import ConfigError, InvalidInput, NotFound
from pocketmem.base.models import EventKind
from pocketmem.mcp.http import (
    AuthMode,
    StoreTokenVerifier,
    access_policy,
    is_loopback,
    transport_security,
)
from pocketmem.service.manage.tokens import Anonymous, TokenService, hash_token, token_id_of


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.53", True), ("::1", True), ("[::1]", True), ("localhost", True),
     ("LOCALHOST", True), ("localhost:8765", True), ("[::1]:8765", True), ("0.0.0.0", False), ("::", False),
     ("192.168.1.20", False), ("memory.example.com", False), ("localhost.evil.com", False), ("", False)],
)
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("host", "mode", "tokens", "allowed", "expect"),
    [
        ("127.0.0.1", AuthMode.auto, 0, (), Anonymous.until_first_token),
        ("127.0.0.1", AuthMode.auto, 3, (), Anonymous.until_first_token),  # re-checked per request
        ("127.0.0.1", AuthMode.token, 1, (), Anonymous.never),
        ("127.0.0.1", AuthMode.token, 0, (), "no token exists yet"),
        ("::1", AuthMode.none, 2, ("localhost",), Anonymous.always),
        ("0.0.0.0", AuthMode.auto, 1, ("memory.test",), Anonymous.never),
        ("0.0.0.0", AuthMode.auto, 0, ("memory.test",), "without authentication"),
        ("192.168.1.20", AuthMode.none, 1, (), "--auth none"),
        ("192.168.1.20", AuthMode.token, 1, (), Anonymous.never),
        # Behind a reverse proxy: bound to loopback, reached by a public name.
        ("127.0.0.1", AuthMode.auto, 0, ("memory.example.com",), "refusing to serve memory.example.com"),
        ("127.0.0.1", AuthMode.none, 1, ("memory.example.com",), "--auth none"),
        ("127.0.0.1", AuthMode.auto, 1, ("memory.example.com",), Anonymous.never),
    ],
)
def test_access_policy(host, mode, tokens, allowed, expect):
    if isinstance(expect, Anonymous):
        assert access_policy(host, mode, tokens, allowed) is expect
    else:
        with pytest.raises(ConfigError, match=expect.replace("-", "\\-")):
            access_policy(host, mode, tokens, allowed)


def test_dns_rebinding_protection_is_always_on():
    local = transport_security("127.0.0.1", ())
    assert local.host_ok("127.0.0.1:8765") and local.host_ok("localhost") and local.host_ok("[::1]:8765")
    assert not local.host_ok("memory.test") and not local.host_ok(None)
    proxied = transport_security("127.0.0.1", ("Memory.Test",))
    assert proxied.host_ok("memory.test") and proxied.host_ok("MEMORY.test:443")
    # An Origin names a served name on the port the request was sent to: the Host header's, or the scheme's default.
    assert proxied.origin_ok("https://memory.test", "memory.test") and proxied.origin_ok("https://memory.test:443",
                                                                                          "memory.test")
    assert proxied.origin_ok("http://memory.test:8080", "memory.test:8080")
    assert proxied.origin_ok("http://localhost:8765", "127.0.0.1:8765")  # both names of this server
    assert not proxied.origin_ok("https://memory.test:8443", "memory.test")
    assert not proxied.origin_ok("http://127.0.0.1:1", "127.0.0.1:8765")  # another service on this machine
    assert not proxied.origin_ok("http://127.0.0.1", "127.0.0.1:8765")
    assert not proxied.origin_ok("http://127.0.0.1:8765", None)
    assert proxied.origin_ok(None, "memory.test")  # a same-origin request sends none
    lan = transport_security("192.168.1.20", ())
    assert lan.names == {"192.168.1.20"}
    with pytest.raises(ConfigError, match="--allowed-host"):
        transport_security("0.0.0.0", ())
    with pytest.raises(ConfigError, match="without scheme or path"):
        transport_security("0.0.0.0", ("https://memory.test/",))


@pytest.mark.parametrize("origin", [
    "http://127.0.0.1:8765.evil.example", "http://127.0.0.1:8765@evil.example", "http://127.0.0.1:evil.example",
    "http://user:pw@127.0.0.1:8765", "http://127.0.0.1:8765/x", "ftp://127.0.0.1:8765", "null", "http://[::1",
    "http://127.0.0.1.evil.example",
])
def test_an_origin_is_parsed_never_prefix_matched(origin):
    served = transport_security("127.0.0.1", ())
    assert not served.origin_ok(origin, "127.0.0.1:8765")
    assert not served.host_ok(origin.removeprefix("http://"))


@pytest.mark.anyio
async def test_a_token_check_does_the_same_work_whether_its_id_exists_or_not(app, monkeypatch):
    """Timing must not tell which token ids exist: a garbage token, an unknown id and a known id with a wrong
    secret each cost one record lookup and one hash comparison (counted, not timed)."""
    from contextlib import asynccontextmanager

    from pocketmem.service.manage import tokens as token_module

    service = TokenService(app.store, app.clock)
    real = await service.create("alice")
    secret = real.token.split("_", 2)[2]
    work: list[str] = []
    real_read, real_hash = app.store.read, token_module.hash_token

    @asynccontextmanager
    async def counted_read():
        async with real_read() as reader:
            class Reader:
                async def get_token(self, token_id):
                    work.append("lookup")
                    return await reader.get_token(token_id)
            yield Reader()

    monkeypatch.setattr(service, "store", type("Store", (), {"read": staticmethod(counted_read)})())
    monkeypatch.setattr(token_module, "hash_token", lambda t: work.append("hash") or real_hash(t))
    for presented in ("garbage", "pm_\udcff" * 3, f"pm_{'0' * 12}_{secret}", f"pm_{real.record.id}_{secret[::-1]}"):
        work.clear()
        assert await service.verify(presented) is None, presented
        assert work == ["lookup", "hash"], presented


@pytest.mark.anyio
async def test_tokens_are_verified_by_hash_and_revoked_at_once(app):
    tokens = TokenService(app.store, app.clock)
    new = await tokens.create("alice", "phone")
    assert token_id_of(new.token) == new.record.id and new.record.token_hash == hash_token(new.token)
    verifier = StoreTokenVerifier(tokens)
    access = await verifier.verify_token(new.token)
    assert access is not None and access.subject == "alice" and access.client_id == f"pocketmem:{new.record.id}"
    other = await tokens.create("alice")
    assert (await verifier.verify_token(other.token)).client_id != access.client_id  # sessions are per token

    secret = new.token.split("_", 2)[2]
    for wrong in ("", "Bearer", new.token + "x", new.token[:-1], f"pm_{new.record.id}_{secret[::-1]}",
                  f"pm_{'0' * 12}_{secret}", new.token.upper(), "pm_" + "é" * 60, new.token * 5):
        assert await verifier.verify_token(wrong) is None, wrong

    assert (await tokens.list("alice"))[0].last_used_at is not None
    revoked = await tokens.revoke(new.record.id)
    assert revoked.revoked_at is not None
    assert await verifier.verify_token(new.token) is None
    assert (await tokens.revoke(new.record.id)).revoked_at == revoked.revoked_at  # twice is harmless
    assert [t.id for t in await tokens.list()] == [other.record.id]
    assert len(await tokens.list(include_revoked=True)) == 2
    async with app.store.read() as reader:
        kinds = [e.kind for e in await reader.list_events("alice", 10)]
    assert kinds.count(EventKind.token_created) == 2 and kinds.count(EventKind.token_revoked) == 1

    with pytest.raises(NotFound):
        await tokens.revoke("ffffffffffff")
    with pytest.raises(InvalidInput, match="user"):
        await tokens.create("bad user")
