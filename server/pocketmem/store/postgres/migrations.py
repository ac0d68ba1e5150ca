"""Forward-only schema migrations of the PostgreSQL store, recorded in the database itself.

The same rules as the SQLite migrations (sqlite_migrations.py), with their own numbering: each
migration runs in one transaction together with its record, under an advisory lock so two servers
starting together never run one twice. The vector column gets its size, and its HNSW index, from
the embedder (`PostgresStore.prepare_vectors`). A database that records a migration this list does not
have was migrated by a newer pocketmem and is refused before anything is changed (NewerStore).

Keyword search: pocketmem splits text into terms itself (text.index_terms: Han characters and
pairs, stemmed Latin words), so no text-search configuration is involved. `lexemes` holds the
terms prefixed with the user id (`alice|香菜`), which makes a GIN lookup touch one user's rows only;
`memory_term_counts` keeps how many memories (of every user, as SQLite's fts5vocab counts) hold
each term, as rows of +1/-1 written by triggers (no hot row to wait on) and folded by `optimize()`.
The row with term '' counts the memories themselves.

Sync: `sync_txid` is the id of the transaction that last changed what sync carries (content,
scores, status, times...; not use counts or derived importance), so a reader can ask for what
changed after a snapshot (`pg_snapshot_xmin`), in commit order, whatever the clocks say.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from pocketmem.base.errors import NewerStore

Migration = Callable[[Any], Awaitable[None]]

MIGRATION_LOCK = 7_117_001  # pg_advisory_xact_lock key: one migrator at a time

# What sync carries: a change to any of these moves a row forward in the change order.
SYNCED_MEMORY_COLUMNS = (
    "content, category, keywords, emotion, info, persistence, confidence, source, source_ref, created_at, "
    "updated_at, valid_from, valid_until, status, deleted_at, purge_at, delete_reason, supersedes, expires_at, "
    "due_at, remind_at, completed_at, content_hash"
)


async def pg001_initial(conn: Any) -> None:
    await conn.execute(
        f"""
        create extension if not exists vector;

        create table store_meta (
            key text primary key,
            value text not null
        );
        create table users (
            user_id text primary key,
            display_name text,
            identity_confirmed boolean not null default false,
            persona text,
            created_at timestamptz not null,
            updated_at timestamptz not null
        );
        create table memories (
            id text primary key,
            user_id text not null,
            content text not null,
            category text not null,
            keywords jsonb not null default '[]',
            emotion double precision not null,
            info double precision not null,
            persistence double precision not null,
            judge double precision not null,
            info_importance double precision not null,
            time_coef double precision not null,
            importance double precision not null,
            confidence double precision not null,
            source text,
            source_ref text,
            created_at timestamptz not null,
            updated_at timestamptz not null,
            valid_from timestamptz not null,
            valid_until timestamptz,
            last_active_at timestamptz,
            use_count integer not null default 0,
            status text not null check (status in ('active', 'superseded', 'trashed')),
            deleted_at timestamptz,
            purge_at timestamptz,
            delete_reason text,
            supersedes text,
            expires_at timestamptz,
            due_at timestamptz,
            remind_at timestamptz,
            completed_at timestamptz,
            content_hash text not null,
            embed_model text not null,
            embedding vector,
            terms text not null default '',
            keyword_terms text not null default '',
            lexemes tsvector not null default ''::tsvector,
            sync_txid bigint not null default 0,
            seq bigint generated always as identity  -- insertion order, for ties (SQLite's rowid)
        );
        -- A 512-dimension vector is 2 KB: by default PostgreSQL would move it out of line (TOAST), and every
        -- similarity would fetch it from there. Rows of up to a page keep it inline.
        alter table memories set (toast_tuple_target = 8160);
        alter table memories alter column embedding set storage main;
        create index memories_by_importance on memories (user_id, status, importance desc);
        create index memories_by_hash on memories (user_id, status, content_hash);
        create index memories_core on memories (user_id, status, persistence);
        create index memories_by_category on memories (user_id, category, status);
        create index memories_by_created on memories (user_id, status, created_at);
        create index memories_by_valid_from on memories (user_id, status, valid_from);
        create index memories_trash_purge on memories (purge_at) where status = 'trashed';
        create index memories_by_supersedes on memories (user_id, supersedes) where supersedes is not null;
        create index memories_open_todos on memories (user_id, (coalesce(remind_at, due_at)))
            where status = 'active' and category = 'todo' and completed_at is null;
        create index memories_expiring on memories (user_id, expires_at) where expires_at is not null;
        create index memories_lexemes on memories using gin (lexemes);
        create index memories_changes on memories (user_id, sync_txid, id);

        create table memory_term_counts (
            term text not null,
            delta integer not null
        );
        create index term_counts_by_term on memory_term_counts (term);

        create function pm_term_set(terms text, keyword_terms text) returns text[]
        language sql immutable as $$
            select coalesce(array_agg(distinct t), '{{}}')
            from unnest(string_to_array(terms || ' ' || keyword_terms, ' ')) t
            where t <> ''
        $$;

        create function pm_count_terms() returns trigger language plpgsql as $$
        begin
            if tg_op in ('DELETE', 'UPDATE') then
                insert into memory_term_counts (term, delta)
                select t, -1 from unnest(pm_term_set(old.terms, old.keyword_terms)) t;
            end if;
            if tg_op in ('INSERT', 'UPDATE') then
                insert into memory_term_counts (term, delta)
                select t, 1 from unnest(pm_term_set(new.terms, new.keyword_terms)) t;
            end if;
            if tg_op = 'INSERT' then
                insert into memory_term_counts (term, delta) values ('', 1);
            elsif tg_op = 'DELETE' then
                insert into memory_term_counts (term, delta) values ('', -1);
            end if;
            return null;
        end $$;
        create trigger memories_term_counts_insert after insert on memories
            for each row execute function pm_count_terms();
        create trigger memories_term_counts_delete after delete on memories
            for each row execute function pm_count_terms();
        create trigger memories_term_counts_update after update of terms, keyword_terms on memories
            for each row
            when (old.terms is distinct from new.terms or old.keyword_terms is distinct from new.keyword_terms)
            execute function pm_count_terms();

        -- Changes written with `set local pocketmem.quiet = 'on'` are copies of changes made elsewhere
        -- (a sync applying them): they do not move the row in the change order.
        create function pm_sync_txid() returns trigger language plpgsql as $$
        begin
            if coalesce(current_setting('pocketmem.quiet', true), '') <> 'on' then
                new.sync_txid := pg_current_xact_id()::text::bigint;
            elsif tg_op = 'UPDATE' then
                new.sync_txid := old.sync_txid;
            end if;
            return new;
        end $$;
        create trigger memories_sync_insert before insert on memories
            for each row execute function pm_sync_txid();
        create trigger memories_sync_update before update of {SYNCED_MEMORY_COLUMNS} on memories
            for each row when (({_prefixed("old")}) is distinct from ({_prefixed("new")}))
            execute function pm_sync_txid();

        create table memory_tombstones (
            tombstone_id text primary key,
            memory_id text not null,
            user_id text not null,
            deleted_at timestamptz not null,
            purge_at timestamptz,
            reason text not null,
            cloud_synced_at timestamptz,
            payload_hash text,
            restored_at timestamptz,
            purged_at timestamptz,
            sync_txid bigint not null default 0
        );
        create index tombstones_by_memory on memory_tombstones (user_id, memory_id);
        create index tombstones_changes on memory_tombstones (user_id, sync_txid, tombstone_id);
        create trigger tombstones_sync_insert before insert on memory_tombstones
            for each row execute function pm_sync_txid();
        create trigger tombstones_sync_update before update of restored_at, purged_at on memory_tombstones
            for each row when ((old.restored_at, old.purged_at) is distinct from (new.restored_at, new.purged_at))
            execute function pm_sync_txid();

        create table memory_revisions (
            id text primary key,
            memory_id text not null,
            user_id text not null,
            previous_content text not null,
            new_content text not null,
            mode text not null,
            reason text,
            created_at timestamptz not null,
            seq bigint generated always as identity
        );
        create index revisions_by_memory on memory_revisions (user_id, memory_id, created_at);

        create table memory_pending (
            id text primary key,
            user_id text not null,
            candidate jsonb not null,
            content_hash text not null,
            confidence double precision not null,
            status text not null check (status in ('pending', 'confirmed', 'rejected', 'snoozed')),
            cooldown_until timestamptz,
            memory_id text,
            created_at timestamptz not null,
            updated_at timestamptz not null,
            seq bigint generated always as identity
        );
        create index pending_by_status on memory_pending (user_id, status, created_at);
        create index pending_by_hash on memory_pending (user_id, content_hash);

        create table memory_events (
            id bigint generated by default as identity primary key,
            user_id text not null,
            kind text not null,
            memory_id text,
            operation_id text,
            payload jsonb not null default '{{}}',
            created_at timestamptz not null
        );
        create index events_by_user on memory_events (user_id, id);
        create index events_by_memory on memory_events (memory_id) where memory_id is not null;
        create index events_by_user_time on memory_events (user_id, created_at);

        create table memory_operations (
            user_id text not null,
            operation_id text not null,
            request_hash text not null,
            result jsonb not null,
            created_at timestamptz not null,
            primary key (user_id, operation_id)
        );

        create table memory_usage (
            user_id text not null,
            memory_id text not null,
            used_count integer not null default 0,
            last_used_at timestamptz,
            used_mark integer not null default 0,
            recalled_mark integer not null default 0,
            primary key (user_id, memory_id)
        );

        create table api_tokens (
            id text primary key,
            user_id text not null,
            name text,
            token_hash text not null,
            created_at timestamptz not null,
            last_used_at timestamptz,
            revoked_at timestamptz
        );
        create index api_tokens_by_user on api_tokens (user_id, created_at);
        """
    )


def _prefixed(alias: str) -> str:
    return ", ".join(f"{alias}.{column.strip()}" for column in SYNCED_MEMORY_COLUMNS.split(","))


async def pg002_user_scan(conn: Any) -> None:
    """One user's memories in id order, for maintenance's batched walk (no sort of the user's rows per batch)."""
    await conn.execute("create index if not exists memories_by_user_and_id on memories (user_id, id collate \"C\")")


async def pg003_user_terms(conn: Any) -> None:
    """Term counts per user (core.termstats), kept as +1/-1 rows by a trigger like memory_term_counts, and
    every memory's terms re-split by the segmenter and Snowball stemmer (core.text.index_terms)."""
    from pocketmem.core.text import indexed_text
    from pocketmem.store.postgres.records import lexemes

    await conn.execute(
        """
        create table memory_user_term_counts (
            user_id text not null,
            term text not null,
            delta integer not null
        );
        create index user_term_counts_by_term on memory_user_term_counts (user_id, term);
        insert into memory_user_term_counts (user_id, term, delta)
            select user_id, t, count(*) from memories, unnest(pm_term_set(terms, keyword_terms) || '{""}'::text[]) t
            group by user_id, t;
        create function pm_count_user_terms() returns trigger language plpgsql as $$
        begin
            if tg_op in ('DELETE', 'UPDATE') then
                insert into memory_user_term_counts (user_id, term, delta)
                select old.user_id, t, -1 from unnest(pm_term_set(old.terms, old.keyword_terms)) t;
            end if;
            if tg_op in ('INSERT', 'UPDATE') then
                insert into memory_user_term_counts (user_id, term, delta)
                select new.user_id, t, 1 from unnest(pm_term_set(new.terms, new.keyword_terms)) t;
            end if;
            if tg_op = 'INSERT' then
                insert into memory_user_term_counts (user_id, term, delta) values (new.user_id, '', 1);
            elsif tg_op = 'DELETE' then
                insert into memory_user_term_counts (user_id, term, delta) values (old.user_id, '', -1);
            end if;
            return null;
        end $$;
        create trigger memories_user_term_counts_insert after insert on memories
            for each row execute function pm_count_user_terms();
        create trigger memories_user_term_counts_delete after delete on memories
            for each row execute function pm_count_user_terms();
        create trigger memories_user_term_counts_update after update of terms, keyword_terms on memories
            for each row
            when (old.terms is distinct from new.terms or old.keyword_terms is distinct from new.keyword_terms)
            execute function pm_count_user_terms();
        """
    )
    cur = await conn.execute("select id, user_id, content, keywords from memories")
    rows = await cur.fetchall()
    for memory_id, user_id, content, keywords in rows:
        words = keywords if isinstance(keywords, list) else json.loads(keywords or "[]")
        terms, keyword_terms = indexed_text(content, words)
        await conn.execute(
            "update memories set terms = %s, keyword_terms = %s, lexemes = array_to_tsvector(%s::text[]) "
            "where id = %s and (terms is distinct from %s or keyword_terms is distinct from %s)",
            (terms, keyword_terms, lexemes(user_id, terms, keyword_terms), memory_id, terms, keyword_terms),
        )


async def pg006_profile(conn: Any) -> None:
    """The profile layer (docs/profile.md, "Storage"): as the SQLite m009_profile."""
    await conn.execute(
        """
        create table if not exists profiles (
            user_id text not null,
            section text not null,
            fields jsonb not null default '{}',
            updated_at timestamptz not null,
            primary key (user_id, section)
        );
        create table if not exists profile_revisions (
            id text primary key,
            user_id text not null,
            section text not null,
            previous jsonb not null,
            new jsonb not null,
            source text not null,
            created_at timestamptz not null,
            seq bigint generated always as identity
        );
        create index if not exists profile_revisions_by_user on profile_revisions (user_id, created_at);
        create table if not exists profile_files (
            user_id text not null,
            name text not null,
            written_text text not null,
            written_hash text not null,
            earlier jsonb not null default '[]',  -- texts written before it, newest first (a few)
            written_at timestamptz not null,
            primary key (user_id, name)
        );
        """
    )


async def pg004_use_index(conn: Any) -> None:
    """As the SQLite m007_use_index: the sort by uses and the most-recalled list read a page of this index."""
    await conn.execute(
        "create index if not exists memories_by_uses on memories (user_id, status, use_count, created_at, seq)"
    )


async def pg005_category_uses(conn: Any) -> None:
    """As the SQLite m011_category_uses: the Insights file's most-recalled lessons read a page of this index."""
    await conn.execute(
        "create index if not exists memories_by_category_uses on memories "
        "(user_id, status, category, use_count, created_at, seq)"
    )


async def pg007_schema_gaps(conn: Any) -> None:
    """pg006_profile was later given `profile_files.earlier`: a database that ran it before gets the column here.
    (Plain DDL, so opening a store needs no more privileges than before; `doctor` compares every column with a
    reference schema, schema_check.py, and `doctor --repair` adds any other.)"""
    await conn.execute("alter table profile_files add column if not exists earlier jsonb not null default '[]'")


async def pg008_chain_events(conn: Any) -> None:
    """As the SQLite m012_chain_events: the events of a version made current again get their own kind."""
    await conn.execute(
        "update memory_events set kind = 'current_again' where kind = 'updated' "
        "and payload ->> 'current_again' is not null"
    )


async def pg009_short_lived_not_core(conn: Any) -> None:
    """As the SQLite m013_short_lived_not_core: a todo, episode or context stored with persistence 1 by a release
    before the core rule gets its category's persistence, with a `rescored` event (store/sql/core_rule.py)."""
    from pocketmem.store.postgres.dialect import POSTGRES
    from pocketmem.store.sql import core_rule

    await core_rule.demote(conn, POSTGRES, datetime.now(UTC), by="migration pg009_short_lived_not_core")


async def pg010_forgotten_hash(conn: Any) -> None:
    """As the SQLite m015_forgotten_hash: a person's forget keeps the forgotten content's hash in its tombstone,
    taken from the memory's row for the tombstones written before, where the row is still there."""
    from pocketmem.store.sql.trash import FILL_FORGOTTEN_HASH

    await conn.execute("alter table memory_tombstones add column if not exists content_hash text")
    await conn.execute(FILL_FORGOTTEN_HASH)
    await conn.execute(
        "create index if not exists tombstones_by_content on memory_tombstones (user_id, content_hash) "
        "where content_hash is not null"
    )


MIGRATIONS: list[tuple[str, Migration]] = [
    ("pg001_initial", pg001_initial),
    ("pg002_user_scan", pg002_user_scan),
    ("pg003_user_terms", pg003_user_terms),
    ("pg006_profile", pg006_profile),
    ("pg004_use_index", pg004_use_index),
    ("pg005_category_uses", pg005_category_uses),
    ("pg007_schema_gaps", pg007_schema_gaps),
    ("pg008_chain_events", pg008_chain_events),
    ("pg009_short_lived_not_core", pg009_short_lived_not_core),
    ("pg010_forgotten_hash", pg010_forgotten_hash),
]


async def migrate(conn: Any) -> list[str]:
    """Apply what is missing (conn in autocommit mode); return the names applied now."""
    await conn.execute(
        "create table if not exists schema_migrations (name text primary key, applied_at timestamptz not null "
        "default now(), seq bigint generated always as identity)"
    )
    known = {name for name, _ in MIGRATIONS}
    if unknown := [name for name in await applied(conn) if name not in known]:
        raise NewerStore(unknown)
    newly: list[str] = []
    for name, fn in MIGRATIONS:
        async with conn.transaction():
            await conn.execute("select pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            cur = await conn.execute("select 1 from schema_migrations where name = %s", (name,))
            if await cur.fetchone() is None:
                await fn(conn)
                await conn.execute("insert into schema_migrations (name) values (%s)", (name,))
                newly.append(name)
    return newly


async def applied(conn: Any) -> list[str]:
    cur = await conn.execute("select name from schema_migrations order by seq")
    return [row[0] for row in await cur.fetchall()]
