"""The SQLite file's schema held against the one the migrations build: what is missing, and its repair.

The reference is built by running the migrations on an empty in-memory database. A store whose schema drifted
from it (a first-release file: m001 was later given `memory_counts` and two indexes; a keyword index dropped by
hand) is told apart by name: a table that is missing, an index or trigger that is missing or defined otherwise, a
column of a table that is missing (m009 was later given `profile_files.earlier`: a migration edited in place
reaches no store that had already run it). Repair recreates each from the reference, adds a missing column with
the reference's type and default (`alter table add column`), and refills the derived tables from the memories
they derive from: `memory_counts` (active memories per user), `memories_fts` (the keyword index), `user_terms`
(term counts).
A table holding data of its own that is missing is recreated empty, and the report says so. Rows of derived
tables that are there but disagree with the memories are mended (`mend`): keyword rows without a memory removed,
memories without a keyword row indexed again the same way, term and active counts recounted. The vector table is
the store's (`prepare_vectors`, `rebuild_vector_index`), not here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import aiosqlite

from pocketmem.store.base import keyword_rows_added
from pocketmem.store.sqlite.driver import connect, inline_connection_class
from pocketmem.store.sqlite.records import readable_vector

DERIVED = ("memory_counts", "memories_fts", "memories_fts_vocab", "user_terms")


@dataclass(frozen=True)
class SchemaObject:
    name: str
    type: str  # table, index, trigger
    sql: str
    columns: tuple[tuple[str, str], ...] = ()  # a table's (name, definition) from `pragma table_info`
    table: str = ""  # the table an index or trigger belongs to


@dataclass(frozen=True)
class Difference:
    name: str
    type: str  # table, index, trigger, column ("table.column")
    problem: str  # "missing" or "defined otherwise"

    def line(self) -> str:
        what = "derived from the memories" if self.name in DERIVED else "its rows cannot be rebuilt"
        if self.type == "column":
            what = "added with its default value"
        elif self.type != "table":
            what = "rebuilt from the table"
        return f"{self.type} {self.name} is {self.problem} ({what}): run `pocketmem doctor --repair`"


_references: dict[tuple[str, ...], dict[str, SchemaObject]] = {}


def _normal(sql: str) -> str:
    sql = re.sub(r"--[^\n]*", "", sql)
    return " ".join(sql.replace("(", " ( ").replace(")", " ) ").replace(",", " , ").lower().split())


async def _objects(db: aiosqlite.Connection) -> dict[str, SchemaObject]:
    rows = await db.execute_fetchall(
        "select name, type, sql, tbl_name from sqlite_master where sql is not null and name not like 'sqlite_%'"
    )
    objects = {row[0]: SchemaObject(row[0], row[1], row[2], table=row[3]) for row in rows}
    # FTS5 keeps its data in shadow tables named after it: they come and go with the virtual table.
    virtual = [o.name for o in objects.values() if o.sql.lower().startswith("create virtual table")]
    objects = {
        n: o for n, o in objects.items() if not any(n.startswith(f"{v}_") and n != f"{v}_vocab" for v in virtual)
    }
    for name, o in objects.items():
        if o.type == "table" and name not in virtual:  # a virtual table's columns are its module's
            objects[name] = SchemaObject(name, o.type, o.sql, await _columns(db, name), o.table)
    return objects


async def _columns(db: aiosqlite.Connection, table: str) -> tuple[tuple[str, str], ...]:
    """Each column with the definition `alter table add column` gives it: type, and `not null` only with a
    default (SQLite adds no other kind of not-null column to a table that has rows)."""
    out = []
    for _, name, kind, notnull, default, _ in await db.execute_fetchall(f'pragma table_info("{table}")'):
        definition = f'"{name}" {kind}'
        if default is not None:
            definition += f" {'not null ' if notnull else ''}default {default}"
        out.append((name, definition))
    return tuple(out)


async def reference(upto: str | None = None) -> dict[str, SchemaObject]:
    """The objects the migrations create (those before `upto`, if given) on an empty database."""
    from pocketmem.store.sqlite.migrations import MIGRATIONS

    names = [name for name, _ in MIGRATIONS]
    wanted = tuple(names[: names.index(upto)] if upto is not None else names)
    if wanted not in _references:
        # The store's own sqlite3 module (driver.py): the standard library's may lack FTS5 where sqlean has it.
        # Inline: an empty in-memory database never blocks, and each start builds this before the handshake,
        # where some 170 hops to a connection thread and back would cost more than the statements.
        inline = inline_connection_class()
        async with inline(lambda: connect(":memory:", load_vectors=False), iter_chunk_size=64) as db:
            for name, fn in MIGRATIONS:
                if name in wanted:
                    await fn(db)
            _references[wanted] = await _objects(db)
    return _references[wanted]


async def differences(db: aiosqlite.Connection, upto: str | None = None) -> list[Difference]:
    """What the file lacks or defines otherwise, against the reference. Tables by their columns' presence."""
    found = await _objects(db)
    out: list[Difference] = []
    for name, want in (await reference(upto)).items():
        have = found.get(name)
        if have is None:
            out.append(Difference(name, want.type, "missing"))
        elif want.type in ("index", "trigger") and _normal(have.sql) != _normal(want.sql):
            out.append(Difference(name, want.type, "defined otherwise"))
        elif want.type == "table" and have.columns:
            there = {column for column, _ in have.columns}
            out += [Difference(f"{name}.{c}", "column", "missing") for c, _ in want.columns if c not in there]
    return out


