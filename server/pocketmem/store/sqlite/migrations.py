"""Forward-only schema migrations of the SQLite store, recorded in the file itself.

Each migration is a numbered function; old ones are never edited. `migrate` applies the missing
ones in order, each inside one transaction together with its record, so a crash leaves the file
at the previous version, never half-way. The vector index is not here: its size depends on the
embedder and is created by the store (`prepare_vectors`); a change of its form is still recorded
here (m014), so the rule below covers it.

A file that records a migration this list does not have was opened by a newer pocketmem: `refuse_newer`
stops before anything is changed (NewerStore), so an older release never writes into a schema it does not
know, nor says the store is fine.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import aiosqlite

from pocketmem.base.errors import NewerStore

Migration = Callable[[aiosqlite.Connection], Awaitable[None]]


async def m001_initial(db: aiosqlite.Connection) -> None:
    await _run_script(
        db,
        """
        create table store_meta (
            key text primary key,
            value text not null
        );
        create table users (
            user_id text primary key,
            display_name text,
            identity_confirmed integer not null default 0,
            persona text,
            created_at text not null,
            updated_at text not null
        );
        create table memories (
            rowid integer primary key,
            id text not null unique,
            user_id text not null,
            content text not null,
            category text not null,
            keywords text not null default '[]',
            emotion real not null,
            info real not null,
            persistence real not null,
            judge real not null,
            info_importance real not null,
            time_coef real not null,
            importance real not null,
            confidence real not null,
            source text,
            source_ref text,
            created_at text not null,
            updated_at text not null,
            valid_from text not null,
            valid_until text,
            last_active_at text,
            use_count integer not null default 0,
            status text not null check (status in ('active', 'superseded', 'trashed')),
            deleted_at text,
            purge_at text,
            delete_reason text,
            supersedes text,
            expires_at text,
            due_at text,
            remind_at text,
            completed_at text,
            content_hash text not null,
            embed_model text not null,
            embedding blob
        );
        create index memories_by_importance on memories (user_id, status, importance desc);
        create index memories_by_hash on memories (user_id, status, content_hash);
        create index memories_core on memories (user_id, status, persistence);
        create index memories_by_category on memories (user_id, category, status);
        create index memories_by_created on memories (user_id, status, created_at);
        create index memories_by_valid_from on memories (user_id, status, valid_from);
        create index memories_trash_purge on memories (purge_at) where status = 'trashed';
        create index memories_by_supersedes on memories (supersedes) where supersedes is not null;

        -- Active memories per user, kept by triggers: the cap is checked after every write, and
        -- counting index entries would cost O(n) each time.
        create table memory_counts (
            user_id text primary key,
            active integer not null default 0
        );
        create trigger memories_count_insert after insert on memories when new.status = 'active'
        begin
            insert into memory_counts (user_id, active) values (new.user_id, 1)
            on conflict (user_id) do update set active = active + 1;
        end;
        create trigger memories_count_delete after delete on memories when old.status = 'active'
        begin
            update memory_counts set active = active - 1 where user_id = old.user_id;
        end;
        create trigger memories_count_status after update of status on memories when old.status != new.status
        begin
            update memory_counts set active = active + (new.status = 'active') - (old.status = 'active')
            where user_id = new.user_id;
        end;

        -- rowid = memories.rowid; terms are pre-split by pocketmem (Han characters and pairs, words)
        create virtual table memories_fts using fts5 (terms, keywords, tokenize = 'unicode61 remove_diacritics 2');
        create virtual table memories_fts_vocab using fts5vocab (memories_fts, row);

        create table memory_tombstones (
            tombstone_id text primary key,
            memory_id text not null,
            user_id text not null,
            deleted_at text not null,
            purge_at text,
            reason text not null,
            cloud_synced_at text,
            payload_hash text,
            restored_at text
        );
        create index tombstones_by_memory on memory_tombstones (user_id, memory_id);

        create table memory_revisions (
            id text primary key,
            memory_id text not null,
            user_id text not null,
            previous_content text not null,
            new_content text not null,
            mode text not null,
            reason text,
            created_at text not null
        );
        create index revisions_by_memory on memory_revisions (user_id, memory_id, created_at);

        create table memory_pending (
            id text primary key,
            user_id text not null,
            candidate text not null,
            content_hash text not null,
            confidence real not null,
            status text not null check (status in ('pending', 'confirmed', 'rejected', 'snoozed')),
            cooldown_until text,
            memory_id text,
            created_at text not null,
            updated_at text not null
        );
        create index pending_by_status on memory_pending (user_id, status, created_at);
        create index pending_by_hash on memory_pending (user_id, content_hash);

        create table memory_events (
            id integer primary key,
            user_id text not null,
            kind text not null,
            memory_id text,
            operation_id text,
            payload text not null default '{}',
            created_at text not null
        );
        create index events_by_user on memory_events (user_id, id);
        create index events_by_memory on memory_events (memory_id) where memory_id is not null;

        create table memory_operations (
            user_id text not null,
            operation_id text not null,
            request_hash text not null,
            result text not null,
            created_at text not null,
            primary key (user_id, operation_id)
        );
        """
    )


async def m002_maintenance(db: aiosqlite.Connection) -> None:
    """Purged tombstones, usage counters for review, and indexes for expiry and open todos."""
    await _run_script(
        db,
        """
        alter table memory_tombstones add column purged_at text;

        create table memory_usage (
            user_id text not null,
            memory_id text not null,
            used_count integer not null default 0,
            last_used_at text,
            used_mark integer not null default 0,
            recalled_mark integer not null default 0,
            primary key (user_id, memory_id)
        );

        -- reminders on every recall: one range scan over the user's open todos
        create index memories_open_todos on memories (user_id, coalesce(remind_at, due_at))
            where status = 'active' and category = 'todo' and completed_at is null;
        create index memories_expiring on memories (user_id, expires_at) where expires_at is not null;
        create index events_by_user_time on memory_events (user_id, created_at);
        """
    )


async def _run_script(db: aiosqlite.Connection, script: str) -> None:
    """Statement by statement: executescript() would COMMIT the migration's transaction early."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        # complete_statement understands trigger bodies (BEGIN ... END) and semicolons in strings.
        if sqlite3.complete_statement(statement):
            await db.execute(statement)
            statement = ""
    if statement.strip():
        raise ValueError(f"incomplete SQL statement in migration: {statement.strip()[:80]}")


