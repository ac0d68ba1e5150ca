"""The management page under `pocketmem serve --transport http --ui`, a real process on 127.0.0.1: what only a
real socket shows (a chunked body, counted as it arrives; the server's memory while it reads an upload) and the
transport's Host / Origin checks as the page's paths answer them."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx2
import pytest

from .servers import ServerProcess, connect, create_token

pytestmark = [pytest.mark.anyio]

MB = 1_000_000
FORM_LIMIT = MB  # web/app.py MAX_FORM_BYTES
IMPORT_LIMIT = 50 * MB  # MAX_IMPORT_BYTES
BOUNDARY = "pocketmem-test-boundary"


@pytest.fixture
def page_server(tmp_path: Path, backend) -> Iterator[ServerProcess]:
    with ServerProcess(backend, tmp_path / "home", "http", "--ui") as server:
        yield server


async def chunked(*parts: bytes, filler: bytes = b"", size: int = 0) -> AsyncIterator[bytes]:
    """`parts[0]`, then `size` bytes of `filler` a megabyte at a time, then the other parts: a body sent with
    Transfer-Encoding: chunked, so no Content-Length tells its size."""
    yield parts[0]
    block = filler * (MB // len(filler)) if filler else b""
    sent = 0
    while sent < size:
        piece = block[: size - sent]
        sent += len(piece)
        yield piece
    for part in parts[1:]:
        yield part


def file_part(fields: dict[str, str], name: str) -> bytes:
    """A multipart body's text fields, then the head of a file part named `name` (its bytes follow)."""
    head = "".join(f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
                   for k, v in fields.items())
    head += (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"; filename="in.jsonl"\r\n'
             "Content-Type: application/octet-stream\r\n\r\n")
    return head.encode()


MULTIPART = {"content-type": f"multipart/form-data; boundary={BOUNDARY}"}
END = f"\r\n--{BOUNDARY}--\r\n".encode()


def memory_use(pid: int) -> tuple[int, int]:
    """The process's resident memory now and its peak since the last `reset_peak`, in bytes (/proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    kb = {key: int(value.split()[0]) for key, value in re.findall(r"^(VmRSS|VmHWM):\s+(.+)$", status, re.M)}
    return kb["VmRSS"] * 1024, kb["VmHWM"] * 1024


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again from VmRSS


def csrf_of(page: httpx2.Response) -> str:
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
    assert found, page.text[:500]
    return found.group(1)


@pytest.mark.slow
async def test_a_chunked_body_is_counted_and_an_import_is_read_from_disk(page_server: ServerProcess):
    server = page_server
    assert server.proc is not None
    pid = server.proc.pid
    async with connect(server.url) as client:  # the local user, no token yet
        added = await client.call_tool("add_memory", {"content": "用户住在杭州"})
        assert not added.is_error
    async with httpx2.AsyncClient(base_url=server.base, timeout=120) as http:
        csrf = csrf_of(await http.get("/ui/memories"))

        # A sign-in form past 1 MB with no Content-Length: refused once the count passes the limit, in the page's
        # language, whether the form is url-encoded or multipart with a file in it.
        too_large = f"超过了 {FORM_LIMIT:,} 字节的上限"
        for language, said in (("zh-CN", too_large), ("en", f"form: is larger than {FORM_LIMIT} bytes")):
            form = await http.post("/ui/login", content=chunked(b"token=", filler=b"x", size=3 * MB),
                                   headers={"content-type": "application/x-www-form-urlencoded",
                                            "accept-language": language})
            assert form.status_code == 413 and said in form.text, form.text[-300:]
        upload = await http.post("/ui/login", content=chunked(file_part({"token": "x"}, "file"), END,
                                                              filler=b"A", size=3 * MB),
                                 headers={**MULTIPART, "accept-language": "zh-CN"})
        assert upload.status_code == 413 and too_large in upload.text and "pocketmem_ui" not in upload.cookies

        # An import within 50 MB is read a line at a time from disk: the server's memory does not grow with it.
        rows = [json.loads(line) for line in (await http.get("/ui/export.jsonl")).text.splitlines()]
        memory = next(r for r in rows if r["type"] == "memory")

        def row(n: int, content: str) -> bytes:
            return (json.dumps({**memory, "id": f"{n:032x}", "content": content}, ensure_ascii=False) + "\n").encode()

        header = json.dumps(rows[0]).encode() + b"\n"
        blank = b" " * 999 + b"\n"  # lines an export may hold between records: skipped

        async def import_(first: int, size: int) -> tuple[httpx2.Response, int]:
            """An import of two memories `size` bytes apart, and how far it took the server's memory past before."""
            rss, _ = memory_use(pid)
            reset_peak(pid)
            done = await http.post("/ui/import", content=chunked(
                file_part({"csrf": csrf}, "file") + header + row(first, f"用户的猫叫小白{first}"),
                row(first + 1, f"用户在学吉他{first}") + END, filler=blank, size=size), headers=MULTIPART)
            return done, memory_use(pid)[1] - rss

        await import_(1, MB)  # the first import loads what importing needs, whatever the file's size
        done, grown = await import_(3, 45 * MB)
        assert done.status_code == 200 and 'id="import-report"' in done.text, done.text[-500:]
        assert grown < 25 * MB, f"reading a 45 MB import grew the server by {grown // MB} MB"  # 134-178 MB held whole
        listed = await http.get("/ui/memories")
        assert "用户的猫叫小白3" in listed.text and "用户在学吉他3" in listed.text

        # Past 50 MB, chunked: refused as it arrives, and nothing of it is imported.
        too_big = await http.post("/ui/import", content=chunked(
            file_part({"csrf": csrf}, "file") + header + row(5, "用户对花生过敏"), END,
            filler=blank, size=IMPORT_LIMIT), headers={**MULTIPART, "accept-language": "zh-CN"})
        assert too_big.status_code == 413 and f"超过了 {IMPORT_LIMIT:,} 字节的上限" in too_big.text
        assert "用户对花生过敏" not in (await http.get("/ui/memories")).text
    assert "Traceback" not in server.log()


