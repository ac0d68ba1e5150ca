"""SQLite's part of the upkeep queries (store/sql/upkeep.py): the current importance (the days since last
activity; the decay from store/policy.py), and the batch import, which writes memories, keyword and vector
rows with explicit rowids in a few statements.

A mixin of `SQLiteTx` (store/sqlite/tx.py), which provides the connection helpers (`_all`, `_one`,
`_exec`), the memory row mapping and `insert_memory`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pocketmem.base.models import Memory
from pocketmem.store.policy import time_coef_sql
from pocketmem.store.sql.upkeep import UpkeepQueries as SharedUpkeepQueries
from pocketmem.store.types import IndexedText, term_deltas

if TYPE_CHECKING:
    from collections.abc import Callable

IMPORT_ID_CHUNK = 500  # ids per "which are taken" query (SQLite's default limit is 32,766 parameters)


class UpkeepQueries(SharedUpkeepQueries):
    _vectors: bool
    _db: Any
    _pack: Callable[[Sequence[float]], bytes]

    def _current_importance(self, now: datetime) -> tuple[str, list[Any]]:
        """info_importance * scoring.time_coef(P, days), the decay as store/policy.py writes it for SQL (SQL, not
        a Python function called per row: three times faster over 100,000 rows)."""
        coef, params = time_coef_sql(self.dialect, "julianday(?) - julianday(coalesce(last_active_at, created_at))")
        return f"info_importance * {coef}", [*params, self.dialect.ts(now)]

    async def import_memories(
        self, rows: Sequence[tuple[Memory, Sequence[float] | None, IndexedText]]
    ) -> list[bool]:
        # A batch in four statements: which ids are taken, then memories, keyword rows and vectors each with
        # one executemany. Rowids are given explicitly (after the largest, as SQLite would pick them) so the
        # three tables line up without reading each new rowid back; the write transaction holds the lock.
        ids = [memory.id for memory, _, _ in rows]
        taken: set[str] = set()
        for start in range(0, len(ids), IMPORT_ID_CHUNK):
            in_ids, id_params = self.dialect.in_list("id", ids[start : start + IMPORT_ID_CHUNK])
            found = await self._all(f"select id from memories where {in_ids}", id_params)
            taken.update(row[0] for row in found)
        fresh: dict[str, tuple[Memory, Sequence[float] | None, IndexedText]] = {}
        for row in rows:
            if row[0].id not in taken:
                fresh.setdefault(row[0].id, row)
        if not fresh:
            return [False] * len(rows)
        first = (await self._one("select coalesce(max(rowid), 0) from memories"))[0] + 1
        # The sync order (the sync trigger bumps sync_clock and rewrites each new row) is given in the insert
        # instead: the same numbers the trigger would give, without writing every row twice.
        seq, quiet = await self._one("select seq, quiet from sync_clock where id = 1")
        memories, texts, vectors = [], [], []
        for n, (memory, vector, text) in enumerate(fresh.values()):
            blob = self._pack(vector) if vector is not None else None  # None: the embed queue computes it
            memories.append((first + n, *self._memory_params(memory), blob, seq + n + 1 if not quiet else 0))
            texts.append((first + n, text.terms, text.keyword_terms))
            if blob is not None:
                vectors.append((first + n, memory.user_id, memory.status.value, blob))
        if not quiet:
            await self._exec("update sync_clock set seq = ?, quiet = 1 where id = 1", (seq + len(fresh),))
        await self._db.executemany(
            f"insert into memories (rowid, {self._memory_columns}, embedding, sync_seq) "
            f"values ({self.dialect.placeholders(35)})",
            memories,
        )
        if not quiet:
            await self._exec("update sync_clock set quiet = 0 where id = 1")
        await self._db.executemany("insert into memories_fts (rowid, terms, keywords) values (?, ?, ?)", texts)
        await self._count_batch_terms(fresh.values())
        if self._vectors and vectors:
            await self._db.executemany(
                "insert into memory_vectors (rowid, user_id, status, embedding) "
                "values (?, ?, ?, vec_quantize_binary(?))",
                vectors,
            )
        inserted = {id(row) for row in fresh.values()}
        return [id(row) in inserted for row in rows]

    async def _count_batch_terms(self, rows: Iterable[tuple[Memory, Sequence[float] | None, IndexedText]]) -> None:
        """user_terms for a batch in one statement, as insert_memory keeps it for one memory."""
        counts: dict[tuple[str, str], int] = {}
        for memory, _, text in rows:
            for term, delta in term_deltas(None, text).items():
                counts[(memory.user_id, term)] = counts.get((memory.user_id, term), 0) + delta
        await self._db.executemany(
            "insert into user_terms (user_id, term, docs) values (?, ?, ?) "
            "on conflict (user_id, term) do update set docs = docs + excluded.docs",
            [(user_id, term, n) for (user_id, term), n in counts.items()],
        )
