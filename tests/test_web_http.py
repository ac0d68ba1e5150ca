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

from .servers import ServerProcess, connect

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