async def m003_tokens(db: aiosqlite.Connection) -> None:
    # Bearer tokens of the network transports. Only a hash of each token is kept; `id` is the public
    # part of the token (`pm_<id>_<secret>`), so a presented token is found without scanning.
    await _run_script(
        db,
        """
        create table api_tokens (
            id text primary key,
            user_id text not null,
            name text,
            token_hash text not null,
            created_at text not null,
            last_used_at text,
            revoked_at text
        );
        create index api_tokens_by_user on api_tokens (user_id, created_at);
        """
    )


# What sync carries (see store/base.py): a change to any of these moves a memory forward in the change order.
SYNCED_MEMORY_COLUMNS = (
    "content", "category", "keywords", "emotion", "info", "persistence", "confidence", "source", "source_ref",
    "created_at", "updated_at", "valid_from", "valid_until", "status", "deleted_at", "purge_at", "delete_reason",
    "supersedes", "expires_at", "due_at", "remind_at", "completed_at", "content_hash",
)


async def m004_sync(db: aiosqlite.Connection) -> None:
    """Change order for sync: a counter bumped by triggers in commit order (SQLite has one writer).

    `sync_clock.quiet = 1` (set by a sync applying changes made elsewhere, inside its transaction)
    keeps those copies out of the order, so they are not sent back.
    """
    changed = " or ".join(f"old.{c} is not new.{c}" for c in SYNCED_MEMORY_COLUMNS)
    bump = "update sync_clock set seq = seq + 1;"
    await _run_script(
        db,
        f"""
        alter table memories add column sync_seq integer not null default 0;
        alter table memory_tombstones add column sync_seq integer not null default 0;
        create table sync_clock (
            id integer primary key check (id = 1),
            seq integer not null,
            quiet integer not null default 0
        );
        insert into sync_clock (id, seq) values (1, 0);
        create index memories_changes on memories (user_id, sync_seq, id);
        create index tombstones_changes on memory_tombstones (user_id, sync_seq, tombstone_id);

        create trigger memories_sync_insert after insert on memories
        when (select quiet from sync_clock) = 0
        begin
            {bump}
            update memories set sync_seq = (select seq from sync_clock) where rowid = new.rowid;
        end;
        create trigger memories_sync_update after update of {", ".join(SYNCED_MEMORY_COLUMNS)} on memories
        when (select quiet from sync_clock) = 0 and ({changed})
        begin
            {bump}
            update memories set sync_seq = (select seq from sync_clock) where rowid = new.rowid;
        end;
        create trigger tombstones_sync_insert after insert on memory_tombstones
        when (select quiet from sync_clock) = 0
        begin
            {bump}
            update memory_tombstones set sync_seq = (select seq from sync_clock) where rowid = new.rowid;
        end;
        create trigger tombstones_sync_update after update of restored_at, purged_at on memory_tombstones
        when (select quiet from sync_clock) = 0
            and (old.restored_at is not new.restored_at or old.purged_at is not new.purged_at)
        begin
            {bump}
            update memory_tombstones set sync_seq = (select seq from sync_clock) where rowid = new.rowid;
        end;
        """,
    )


