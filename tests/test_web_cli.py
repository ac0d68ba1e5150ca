"""`pocketmem ui` as a real process over real HTTP (the page's own server), and `pocketmem serve --transport http
--ui` through the same ASGI app in process (tests/asgi.py). On both backends where the store is used."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from pocketmem.web.server import mount_page

from .asgi import serve_in_process
from .helpers import Backend
from .servers import cli, run_cli, server_env

_ANNOUNCE = re.compile(r"memory management page at (http://\S+)/ui/memories")


def create_token(backend: Backend, home: Path, user: str) -> str:
    """`pocketmem token create` from this checkout (subprocesses get a minimal environment otherwise)."""
    out = cli(backend, home, "token", "create", "--user", user, PYTHONPATH=os.environ.get("PYTHONPATH", ""))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture
def ui_process(tmp_path: Path, backend: Backend) -> Iterator[tuple[str, Path]]:
    home = tmp_path / "home"
    home.mkdir()
    log_path = tmp_path / "ui.log"
    env = server_env(backend, home, PYTHONPATH=os.environ.get("PYTHONPATH", ""))
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pocketmem", "ui", "--no-browser"], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=log,
        )
    try:
        deadline = time.monotonic() + 60
        while not (found := _ANNOUNCE.search(log_path.read_text(errors="replace"))):
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.05)
        assert found.group(1).startswith("http://127.0.0.1:")
        yield found.group(1), home
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            assert proc.wait(timeout=15) in (0, 130)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.slow
@pytest.mark.backends
def test_ui_serves_the_local_user_until_a_token_exists(ui_process: tuple[str, Path], backend: Backend) -> None:
    url, home = ui_process
    with httpx2.Client(base_url=url) as http:
        root = http.get("/")
        assert root.status_code == 307 and root.headers["location"] == "/ui/memories"
        page = http.get("/ui/memories")
        assert page.status_code == 200 and 'id="user">global<' in page.text
        assert http.get("/ui/static/htmx.min.js").status_code == 200
        create_token(backend, home, "alice")
        again = http.get("/ui/memories")  # no restart: the next request needs a sign-in
        assert again.status_code == 303 and again.headers["location"] == "/ui/login"


@pytest.mark.slow
@pytest.mark.backends
def test_out_of_range_dates_and_an_oversized_sign_in_are_refused_pages(ui_process: tuple[str, Path]) -> None:
    url, home = ui_process
    with httpx2.Client(base_url=url) as http:
        for query, field in (("since=0999-01-01", "since"), ("until=9999-12-31", "until"),
                             ("until=0001-01-01", "until")):
            page = http.get(f"/ui/memories?{query}")
            assert page.status_code == 400 and f'id="error">{field}: must be between the years 1000' in page.text
        zh = http.get("/ui/memories?since=0999-01-01", headers={"Accept-Language": "zh-CN"})
        assert zh.status_code == 400 and "“起始日期”必须在 1000 年到 9000 年之间" in zh.text
        big = http.post("/ui/login", data={"token": "x" * 1_100_000}, headers={"Accept-Language": "zh-CN"})
        assert big.status_code == 413 and "字节的上限" in big.text
    assert "Traceback" not in (home.parent / "ui.log").read_text(errors="replace")


@pytest.mark.anyio
@pytest.mark.backends
async def test_serve_http_with_ui_mounts_the_page_beside_mcp(tmp_path: Path, backend: Backend) -> None:
    async with serve_in_process(backend, tmp_path, "http", mount=mount_page) as server:
        assert f"memory management page at {server.base}/ui/memories" in server.log()
        async with server.http() as http:
            page = await http.get("/ui/memories")
            assert page.status_code == 200 and "pocketmem" in page.text
            token = await server.create_token("bob")
            assert (await http.get("/ui/memories")).status_code == 303
            signed = await http.post("/ui/login", data={"token": token})
            assert signed.status_code == 303
            page = await http.get("/ui/memories")
            assert page.status_code == 200 and 'id="user">bob<' in page.text
            # The MCP endpoint is unchanged: still a bearer token per request.
            assert (await http.post("/mcp", json={})).status_code == 401
        assert server.errors == []


def test_ui_is_refused_on_stdio(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run_cli(capsys, tmp_path / "home", "serve", "--ui")
    assert out.returncode == 2 and "--ui apply to --transport http or sse" in out.stderr