async def test_refusals_on_the_pages_paths_speak_its_language_and_an_origin_names_the_port(
    page_server: ServerProcess,
):
    server = page_server
    port = server.base.rsplit(":", 1)[1]
    zh = {"accept-language": "zh-CN,zh;q=0.9"}
    async with httpx2.AsyncClient(base_url=server.base, timeout=30) as http:
        csrf = csrf_of(await http.get("/ui/memories"))
        for path in ("/ui/memories", "/ui/login", "/ui/static/htmx.min.js"):
            host = await http.get(path, headers={**zh, "host": f"attacker.example:{port}"})
            assert (host.status_code, host.text) == (421, "pocketmem：本服务器不响应这个主机名"), path
            assert host.headers["content-language"] == "zh"
            origin = await http.get(path, headers={**zh, "origin": "http://attacker.example"})
            assert (origin.status_code, origin.text) == (403, "pocketmem：这个请求来自其他网站"), path
            assert origin.headers["content-language"] == "zh"
        english = await http.get("/ui/memories?lang=en", headers={"host": "attacker.example"})
        assert (english.status_code, english.text) == (421, "pocketmem: this server does not answer to that host name")
        # /mcp keeps its own words.
        mcp = await http.post("/mcp", json={}, headers={**zh, "host": "attacker.example"})
        assert (mcp.status_code, mcp.text) == (421, "Invalid Host header")

        # An Origin names this server on the port the request was sent to; another port is another site.
        for origin, status in ((f"http://127.0.0.1:{port}", 303), (f"http://localhost:{port}", 303),
                               ("http://127.0.0.1:1", 403), ("http://127.0.0.1", 403)):
            posted = await http.post("/ui/profile", data={"csrf": csrf, "identity.name": f"小林{status}"},
                                     headers={**zh, "origin": origin})
            assert posted.status_code == status, (origin, posted.text[:200])
            mcp = await http.post("/mcp", json={}, headers={"origin": origin})
            assert (mcp.status_code == 403) == (status == 403), (origin, mcp.status_code)
        page = await http.get("/ui/profile")
        assert "小林303" in page.text and "小林403" not in page.text


async def latest_event(http: httpx2.AsyncClient) -> int:
    live = await http.get("/ui/live?after=0")
    found = re.search(r'live\?after=(\d+)"', live.text)
    assert found, live.text
    return int(found.group(1))


