"""A store a newer pocketmem migrated (its schema_migrations names a migration this release does not know) is
refused by every way in, the server, the CLI and the doctor, with one message saying to upgrade, and nothing in it
is changed: not even a migration this release would apply. Both backends."""

from __future__ import annotations

import hashlib
import re

import pytest

from pocketmem.app import PocketMem
from pocketmem.base.errors import NewerStore
from pocketmem.store.postgres import migrations as postgres_migrations
from pocketmem.store.sqlite import migrations as sqlite_migrations

from .helpers import a_store, doctor
from .servers import cli

pytestmark = [pytest.mark.anyio, pytest.mark.backends]

REFUSED = "this store was last opened by a newer pocketmem (migration {}); upgrade pocketmem"


async def newer_store(settings, backend) -> tuple[str, str]:
    """A store whose records name a future migration and lack this release's latest one; (future, latest)."""
    await a_store(settings)
    migrations = postgres_migrations if backend.name == "postgres" else sqlite_migrations
    future, latest = f"{'pg' if backend.name == 'postgres' else 'm'}099_future", migrations.MIGRATIONS[-1][0]
    async with PocketMem(settings) as app, app.store.write() as tx:
        marks = "%s" if backend.name == "postgres" else "?"
        await tx.execute(f"delete from schema_migrations where name = {marks}", (latest,))
        if backend.name == "postgres":
            await tx.execute("insert into schema_migrations (name) values (%s)", (future,))
        else:
            await tx.execute("insert into schema_migrations (name, applied_at) values (?, '2030-01-01')", (future,))
    return future, latest


async def recorded(settings) -> list[str]:
    """The store's migration records, read without opening it through pocketmem."""
    if settings.database_url is not None:
        import psycopg

        async with await psycopg.AsyncConnection.connect(settings.database_url.get_secret_value()) as conn:
            cur = await conn.execute("select name from schema_migrations order by seq")
            return [row[0] for row in await cur.fetchall()]
    from pocketmem.store.sqlite.driver import connect

    conn = connect(str(settings.db_path), load_vectors=False)
    try:
        return [row[0] for row in conn.execute("select name from schema_migrations order by rowid")]
    finally:
        conn.close()


def fingerprint(settings) -> str:
    return hashlib.sha256(settings.db_path.read_bytes()).hexdigest() if settings.database_url is None else ""


async def test_the_app_the_doctor_and_the_cli_refuse_a_store_a_newer_release_migrated(settings, backend, capsys):
    future, latest = await newer_store(settings, backend)
    before, file_before = await recorded(settings), fingerprint(settings)
    with pytest.raises(NewerStore, match=re.escape(REFUSED.format(future))):
        async with PocketMem(settings):
            pass
    code, report = await doctor(settings, capsys)
    assert code == 1 and not report["ok"]
    assert report["problems"] == [REFUSED.format(future) + " to use it"]
    for args in (["list"], ["serve"], ["doctor"]):
        out = cli(backend, settings.home, *args)
        assert out.returncode != 0 and REFUSED.format(future) in out.stdout + out.stderr, (args, out)
    assert await recorded(settings) == before and latest not in before and future in before
    assert fingerprint(settings) == file_before