async def m005_lookup_indexes(db: aiosqlite.Connection) -> None:
    """Two narrow indexes for large stores. memories_by_user_and_id: one user's memories in id order, which
    maintenance walks in batches (without it every batch sorted all of the user's rows). memories_owner:
    (user_id, status, rowid), so keyword search checks who owns each match without reading the wide row."""
    await _run_script(
        db,
        """
        create index memories_by_user_and_id on memories (user_id, id);
        create index memories_owner on memories (user_id, status);
        """,
    )


async def m006_user_terms(db: aiosqlite.Connection) -> None:
    """Term counts per user (core.termstats) and the keyword index re-split by the segmenter and Snowball
    stemmer (core.text.index_terms): every memory's index row is rewritten from its stored content and
    keywords, and user_terms is counted from the rewritten rows. No memory row changes."""
    from pocketmem.core.text import indexed_text
    from pocketmem.store.types import IndexedText, term_deltas

    await _run_script(
        db,
        """
        create table user_terms (
            user_id text not null,
            term text not null,
            docs integer not null,
            primary key (user_id, term)
        ) without rowid;
        """,
    )
    counts: dict[tuple[str, str], int] = {}
    cursor = await db.execute("select rowid, user_id, content, keywords from memories")
    while batch := await cursor.fetchmany(500):
        rows = []
        for rowid, user_id, content, keywords in batch:
            terms, keyword_terms = indexed_text(content, json.loads(keywords or "[]"))
            rows.append((terms, keyword_terms, rowid))
            for term in term_deltas(None, IndexedText(terms=terms, keyword_terms=keyword_terms)):
                counts[(user_id, term)] = counts.get((user_id, term), 0) + 1
        await db.executemany("update memories_fts set terms = ?, keywords = ? where rowid = ?", rows)
    await cursor.close()
    await db.executemany(
        "insert into user_terms (user_id, term, docs) values (?, ?, ?)",
        [(user_id, term, n) for (user_id, term), n in counts.items()],
    )


async def m009_profile(db: aiosqlite.Connection) -> None:
    """The profile layer (docs/profile.md, "Storage"). `profiles`: a user's persona and identity, one row per
    section, fields as JSON. `profile_revisions`: every change of a section keeps the previous fields.
    `profile_files`: the text pocketmem last wrote to each Markdown file (and a few before it), so a person's edit
    is told apart from its own writing, even when made in a copy opened before the last write."""
    await _run_script(
        db,
        """
        create table profiles (
            user_id text not null,
            section text not null,
            fields text not null default '{}',
            updated_at text not null,
            primary key (user_id, section)
        );
        create table profile_revisions (
            id text primary key,
            user_id text not null,
            section text not null,
            previous text not null,
            new text not null,
            source text not null,
            created_at text not null
        );
        create index profile_revisions_by_user on profile_revisions (user_id, created_at);
        create table profile_files (
            user_id text not null,
            name text not null,
            written_text text not null,
            written_hash text not null,
            earlier text not null default '[]',  -- texts written before it, newest first (a few)
            written_at text not null,
            primary key (user_id, name)
        );
        """,
    )


async def m007_use_index(db: aiosqlite.Connection) -> None:
    """One user's memories of a status by use_count, newest first among equals: the management page's sort by
    uses and the insights page's most-recalled list read a page of this index instead of every row."""
    await _run_script(
        db, "create index if not exists memories_by_uses on memories (user_id, status, use_count, created_at);"
    )


async def m010_schema_gaps(db: aiosqlite.Connection) -> None:
    """What a store made by an early release lacks although its migrations are recorded: m001 was later given
    `memory_counts` with its triggers and the indexes memories_core, memories_by_valid_from and a wider
    memories_by_hash; m009 was later given `profile_files.earlier`. Every object the migrations before this one
    define is created where missing (or redefined), every column they define is added where missing, and the
    derived tables are filled from the memories (schema_check.py)."""
    from pocketmem.store.sqlite import schema_check

    await schema_check.repair(db, upto="m010_schema_gaps")


async def m011_category_uses(db: aiosqlite.Connection) -> None:
    """One user's memories of a category by use_count, newest first among equals: the Insights file's
    most-recalled lessons, rendered after every write, read a page of this index instead of sorting every
    lesson (a cost that grew with the store)."""
    await _run_script(
        db,
        "create index if not exists memories_by_category_uses on memories "
        "(user_id, status, category, use_count, created_at);",
    )