async def foreign_triggers(db: aiosqlite.Connection) -> list[str]:
    """Triggers the migrations do not make (another program's, or a person's): each runs inside pocketmem's writes
    to its table, and one that fails (`select raise(abort, …)`) fails every one of them. Named, never dropped."""
    wanted = await reference()
    return [
        f"trigger {o.name} on {o.table} is not one pocketmem makes: it runs inside every save to {o.table}, and "
        f"if it fails, so does the save. Unless it was made on purpose, remove it (sqlite3 memory.db "
        f"'drop trigger \"{o.name}\"'); nothing else is damaged"
        for o in (await _objects(db)).values() if o.type == "trigger" and o.name not in wanted
    ]


async def derived_differences(db: aiosqlite.Connection) -> list[Difference]:
    """What can be rebuilt from the memories alone: derived tables, and the indexes and triggers of tables that
    are there (those of a missing table that holds data of its own wait for `doctor --repair`, which recreates
    the table first). Reads only: opening a healthy store takes no write lock."""
    found = await differences(db)
    wanted = await reference()
    gone = {d.name for d in found if d.type == "table" and d.name not in DERIVED}
    return [
        d for d in found
        if (d.type not in ("table", "column") or d.name in DERIVED) and wanted[d.name].table not in gone
    ]


async def repair(db: aiosqlite.Connection, upto: str | None = None, *, derived_only: bool = False) -> list[Difference]:
    """Recreates what `differences` finds and refills the derived tables; inside the caller's transaction.
    `derived_only`: only what `derived_differences` finds."""
    found = await derived_differences(db) if derived_only else await differences(db, upto)
    if not found:
        return []
    wanted = await reference(upto)
    order = {"table": 0, "column": 1, "index": 2, "trigger": 3}
    # The keyword index before its vocabulary view; tables and columns before the indexes and triggers on them.
    for diff in sorted(found, key=lambda d: (order.get(d.type, 4), d.name.endswith("_vocab"))):
        if diff.type == "column":
            table, column = diff.name.split(".", 1)
            await db.execute(f'alter table "{table}" add column {dict(wanted[table].columns)[column]}')
            continue
        if diff.problem != "missing":
            await db.execute(f'drop {diff.type} if exists "{diff.name}"')
        await db.execute(wanted[diff.name].sql)
    created = {d.name for d in found if d.type == "table"}
    if "memory_counts" in created:
        await db.execute(
            "insert into memory_counts (user_id, active) select user_id, count(*) from memories "
            "where status = 'active' group by user_id"
        )
    if "memories_fts" in created:
        await _refill_keyword_index(db)
    if created & {"memories_fts", "user_terms"}:
        await _recount_terms(db)
    return found


