"""pocketmem as real processes, for tests: the CLI, `serve --transport http|sse` on a free port, and a store
whose process was killed mid-write (`crashed_store`).

    with ServerProcess(backend, home, "http") as server:
        async with connect(server.url, token) as client:
            await client.call_tool(...)

The server is started with `--port 0` and announces its URL on stderr once it listens; stderr goes
to a file (``server.log``) so a full pipe can never stall it and a failing test can show it.

What starts pocketmem takes the test's `backend` (the `backend` fixture) first: on the PostgreSQL run the process
gets the test's database URL (`Backend.env`).
"""

from __future__ import annotations

import io
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

if TYPE_CHECKING:
    from .helpers import Backend

_ANNOUNCE = re.compile(r"pocketmem: MCP over .* at (http://\S+)")


SERVER_SOURCE = str(Path(__file__).resolve().parents[1] / "server")


def checkout_env() -> dict[str, str]:
    """PATH, and this checkout's code first: a child process runs the code under test, not whichever copy of
    pocketmem happens to be installed."""
    return {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": SERVER_SOURCE}


def server_env(backend: Backend, home: Path, **extra: str) -> dict[str, str]:
    # Hosts start servers with a minimal environment; give it only what pocketmem needs.
    return {
        **checkout_env(),
        "POCKETMEM_HOME": str(home),
        "POCKETMEM_TZ": "Asia/Shanghai",
        "POCKETMEM_EMBEDDER": "hash",  # as make_settings: tests of the default embedder pass their own
        # The package under test, when it is not the installed one (a checkout run with PYTHONPATH=server), made
        # absolute: a child started in another folder (cwd="/") would otherwise import whichever copy is installed.
        **({"PYTHONPATH": os.pathsep.join(map(os.path.abspath, os.environ["PYTHONPATH"].split(os.pathsep)))}
           if os.environ.get("PYTHONPATH") else {}),
        **backend.env(home),
        **extra,
    }


class RawStdio:
    """`pocketmem serve` driven by raw lines, as a host writes them: `send` a line (a newline is added), `reply`
    reads the next message out (30 s at most); `close` kills the server and returns its stderr."""

    def __init__(self, backend: Backend, home: Path) -> None:
        self.server = subprocess.Popen(
            [sys.executable, "-m", "pocketmem", "serve"], env=server_env(backend, home),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )

    def send(self, line: str | bytes) -> None:
        assert self.server.stdin is not None
        self.server.stdin.write((line if isinstance(line, bytes) else line.encode()) + b"\n")
        self.server.stdin.flush()

    def reply(self) -> dict[str, Any]:
        assert self.server.stdout is not None
        ready, _, _ = select.select([self.server.stdout], [], [], 30)
        assert ready, "no reply"
        return json.loads(self.server.stdout.readline())

    def handshake(self) -> None:
        self.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"},
        }}))
        assert self.reply()["id"] == 1
        self.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def close(self) -> bytes:
        self.server.kill()
        _, stderr = self.server.communicate(timeout=30)
        return stderr


def cli(backend: Backend, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pocketmem", *args],
        env=server_env(backend, home, **env),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def create_token(backend: Backend, home: Path, user: str, name: str | None = None) -> str:
    out = cli(backend, home, "token", "create", "--user", user, *(["--name", name] if name else []))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


class ServerProcess:
    def __init__(
        self, backend: Backend, home: Path, transport: str = "http", *args: str, env: dict[str, str] | None = None,
    ) -> None:
        self.backend = backend
        self.home = home
        self.transport = transport
        self.args = args
        self.env = env or {}
        home.mkdir(parents=True, exist_ok=True)
        self.log_path = home / f"server-{transport}-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, timeout: float = 60) -> ServerProcess:
        command = [sys.executable, "-m", "pocketmem", "serve", "--transport", self.transport, "--port", "0", *self.args]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                command, env=server_env(self.backend, self.home, **self.env), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=log,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = _ANNOUNCE.search(self.log())
            if found:
                self.url = found.group(1)
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"pocketmem serve exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"pocketmem serve did not start:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    @property
    def base(self) -> str:
        return self.url.rsplit("/", 1)[0]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def auth_headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@asynccontextmanager
async def connect(url: str, token: str | None = None, *, mode: str = "legacy", **kw: Any) -> AsyncIterator[Client]:
    """The official client over streamable HTTP (…/mcp) or SSE (…/sse), carrying the token."""
    if url.endswith("/sse"):
        async with Client(sse_client(url, headers=auth_headers(token)), mode=mode, **kw) as client:
            yield client
        return
    timeout = httpx2.Timeout(30, read=300)
    async with httpx2.AsyncClient(headers=auth_headers(token), timeout=timeout) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, **kw) as client:
            yield client


class _Terminal(io.StringIO):
    """An empty standard input that says it is a terminal (no MCP host on the other end)."""

    def isatty(self) -> bool:
        return True


def run_cli(capsys: Any, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`pocketmem ARGS` in this process (`cli.main`), for a command that returns at once: the same exit code,
    stdout and stderr as `cli()` without the cost of a new interpreter. Call it from a test that is not async
    (commands run their own event loop); the environment and the logging levels are put back afterwards."""
    import logging

    from pocketmem.cli import main

    variables = {"POCKETMEM_HOME": str(home), "POCKETMEM_TZ": "Asia/Shanghai", "POCKETMEM_EMBEDDER": "hash", **env}
    saved_env = {name: os.environ.get(name) for name in variables}
    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in list(logging.root.manager.loggerDict))]
    levels = [(logger, logger.level) for logger in loggers]
    capsys.readouterr()
    os.environ.update(variables)
    stdin, sys.stdin = sys.stdin, _Terminal()  # as typed at a prompt: a refused `serve` exits at once
    try:
        main(list(args))
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        sys.stdin = stdin
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for logger, level in levels:
            logger.setLevel(level)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["pocketmem", *args], code, out.out, out.err)


FACTS = ["用户喜欢吃苹果", "用户住在杭州", "用户的猫叫小白", "用户在学吉他", "用户对花生过敏"]


def crashed_store(backend: Backend, home: Path) -> None:
    """A store whose process was SIGKILLed: memory.db with its -wal and -shm left behind."""
    code = (
        "import asyncio, os\n"
        "from pocketmem.app import PocketMem\n"
        "from pocketmem.base.config import load_settings\n"
        "from pocketmem.service.writing.add_request import AddRequest\n"
        "async def main():\n"
        "    async with PocketMem(load_settings()) as app:\n"
        f"        for c in {FACTS!r}:\n"
        "            await app.writing.add('global', AddRequest(content=c))\n"
        "        os.kill(os.getpid(), 9)\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=server_env(backend, home), capture_output=True, timeout=120)
    assert done.returncode == -9, done.stderr
    assert (home / "memory.db-wal").exists()
