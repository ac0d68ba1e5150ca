"""PostgreSQL's part of the sync queries (store/sql/sync.py): the change order `sync_txid` (see
migrations.py), silenced through the setting `pocketmem.quiet`; vectors as pgvector text; a memory copied
from elsewhere written with its keyword columns. A mixin of `PostgresTx`.

A change key is the writing transaction's id and the row id. Transaction ids are handed out when
transactions start, not when they commit, so the position `change_marker` gives is the oldest
transaction still running at the reader's snapshot (`pg_snapshot_xmin`): everything before it was
committed (or rolled back) before the snapshot, and whatever commits later has an id at or after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pocketmem.base.models import Memory
from pocketmem.store.postgres.records import MEMORY_COLUMN_LIST, lexemes, memory_params, parse_vector, vector_text
from pocketmem.store.sql.sync import SyncQueries as SharedSyncQueries
from pocketmem.store.types import IndexedText


class SyncQueries(SharedSyncQueries):
    _sync_column = "sync_txid"
    _row_key = "id"

    # -- reads ----------------------------------------------------------------------------------
    async def change_marker(self) -> str:
        row = await self._one("select pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
        return str(row[0])

    async def memory_vectors(self, user_id: str, memory_ids: Sequence[str]) -> dict[str, list[float]]:
        if not memory_ids:
            return {}
        rows = await self._all(
            "select id, embedding::text from memories where user_id = %s and id = any(%s) and embedding is not null",
            (user_id, list(memory_ids)),
        )
        return {r[0]: parse_vector(r[1]) for r in rows}

    # -- writes ---------------------------------------------------------------------------------
    async def _quiet(self, on: bool) -> None:
        await self._exec("select set_config('pocketmem.quiet', %s, true)", ("on" if on else "off",))

    async def _overwrite_copy(
        self, key: Any, memory: Memory, vector: Sequence[float] | None, text: IndexedText
    ) -> None:
        """The user's row rewritten from a copy, keyword columns and vector included."""
        columns = MEMORY_COLUMN_LIST[2:]
        values: list[Any] = list(memory_params(memory))[2:]
        assignments = [f"{c} = %s" for c in columns]
        assignments += ["terms = %s", "keyword_terms = %s", "lexemes = array_to_tsvector(%s::text[])"]
        values += [text.terms, text.keyword_terms, lexemes(memory.user_id, text.terms, text.keyword_terms)]
        if vector is not None:
            assignments.append("embedding = %s::vector")
            values.append(vector_text(vector))
        await self._exec(
            f"update memories set {', '.join(assignments)} where id = %s and user_id = %s",
            (*values, key, memory.user_id),
        )

    async def remove_memory(self, user_id: str, memory_id: str) -> bool:
        await self.keep_forgotten_hash(user_id, memory_id)
        count = await self._exec("delete from memories where id = %s and user_id = %s", (memory_id, user_id))
        if not count:
            return False
        await self._forget_trail(user_id, memory_id)
        return True
