"""A real PostgreSQL with pgvector for tests, from the `pgserver` package (both ship inside its wheel).

One server per test session, started on first use; every test gets a fresh database copied from
a template that already holds the schema. `Proxy` is a TCP proxy between pocketmem and that
server which a test can slow down or cut, to play a slow or failing network.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote

TEMPLATE = "pm_template"


class PgTestServer:
    """The session's server: `database()` hands out fresh databases by URL."""

    def __init__(self) -> None:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (as on CI) while pgserver imports.
            warnings.simplefilter("ignore")
            import pgserver

        self._dir = Path(tempfile.mkdtemp(prefix="pocketmem-pg-"))
        self.server = pgserver.get_server(self._dir / "data", cleanup_mode="delete")
        info = self.server.get_postmaster_info()
        self.socket_dir = str(info.socket_dir)
        self.port = int(info.port or 5432)
        self._names = itertools.count(1)
        # A test server: durability is not what is being tested, speed of CREATE DATABASE and commits is.
        self.psql(
            "alter system set fsync = off; alter system set synchronous_commit = off; "
            "alter system set full_page_writes = off; select pg_reload_conf();"
        )
        self.psql(f"create database {TEMPLATE};")
        self._migrate_template()

    @property
    def socket_path(self) -> str:
        return f"{self.socket_dir}/.s.PGSQL.{self.port}"

    def url(self, database: str, host: str | None = None, port: int | None = None) -> str:
        if host is not None:
            return f"postgresql://postgres@{host}:{port}/{database}"
        return f"postgresql://postgres@/{database}?host={quote(self.socket_dir)}&port={self.port}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        binary = Path(self._bin()) / "psql"
        out = subprocess.run(
            [str(binary), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", self.socket_dir, "-p", str(self.port),
             "-U", "postgres", "-d", database, "-At"],
            input=sql, capture_output=True, text=True, check=False, timeout=60,
        )
        if out.returncode != 0:
            raise RuntimeError(f"psql failed: {out.stderr}")
        return out.stdout

    @staticmethod
    def _bin() -> str:
        from pgserver._commands import POSTGRES_BIN_PATH

        return str(POSTGRES_BIN_PATH)

    def _migrate_template(self) -> None:
        from pocketmem.store.postgres.store import PostgresStore

        async def migrate() -> None:
            store = PostgresStore(self.url(TEMPLATE), pool_size=1)
            await store.open()
            await store.close()

        asyncio.run(migrate())
        # The built-in embedder's vector size and index, without naming an embedder (tests use several):
        # prepare_vectors then finds them in place instead of rebuilding them for every test database.
        self.psql(
            "alter table memories alter column embedding type vector(512); "
            "create index memories_embedding_hnsw on memories using hnsw (embedding vector_cosine_ops);",
            TEMPLATE,
        )
        import psycopg

        self._admin = psycopg.connect(self.url("postgres"), autocommit=True)

    def database(self) -> str:
        """A fresh database with the current schema; returns its name."""
        name = f"pm_test_{next(self._names)}"
        self._admin.execute(f"create database {name} template {TEMPLATE}")
        return name

    def drop(self, name: str) -> None:
        with contextlib.suppress(Exception):
            self._admin.execute(f"drop database if exists {name} with (force)")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._admin.close()
        with contextlib.suppress(Exception):
            self.server.cleanup()


class Proxy:
    """127.0.0.1:port -> the server's socket. `delay` slows every chunk; `cut()` drops every connection;
    `cut_after(n)` drops them once n bytes have gone from the server to the client."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.delay = 0.0
        self.refuse = False
        self._budget: int | None = None
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def __aenter__(self) -> Proxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.cut()
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    def cut(self) -> None:
        for writer in list(self._writers):
            with contextlib.suppress(Exception):
                writer.transport.abort()
        self._writers.clear()

    def cut_after(self, nbytes: int) -> None:
        self._budget = nbytes

    async def _handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self.refuse:
            client_writer.transport.abort()
            return
        try:
            server_reader, server_writer = await asyncio.open_unix_connection(self.socket_path)
        except OSError:
            client_writer.transport.abort()
            return
        self._writers.update({client_writer, server_writer})
        await asyncio.gather(
            self._pipe(client_reader, server_writer, count=False),
            self._pipe(server_reader, client_writer, count=True),
            return_exceptions=True,
        )
        for writer in (client_writer, server_writer):
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, count: bool) -> None:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            if self.delay:
                await asyncio.sleep(self.delay)
            if count and self._budget is not None:
                if len(chunk) >= self._budget:
                    self._budget = None
                    self.cut()
                    return
                self._budget -= len(chunk)
            writer.write(chunk)
            await writer.drain()
        with contextlib.suppress(Exception):
            writer.write_eof()