async def test_a_profile_post_with_no_profile_field_changes_nothing(page_server: ServerProcess):
    async with httpx2.AsyncClient(base_url=page_server.base, timeout=30) as http:
        csrf = csrf_of(await http.get("/ui/profile"))
        saved = await http.post("/ui/profile", data={"csrf": csrf, "identity.name": "小林"})  # a draft
        assert saved.headers["location"].endswith("/profile?msg=saved")
        before = await latest_event(http)
        for form in ({"csrf": csrf}, {"csrf": csrf, "identity.nickname": "Leo", "persona": "x", "name": "小王"},
                     {"csrf": csrf, "identity.name": "小林"}):  # the csrf alone, names not the profile's, the same
            posted = await http.post("/ui/profile", data=form)
            assert posted.status_code == 303 and posted.headers["location"].endswith("/profile?msg=unchanged"), form
        assert await latest_event(http) == before
        page = await http.get("/ui/profile?msg=unchanged&lang=en")
        assert "Nothing changed" in page.text and "小王" not in page.text and 'data-confirmed="no"' in page.text
        confirmed = await http.post("/ui/profile", data={"csrf": csrf, "confirm": "1"})
        assert confirmed.headers["location"].endswith("/profile?msg=profile_confirmed")  # confirming is a change
        assert await latest_event(http) > before


def revise_body(csrf: str, content: bytes) -> bytes:
    return b"csrf=" + csrf.encode() + b"&content=" + content