# What disagrees with the memories, counted by `SQLiteStore.health` and mended by `mend`.
KEYWORD_ORPHANS = "from memories_fts where rowid not in (select rowid from memories)"
KEYWORD_GAPS = "from memories m where not exists (select 1 from memories_fts f where f.rowid = m.rowid)"
ACTIVE_PER_USER = "select user_id, count(*) as n from memories where status = 'active' group by user_id"
COUNT_MISMATCHES = (
    f"select count(*) from ({ACTIVE_PER_USER}) c full join memory_counts k using (user_id) "
    "where coalesce(k.active, 0) != coalesce(c.n, 0)"
)
# Memories whose vector sqlite-vec cannot read (records.readable_vector), counted by `health` and cleared by
# `clear_bad_vectors`; until then the vector side of every search leaves them out.
BAD_VECTORS = f"from memories where embedding is not null and not {readable_vector('embedding')}"


async def mend(db: aiosqlite.Connection) -> list[str]:
    """Inside the caller's transaction: the derived rows made to agree with the memories again (keyword rows
    without a memory removed, memories without a keyword row indexed from their text, the term counts and the
    active counts recounted when they differ); what was mended, a line each."""
    done = []
    cursor = await db.execute(f"delete {KEYWORD_ORPHANS}")
    if removed := max(0, cursor.rowcount):
        done.append(f"{_count(removed, 'keyword row')} without a memory removed")
    if filled := await _refill_keyword_index(db):
        done.append(keyword_rows_added(filled))
    if removed or filled:
        await _recount_terms(db)
    if users := list(await db.execute_fetchall(COUNT_MISMATCHES))[0][0]:
        await db.execute("delete from memory_counts")
        await db.execute(f"insert into memory_counts (user_id, active) {ACTIVE_PER_USER}")
        done.append(f"the active count of {_count(users, 'user')} recounted")
    return done


async def clear_bad_vectors(db: aiosqlite.Connection, *, index: bool) -> list[str]:
    """Inside the caller's transaction: the vectors sqlite-vec cannot read removed (their entries in the vector index
    first, when there is one), so the embed queue gives those memories new ones; what was done, a line."""
    rowids = [r[0] for r in await db.execute_fetchall(f"select rowid {BAD_VECTORS}")]
    for start in range(0, len(rowids), 500):
        some = rowids[start : start + 500]
        marks = ",".join("?" * len(some))
        if index:
            await db.execute(f"delete from memory_vectors where rowid in ({marks})", some)
        await db.execute(f"update memories set embedding = null where rowid in ({marks})", some)
    if not rowids:
        return []
    which = f"{len(rowids)} memor{'y' if len(rowids) == 1 else 'ies'}"
    return [f"{which} kept a vector that could not be read (not a float32 vector of the store's size): cleared; the "
            "next start of `pocketmem serve` embeds them again in the background (or `pocketmem reindex` now)"]


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" + ("" if n == 1 else "s")


async def _refill_keyword_index(db: aiosqlite.Connection) -> int:
    """A keyword row for every memory without one (all of them in a table just created)."""
    from pocketmem.core.text import indexed_text

    # The rowids first: the keyword index is not written while a query over it is still open.
    missing = [
        row[0]
        for row in await db.execute_fetchall(f"select m.rowid {KEYWORD_GAPS}")
    ]
    for start in range(0, len(missing), 500):
        chunk = missing[start : start + 500]
        found = await db.execute_fetchall(
            f"select rowid, content, keywords from memories where rowid in ({', '.join('?' * len(chunk))})", chunk
        )
        rows = []
        for rowid, content, keywords in found:
            terms, keyword_terms = indexed_text(content, json.loads(keywords or "[]"))
            rows.append((rowid, terms, keyword_terms))
        await db.executemany("insert into memories_fts (rowid, terms, keywords) values (?, ?, ?)", rows)
    return len(missing)


async def _recount_terms(db: aiosqlite.Connection) -> None:
    from pocketmem.store.types import IndexedText, term_deltas

    counts: dict[tuple[str, str], int] = {}
    cursor = await db.execute(
        "select m.user_id, f.terms, f.keywords from memories_fts f join memories m on m.rowid = f.rowid"
    )
    while batch := await cursor.fetchmany(500):
        for user_id, terms, keyword_terms in batch:
            for term in term_deltas(None, IndexedText(terms=terms, keyword_terms=keyword_terms)):
                counts[(user_id, term)] = counts.get((user_id, term), 0) + 1
    await cursor.close()
    await db.execute("delete from user_terms")
    await db.executemany(
        "insert into user_terms (user_id, term, docs) values (?, ?, ?)",
        [(user_id, term, n) for (user_id, term), n in counts.items()],
    )
