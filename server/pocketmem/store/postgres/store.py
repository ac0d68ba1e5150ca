"""The PostgreSQL backend: PostgreSQL + pgvector through psycopg 3 and a connection pool.

For multi-user deployments (POCKETMEM_DATABASE_URL) and for the cloud library a local notebook
syncs with (POCKETMEM_CLOUD_URL). Every unit of work is one transaction; reads run in a
repeatable-read, read-only transaction (one consistent snapshot, like SQLite's WAL readers).
`write(durable=False)` commits with `synchronous_commit = off`: bookkeeping that may be lost in a
crash of the database server, never made inconsistent.

Needs the optional dependencies: pip install "pocketmem[postgres]".
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import anyio

from pocketmem.base.config import mask_url, redact, url_password
from pocketmem.base.errors import StoreError
from pocketmem.store.base import Store, keyword_rows_added
from pocketmem.store.postgres import instants_check, schema_check
from pocketmem.store.postgres import migrations as postgres_migrations
from pocketmem.store.postgres.dialect import POSTGRES
from pocketmem.store.postgres.records import lexemes
from pocketmem.store.postgres.tx import PostgresTx
from pocketmem.store.sql import core_rule

log = logging.getLogger(__name__)

DDL_LOCK = 7_117_003
CONNECT_TIMEOUT = 10.0
# HNSW candidates per query: more than pgvector's default 40, since recall filters by user and status.
EF_SEARCH = 100


def _import_driver() -> tuple[Any, Any]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise StoreError(
            'PostgreSQL support needs its driver: pip install "pocketmem[postgres]" (psycopg and psycopg-pool)'
        ) from exc
    return psycopg, psycopg_pool


async def _claim_vectors(tx: PostgresTx, embed_tag: str, dimensions: int) -> bool:
    """Inside a write transaction holding the DDL lock: the embedding column sized and indexed for `dimensions`, and
    `embed_tag` recorded as the embedder of the store's vectors, unless the store records another embedder, or none
    but keeps vectors (whose model no one can name): their vectors never mix with these, and nothing is done.
    Whether the store now records `embed_tag`."""
    stored = await tx.meta("embedder")
    if stored not in (None, embed_tag) or (stored is None and await tx.holds_vectors()):
        return False
    dims = int(dimensions)
    row = await tx.fetch_one(
        "select atttypmod from pg_attribute where attrelid = 'memories'::regclass and attname = 'embedding'"
    )
    if row[0] != dims:
        await tx.execute("drop index if exists memories_embedding_hnsw")
        # Vectors of another size cannot join the index (they are rewritten by reindex).
        await tx.execute("update memories set embedding = null where vector_dims(embedding) <> %s", (dims,))
        await tx.execute(f"alter table memories alter column embedding type vector({dims})")
    await tx.execute(
        "create index if not exists memories_embedding_hnsw on memories using hnsw (embedding vector_cosine_ops)"
    )
    await tx.put_meta("embedder", embed_tag)
    await tx.put_meta("dimensions", str(dims))
    return True


class PostgresStore(Store):
    def __init__(
        self, url: str, *, pool_size: int = 10, wait: bool = True, timeout: float = CONNECT_TIMEOUT,
        setting: str = "POCKETMEM_DATABASE_URL",
    ) -> None:
        """`wait=False` opens without waiting for the server (the cloud library may be down at start-up);
        queries then wait up to `timeout` seconds for a connection. `setting` names where the URL came from, in
        every error."""
        self.url = url
        self.label = mask_url(url)
        self.setting = setting
        self._pool_size = pool_size
        self._wait = wait
        self._timeout = timeout
        self._pool: Any = None
        self._vectors = False
        self._iterative_scan = False
        self._migrated = False
        self._prepare_lock = anyio.Lock()

    @property
    def vectors_available(self) -> bool:
        return self._vectors

    # -- lifetime ---------------------------------------------------------------------------------
    async def open(self) -> None:
        if self._pool is not None:
            return
        _, psycopg_pool = _import_driver()

        async def configure(conn: Any) -> None:
            await conn.set_autocommit(True)
            await conn.execute("set timezone to 'UTC'")
            await conn.execute(f"set hnsw.ef_search = {EF_SEARCH}")
            if self._iterative_scan:
                await conn.execute("set hnsw.iterative_scan = relaxed_order")

        _quiet_pool_log()
        self._pool = psycopg_pool.AsyncConnectionPool(
            self.url,
            connection_class=self._connection_class(),
            min_size=1,
            max_size=self._pool_size,
            open=False,
            configure=configure,
            # A connection the network dropped while it sat idle is replaced, not handed to a transaction.
            check=psycopg_pool.AsyncConnectionPool.check_connection,
            timeout=self._timeout,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(self._timeout))},
        )
        try:
            await self._pool.open(wait=self._wait, timeout=self._timeout)
            if self._wait:
                await self.ensure_ready()
        except Exception as exc:
            await self.close()
            if isinstance(exc, StoreError):
                raise
            raise self._failure(exc) from None

    async def ensure_ready(self) -> None:
        """Migrate and learn the vector state (once); for a store opened without waiting, at first use."""
        if self._migrated:
            return
        async with self._prepare_lock:
            if self._migrated:
                return
            try:
                await self._migrate()
            except _driver_errors() as exc:
                raise self._failure(exc) from None

    async def _migrate(self) -> None:
        async with self._require().connection() as conn:
            await postgres_migrations.migrate(conn)
            cur = await conn.execute("select extversion from pg_extension where extname = 'vector'")
            version = (await cur.fetchone())[0]
            cur = await conn.execute(
                "select 1 from pg_indexes where tablename = 'memories' and indexname = 'memories_embedding_hnsw'"
            )
            self._vectors = await cur.fetchone() is not None
        self._iterative_scan = tuple(int(p) for p in version.split(".")[:2]) >= (0, 8)
        self._migrated = True

    async def reconnect(self) -> None:
        """Drop every connection and start afresh (after the server was unreachable: the pool's own retries
        slow down over time; the caller has its own backoff)."""
        await self.close()
        await self.open()

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await pool.close()
            except Exception:  # closing must not hide the original error
                log.debug("error closing the PostgreSQL pool", exc_info=True)

    def _require(self) -> Any:
        if self._pool is None:
            raise StoreError("the store is not open")
        return self._pool

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        pool = self._require()
        try:
            if not self._migrated:
                await self.ensure_ready()
            async with pool.connection() as conn:
                yield conn
        except _driver_errors() as exc:
            raise self._failure(exc) from None

    def _connection_class(self) -> type:
        """psycopg's connection, keeping why the last attempt to connect failed (`connect_error`, its credentials
        hidden) until one succeeds: the pool itself only says it waited in vain."""
        _import_driver()
        import psycopg

        store = self

        class Connection(psycopg.AsyncConnection[Any]):
            @classmethod
            async def connect(cls, *args: Any, **kwargs: Any) -> Any:
                try:
                    conn = await super().connect(*args, **kwargs)
                except Exception as exc:
                    store.connect_error = _one_line(redact(str(exc), store.url)) or type(exc).__name__
                    log.debug("%s: connecting to %s failed: %s", store.setting, store.label, store.connect_error)
                    raise
                store.connect_error = None
                return conn

        return Connection

    def _failure(self, exc: BaseException) -> StoreError:
        """A driver or pool error as one line naming the setting, the server and the cause: for a pool that waited
        in vain, why the last attempt to connect failed (a wrong password, no such database, no TLS, ...)."""
        _, psycopg_pool = _import_driver()
        if isinstance(exc, psycopg_pool.PoolTimeout):
            cause = self.connect_error or f"no connection within {self._timeout:g} s (the server did not answer)"
        else:
            cause = _one_line(redact(str(exc), self.url)) or type(exc).__name__
        if any(c in url_password(self.url) for c in "/?#@ "):
            cause += "; a / ? # @ or space in the password must be percent-encoded in the URL (%2F %3F %23 %40 %20)"
        return StoreError(f"PostgreSQL at {self.label} ({self.setting}): {cause}")

    # -- transactions -----------------------------------------------------------------------------
    @asynccontextmanager
    async def read(self) -> AsyncIterator[PostgresTx]:
        async with self._connection() as conn:
            await conn.execute("begin isolation level repeatable read read only")
            try:
                yield PostgresTx(conn, writing=False, vectors=self._vectors)
            finally:
                with anyio.CancelScope(shield=True):
                    await _finish(conn, "rollback")

    @asynccontextmanager
    async def open_write(self, durable: bool = True) -> AsyncIterator[PostgresTx]:
        tx: PostgresTx | None = None
        async with self._connection() as conn:
            await conn.execute("begin")
            if not durable:
                await conn.execute("set local synchronous_commit = off")
            tx = PostgresTx(conn, writing=True, vectors=self._vectors)
            try:
                yield tx
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await _finish(conn, "rollback")
                raise
            # Shielded: once the unit of work is done, a cancelled request must not leave it half-committed.
            with anyio.CancelScope(shield=True):
                await conn.execute("commit")
        if tx is not None and tx.changes:
            await self._committed({user: frozenset(kinds) for user, kinds in tx.changes.items()})

    # -- meta and vectors -------------------------------------------------------------------------
    async def get_meta(self, key: str) -> str | None:
        async with self.read() as reader:
            return await reader.meta(key)

    async def set_meta(self, key: str, value: str) -> None:
        async with self.write() as tx:
            await tx.put_meta(key, value)

    async def claim_meta(self, key: str, value: str) -> str:
        async with self.open_write() as tx:
            await tx.execute(
                "insert into store_meta (key, value) values (%s, %s) on conflict (key) do nothing", (key, value)
            )
            row = await tx.fetch_one("select value from store_meta where key = %s", (key,))
        return str(row[0])

    async def prepare_vectors(self, embed_tag: str, dimensions: int) -> None:
        async with self.open_write() as tx:
            await tx.execute("select pg_advisory_xact_lock(%s)", (DDL_LOCK,))
            claimed = await _claim_vectors(tx, embed_tag, dimensions)
        self._vectors = self._vectors or claimed

    async def rebuild_vectors(self, embed_tag: str, dimensions: int, replacing: str | None, run: str) -> bool:
        async with self.open_write() as tx:
            await tx.execute("select pg_advisory_xact_lock(%s)", (DDL_LOCK,))
            if replacing != embed_tag and await tx.meta("embedder") == embed_tag:
                return False
            await tx.put_meta("reembed", run)
            await tx.execute("drop index if exists memories_embedding_hnsw")
            await tx.execute("update memories set embedding = null")
            await tx.execute("alter table memories alter column embedding type vector")
            await tx.execute(
                "delete from store_meta where key in ('embedder', 'dimensions') or key like %s", ("calibration:%",)
            )
            await _claim_vectors(tx, embed_tag, dimensions)
        self._vectors = True
        return True

    async def optimize(self) -> None:
        """Fold the keyword counters' +1/-1 rows into one row per term."""
        async with self.open_write() as tx:
            await tx.execute(
                "with busy as (select term from memory_term_counts group by term having count(*) > 1), "
                "gone as (delete from memory_term_counts c using busy "
                "where c.term = busy.term returning c.term, c.delta) "
                "insert into memory_term_counts (term, delta) select term, sum(delta) from gone group by term "
                "having sum(delta) <> 0"
            )
            await tx.execute(
                "with busy as (select user_id, term from memory_user_term_counts group by user_id, term "
                "having count(*) > 1), gone as (delete from memory_user_term_counts c using busy "
                "where c.user_id = busy.user_id and c.term = busy.term returning c.user_id, c.term, c.delta) "
                "insert into memory_user_term_counts (user_id, term, delta) select user_id, term, sum(delta) "
                "from gone group by user_id, term having sum(delta) <> 0"
            )

    async def check_instants(self, *, repair: bool = False, now: datetime | None = None) -> list[dict[str, Any]]:
        """Stored times outside the supported years; with repair, clamped into them."""
        if not repair:
            async with self.read() as reader:
                return await instants_check.check(reader, repair=False)
        async with self.write() as tx:
            return await instants_check.check(tx, repair=True)

    async def schema_problems(self) -> list[str]:
        """Columns the migrations define that the database lacks (schema_check.py), one line each."""
        async with self._require().connection() as conn, conn.transaction():
            found = await schema_check.missing_columns(conn)
        return [
            f"column {table}.{column} is missing (added with its default value): run `pocketmem doctor --repair`"
            for table, column, _ in found
        ]

    async def repair_schema(self) -> list[str]:
        async with self._require().connection() as conn, conn.transaction():
            await conn.execute("select pg_advisory_xact_lock(%s)", (postgres_migrations.MIGRATION_LOCK,))
            return await schema_check.add_missing_columns(conn)

    async def apply_core_rule(self, now: datetime) -> list[str]:
        async with self._require().connection() as conn, conn.transaction():
            return await core_rule.demote(conn, POSTGRES, now, by="doctor --repair")

    async def mend_indexes(self) -> list[str]:
        """Lexemes for the memories that have terms but none (a hand edit): rebuilt from the stored terms."""
        async with self.open_write() as tx:
            rows = await tx.fetch_all(
                "select user_id, id, terms, keyword_terms from memories where lexemes = ''::tsvector and terms <> ''"
            )
            for user_id, memory_id, terms, keyword_terms in rows:
                await tx.execute(
                    "update memories set lexemes = array_to_tsvector(%s::text[]) where user_id = %s and id = %s",
                    (lexemes(user_id, terms, keyword_terms), user_id, memory_id),
                )
        return [keyword_rows_added(len(rows))] if rows else []

    async def health(self) -> dict[str, Any]:
        async with self.read() as reader:
            memories = (await reader.fetch_one("select count(*) from memories"))[0]
            vectors = (await reader.fetch_one("select count(*) from memories where embedding is not null"))[0]
            lexeme_gaps = (
                await reader.fetch_one("select count(*) from memories where lexemes = ''::tsvector and terms <> ''")
            )[0]
            counted = (
                await reader.fetch_one("select coalesce(sum(delta), 0) from memory_term_counts where term = ''")
            )[0]
            migrations = await postgres_migrations.applied(reader.connection)
            where, params = core_rule.forbidden(POSTGRES)
            short_lived_core = (await reader.fetch_one(f"select count(*) from memories where {where}", params))[0]
            version = (await reader.fetch_one("select current_setting('server_version')"))[0]
        return {
            "integrity": "ok",
            "backend": "postgresql",
            "server_version": version,
            "memories": memories,
            "keyword_rows": memories - lexeme_gaps,
            # A memory's lexemes live on its own row: none can outlive it.
            "keyword_orphans": 0,
            "keyword_gaps": lexeme_gaps,
            "vector_rows": vectors,
            "vector_mismatches": 0 if self._vectors else None,
            "count_mismatches": int(counted) - memories,
            "bad_vectors": 0,  # pgvector refuses a vector of another size or kind on writing
            "short_lived_core": short_lived_core,
            "vectors_available": self._vectors,
            "schema": migrations[-1] if migrations else None,
            "schema_current": {name for name, _ in postgres_migrations.MIGRATIONS} <= set(migrations),
        }


async def _finish(conn: Any, statement: str) -> None:
    try:
        await conn.execute(statement)
    except Exception:  # a broken connection is discarded by the pool
        log.debug("%s failed", statement, exc_info=True)


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _QuietPool(logging.Filter):
    """psycopg.pool warns of every failed attempt to connect, with the driver's words, which may quote a password it
    could not parse; the store says why itself, once, naming the setting (`PostgresStore.connect_error`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("error connecting in"):
            return False
        record.msg, record.args = redact(record.getMessage()), ()
        return True


def _quiet_pool_log() -> None:
    pool_log = logging.getLogger("psycopg.pool")
    if not any(isinstance(f, _QuietPool) for f in pool_log.filters):
        pool_log.addFilter(_QuietPool())


def _driver_errors() -> tuple[type[BaseException], ...]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError:  # pragma: no cover
        return ()
    return (psycopg.OperationalError, psycopg_pool.PoolTimeout)