async def test_a_form_field_that_is_not_utf8_is_refused_naming_it(page_server: ServerProcess):
    """Bytes that are no text, sent percent-encoded, raw or in a multipart part: refused naming the field, in the
    page's language, and nothing stored (Starlette's parser stored U+FFFD or Latin-1 in their place); raw UTF-8
    is read as the text it is."""
    async with connect(page_server.url) as client:
        added = await client.call_tool("add_memory", {"content": "用户喜欢喝乌龙茶"})
    memory_id = added.structured_content["memory_id"]
    form = {"content-type": "application/x-www-form-urlencoded"}
    async with httpx2.AsyncClient(base_url=page_server.base, timeout=30) as http:
        csrf = csrf_of(await http.get("/ui/memories"))
        revise = f"/ui/memories/{memory_id}/revise"
        for content, language, said in (
            (b"%ED%A0%80%20Dave%20likes%20tea", "zh-CN",
             "“内容”不是 UTF-8 文本：里面有无法读成文字的字节；没有做任何更改"),
            (b"%FF%FE%20Dave%20likes%20tea", "en", "content: is not UTF-8 text: it holds bytes that are no character"),
            (b"\xff\xfe Dave likes tea", "en", "content: is not UTF-8 text"),
        ):
            posted = await http.post(revise, content=revise_body(csrf, content),
                                     headers={**form, "accept-language": language})
            assert posted.status_code == 400 and said in posted.text, (content, posted.text[-600:])
        parts = (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n{csrf}\r\n'
                 f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="content"\r\n\r\n').encode()
        posted = await http.post(revise, content=parts + b"\xff\xfe Dave likes tea" + END, headers=MULTIPART)
        assert posted.status_code == 400 and "content: is not UTF-8 text" in posted.text, posted.text[-600:]
        assert "Dave" not in (await http.get("/ui/memories")).text

        raw = await http.post(revise, content=revise_body(csrf, "用户喜欢喝红茶".encode()), headers=form)
        assert raw.status_code == 303 and raw.headers["location"].endswith("msg=saved"), raw.text[-300:]
    async with connect(page_server.url) as client:
        listed = await client.call_tool("list_memories", {})
    assert [m["content"] for m in listed.structured_content["items"]] == ["用户喜欢喝红茶"]
    assert "Traceback" not in page_server.log()


def cookie_of(response: httpx2.Response) -> tuple[str, str]:
    """The session cookie a sign-in set, and its Set-Cookie header."""
    header = response.headers.get("set-cookie", "")
    found = re.match(r"pocketmem_ui=([^;]+);", header)
    assert response.status_code == 303 and found, (response.status_code, header)
    return found.group(1), header


async def test_signing_out_ends_the_session_on_the_server(tmp_path: Path, backend):
    """A copy of the cookie (another service on 127.0.0.1 receives it: cookies are not kept apart by port) is
    refused once its session is signed out, also after a restart; a new sign-in works. A change posted by htmx
    without a session is a 401 too, and q=0 in Accept-Language means not Chinese."""
    home = tmp_path / "home"
    with ServerProcess(backend, home, "http", "--ui") as server:
        async with connect(server.url) as client:
            added = await client.call_tool("add_memory", {"content": "用户喜欢喝乌龙茶"})
        memory_id = added.structured_content["memory_id"]
        token = create_token(backend, home, "global")
        async with httpx2.AsyncClient(base_url=server.base, timeout=30) as http:
            for accept, lang in (("zh;q=0", "en"), ("zh-CN;q=0, en;q=0.1", "en"), ("en;q=0, zh;q=0.5", "zh-CN")):
                page = await http.get("/ui/login", headers={"accept-language": accept})
                assert f'<html lang="{lang}"' in page.text, accept
            htmx = await http.post(f"/ui/memories/{memory_id}/forget", data={"csrf": "x"},
                                   headers={"hx-request": "true", "accept-language": "zh"})
            assert (htmx.status_code, htmx.text) == (401, "pocketmem：请先登录")
            assert htmx.headers["hx-redirect"] == "/ui/login"  # htmx takes the person to the sign-in form

            copy, _ = cookie_of(await http.post("/ui/login", data={"token": token}))
            second, _ = cookie_of(await http.post("/ui/login", data={"token": token}))  # another browser
            assert (await http.get("/ui/memories")).status_code == 200
            signed_out = await http.post("/ui/logout")
            assert signed_out.status_code == 303 and 'pocketmem_ui=""' in signed_out.headers["set-cookie"]
        async with httpx2.AsyncClient(base_url=server.base, timeout=30) as replay:
            for cookie in (copy, second):
                jar = {"cookie": f"pocketmem_ui={cookie}"}
                assert (await replay.get("/ui/memories", headers=jar)).headers["location"] == "/ui/login"
                posted = await replay.post(f"/ui/memories/{memory_id}/forget", data={"csrf": "x"}, headers=jar)
                assert posted.status_code == 401
    with ServerProcess(backend, home, "http", "--ui") as server:
        async with httpx2.AsyncClient(base_url=server.base, timeout=30) as http:
            jar = {"cookie": f"pocketmem_ui={copy}"}
            assert (await http.get("/ui/memories", headers=jar)).status_code == 303
            fresh, _ = cookie_of(await http.post("/ui/login", data={"token": token}))
            page = await http.get("/ui/memories", headers={"cookie": f"pocketmem_ui={fresh}"})
            assert page.status_code == 200 and "用户喜欢喝乌龙茶" in page.text


async def test_the_cookie_is_secure_for_a_public_name_and_over_https(tmp_path: Path, backend):
    """Behind the documented proxy (a public --allowed-host), the cookie is Secure whether or not the proxy says
    https; X-Forwarded-Proto: https from loopback is honoured; plain http on 127.0.0.1 keeps a cookie it can use."""
    home = tmp_path / "home"
    token = create_token(backend, home, "global")
    with ServerProcess(backend, home, "http", "--ui", "--allowed-host", "memory.example.com",
                       "--allowed-host", "192.168.1.20") as server:
        port = server.base.rsplit(":", 1)[1]
        async with httpx2.AsyncClient(base_url=server.base, timeout=30) as http:
            for headers, secure in (({"host": "memory.example.com"}, True),
                                    ({"host": "memory.example.com", "x-forwarded-proto": "https"}, True),
                                    ({"x-forwarded-proto": "https"}, True),
                                    ({"host": f"192.168.1.20:{port}"}, False),
                                    ({}, False)):
                _, header = cookie_of(await http.post("/ui/login", data={"token": token}, headers=headers))
                assert ("; secure" in header.lower()) is secure, (headers, header)
                assert "httponly" in header.lower() and "samesite=strict" in header.lower()
            cookie, _ = cookie_of(await http.post("/ui/login", data={"token": token}))
            page = await http.get("/ui/memories", headers={"cookie": f"pocketmem_ui={cookie}"})
            assert page.status_code == 200