async def m012_chain_events(db: aiosqlite.Connection) -> None:
    """A version made current again when the one that replaced it was forgotten was logged as `updated` with
    `current_again` in its payload, the kind of the memory that replaces another; it has a kind of its own,
    `current_again` (base/models.py EventKind), and those logged before are given it."""
    await db.execute(
        "update memory_events set kind = 'current_again' where kind = 'updated' "
        "and (case when json_valid(payload) then json_extract(payload, '$.current_again') end) is not null"
    )


async def m013_short_lived_not_core(db: aiosqlite.Connection) -> None:
    """Releases before the core rule stored todos, episodes and contexts with persistence 1: each gets the
    persistence a new write of its category gets, with a `rescored` event (store/sql/core_rule.py)."""
    from pocketmem.store.sql import core_rule
    from pocketmem.store.sqlite.dialect import SQLITE

    await core_rule.demote(db, SQLITE, datetime.now(UTC), by="migration m013_short_lived_not_core")


async def m014_binary_vector_index(db: aiosqlite.Connection) -> None:
    """The vector index holds each vector's signs (`bit[n]`, store/sqlite/tx.py `create_vector_index`) where it
    held the floats (`float[n]`); a release before that cannot write into it. The change was made without a
    record: this one marks the files opened since, so an older release that checks the records refuses them. The
    index itself is rebuilt by the store when it opens (it needs sqlite-vec and the store's vector size), which
    also turns back a float index an older release made after this one."""


async def m015_forgotten_hash(db: aiosqlite.Connection) -> None:
    """A person's forget keeps the forgotten content's hash in its tombstone (`content_hash`, never the text), so it
    outlives the purge; the tombstones written before take it from their memory's row where it is still there (in
    the trash). A memory purged before this has nothing left to take it from (store/sql/trash.py)."""
    from pocketmem.store.sql.trash import FILL_FORGOTTEN_HASH

    await db.execute("alter table memory_tombstones add column content_hash text")
    await db.execute(FILL_FORGOTTEN_HASH)
    await db.execute(
        "create index if not exists tombstones_by_content on memory_tombstones (user_id, content_hash) "
        "where content_hash is not null"
    )


MIGRATIONS: list[tuple[str, Migration]] = [
    ("m001_initial", m001_initial),
    ("m002_maintenance", m002_maintenance),
    ("m003_tokens", m003_tokens),
    ("m004_sync", m004_sync),
    ("m005_lookup_indexes", m005_lookup_indexes),
    ("m006_user_terms", m006_user_terms),
    ("m009_profile", m009_profile),
    ("m007_use_index", m007_use_index),
    ("m010_schema_gaps", m010_schema_gaps),
    ("m011_category_uses", m011_category_uses),
    ("m012_chain_events", m012_chain_events),
    ("m013_short_lived_not_core", m013_short_lived_not_core),
    ("m014_binary_vector_index", m014_binary_vector_index),
    ("m015_forgotten_hash", m015_forgotten_hash),
]


async def applied(db: aiosqlite.Connection) -> list[str]:
    await db.execute(
        "create table if not exists schema_migrations (name text primary key, applied_at text not null)"
    )
    rows = await db.execute_fetchall("select name from schema_migrations order by rowid")
    return [row[0] for row in rows]


async def refuse_newer(db: aiosqlite.Connection) -> None:
    """NewerStore when the file records a migration this release does not know; reads only."""
    if not list(await db.execute_fetchall("select 1 from sqlite_master where name = 'schema_migrations'")):
        return
    known = {name for name, _ in MIGRATIONS}
    rows = await db.execute_fetchall("select name from schema_migrations order by rowid")
    if unknown := [row[0] for row in rows if row[0] not in known]:
        raise NewerStore(unknown)


async def migrate(db: aiosqlite.Connection) -> list[str]:
    """Apply what is missing; return the names applied now."""
    await refuse_newer(db)
    done = set(await applied(db))
    newly: list[str] = []
    for name, fn in MIGRATIONS:
        if name in done:
            continue
        await db.execute("begin immediate")
        try:
            # Another process may have migrated while we waited for the lock.
            rows = await db.execute_fetchall("select 1 from schema_migrations where name = ?", (name,))
            if not rows:
                await fn(db)
                await db.execute(
                    "insert into schema_migrations (name, applied_at) values (?, ?)",
                    (name, datetime.now(UTC).isoformat()),
                )
                newly.append(name)
            await db.execute("commit")
        except BaseException:
            await db.execute("rollback")
            raise
    return newly


def latest() -> str:
    return MIGRATIONS[-1][0]
