"""pocketmem's own tokens and passwords inside URLs are screened; no argument value reaches the log at any
verbosity without POCKETMEM_LOG_CONTENT, the MCP SDK's own lines included."""

from __future__ import annotations

import json
import select
import subprocess
import sys

import pytest

from pocketmem.core.privacy import screen
from pocketmem.service.manage.tokens import TokenService
from pocketmem.service.writing.add_request import AddRequest

from .servers import checkout_env, server_env

pytestmark = [pytest.mark.anyio]

TOKEN = "pm_0123456789ab_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abc"
SECRET = "sk-proj-Zq8Xw3Vt6Ry1Pu4Ko7Lm0Nb2Hc5Jd9Fg"


@pytest.mark.parametrize(("text", "kept", "gone"), [
    (f"Authorization: Bearer {TOKEN}", "Authorization: Bearer [redacted API key]", TOKEN),
    (f"the server token is {TOKEN}, keep it", "the server token is [redacted API key], keep it", TOKEN),
    ("curl -H 'Authorization: Bearer 9f8e7d6c5b4a39281706f5e4' https://x", "Bearer [redacted API key]'",
     "9f8e7d6c5b4a39281706f5e4"),
    ("数据库 postgres://admin:DbPa55w0rd@db.internal:5432/app", "postgres://admin:【已隐去的密码】@db.internal",
     "DbPa55w0rd"),
    ("clone https://bot:ghs9aZ2@git.example.com/r.git", "https://bot:[redacted password]@git.example.com", "ghs9aZ2"),
    ("缓存在 redis://:pw@cache:6379 上", "redis://:【已隐去的密码】@cache:6379", "//:pw@"),
])
def test_pocketmem_tokens_bearer_headers_and_url_passwords_are_redacted(text, kept, gone):
    out = screen(text).text
    assert kept in out and gone not in out


@pytest.mark.parametrize("text", [
    "Bearer tokens are sent in the Authorization header", "the pm_ prefix marks pocketmem tokens",
    "see https://example.com/a:b@c for details", "mail me at https://user@example.com/x",
])
def test_talk_about_tokens_and_urls_is_left_alone(text):
    assert screen(text).text == text


async def test_a_real_pocketmem_token_in_a_memory_is_stored_redacted(app):
    token = (await TokenService(app.store, app.clock).create("alice", None)).token
    only = await app.writing.add("alice", AddRequest(content=f"用户的 pocketmem token 是 {token}"))
    assert only.status == "discarded" and only.reason == "secret"  # nothing but the secret: refused (privacy.md)
    result = await app.writing.add("alice", AddRequest(content=f"用户的 pocketmem token 是 {token}，给家里的 NAS 用"))
    stored = await app.get_memory("alice", result.memory_id)
    assert "NAS" in stored["content"]
    secret = token.split("_", 2)[2]  # pm_<id>_<secret>; the secret may hold "_" itself
    assert token not in stored["content"] and secret not in json.dumps(stored, ensure_ascii=False)


def serve_and_fail(backend, home, **env: str) -> str:
    """`pocketmem -vvv serve` over stdio, tool calls and a resource read that fail on a secret argument;
    the server's stderr."""
    home.mkdir(parents=True, exist_ok=True)
    err = home.parent / "stderr.txt"
    with err.open("w") as errlog:
        server = subprocess.Popen([sys.executable, "-m", "pocketmem", "-vvv", "serve"],
                                  env=server_env(backend, home, **env),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog)
        assert server.stdin is not None and server.stdout is not None

        def ask(number: int, method: str, params: dict) -> dict:
            server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
                               .encode() + b"\n")
            server.stdin.flush()
            assert select.select([server.stdout], [], [], 60)[0], "no reply"
            return json.loads(server.stdout.readline())

        try:
            ask(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                  "clientInfo": {"name": "raw", "version": "1"}})
            server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            calls = [("forget_memory", {"memory_id": SECRET}), ("add_memory", {"content": "x", "category": SECRET}),
                     ("patch_core_memory", {"memory_id": SECRET, "patch": SECRET}),
                     ("recall_memories", {"query": SECRET}), ("add_memory", {"content": f"my key {SECRET}"})]
            for number, (name, arguments) in enumerate(calls, 2):
                ask(number, "tools/call", {"name": name, "arguments": arguments})
            assert "error" in ask(9, "resources/read", {"uri": f"memory://memories/{SECRET}"})
        finally:
            server.stdin.close()
            server.wait(timeout=60)
            server.stdout.close()
    return err.read_text()


@pytest.mark.slow
def test_no_argument_value_reaches_the_log_at_vvv(tmp_path, backend):
    logged = serve_and_fail(backend, tmp_path / "home")
    assert "Tool 'forget_memory' failed" in logged  # the SDK's line is there, without the value
    assert SECRET[8:] not in logged
    shown = serve_and_fail(backend, tmp_path / "shown" / "home", POCKETMEM_LOG_CONTENT="1")
    assert SECRET in shown  # the operator asked for content: the same lines carry it


@pytest.mark.parametrize("name", ["密码", "password", "the password for", '"password"'])
def test_a_long_run_of_spaces_after_a_secrets_name_is_read_once(name):
    """A text as long as the largest content setting allows (100,000 characters), mostly whitespace after a
    password's name: the separators must not try every split of the run (that took minutes), so it is screened
    in a second or so; the limit here only tells a hang from an answer."""
    code = f"from pocketmem.core.privacy import screen; screen({name!r} + ' \\t' * 50_000 + 'x'); print('done')"
    out = subprocess.run([sys.executable, "-c", code], env=checkout_env(), capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "done", out.stderr


def test_texts_built_to_make_the_patterns_backtrack_are_screened_once():
    """As long as the largest content setting allows, each built to make a pattern retry from every character:
    a run of URL scheme characters (`a.a.a.…` was tried from each letter: minutes), repeated schemes, comparisons
    after a password's name, spelled numerals, key ids, digit groups. Each is screened in about a second; the
    limit here only tells a hang from an answer."""
    texts = [
        "'a.' * 50_000", "'a-' * 50_000", "'https://' * 12_500", "'https://' + 'a1' * 50_000",
        "'密码跟银行卡一样，' * 11_000", "'密码跟' * 33_000", "'密码还是原来那个 ' * 10_000",
        "'密码是' + '六个' * 50_000",
        "'密码' + '一' * 100_000", "'AKIAIOSFODNN7EXAMPLE ' * 4_700", "'AKIAIOSFODNN7EXAMPLE' + 'aB1/' * 25_000",
        "'1·' * 50_000", "'330106 1995 ' * 9_000",
    ]
    code = ("from pocketmem.core.privacy import screen\n"
            f"for text in [{', '.join(texts)}]:\n    screen(text)\nprint('done')")
    out = subprocess.run([sys.executable, "-c", code], env=checkout_env(), capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "done", out.stderr
