"""Value adapters of the PostgreSQL backend (vectors, lexemes, tsquery), and the shared memory and pending
row mappers (store/sql/records.py) bound to its dialect."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from pocketmem.store.postgres.dialect import POSTGRES
from pocketmem.store.sql import records as shared
from pocketmem.store.sql.records import MEMORY_COLUMN_LIST, MEMORY_COLUMNS, PENDING_COLUMNS

__all__ = ["MEMORY_COLUMNS", "MEMORY_COLUMN_LIST", "PENDING_COLUMNS"]

memory_from_row = partial(shared.memory_from_row, d=POSTGRES)
memory_params = partial(shared.memory_params, d=POSTGRES)
pending_from_row = partial(shared.pending_from_row, d=POSTGRES)


def vector_text(vector: Sequence[float]) -> str:
    return "[" + ",".join(format(float(x), ".9g") for x in vector) + "]"


def parse_vector(text: str) -> list[float]:
    return [float(x) for x in text.strip("[]").split(",")] if text and text != "[]" else []


def lexemes(user_id: str, text_terms: str, keyword_terms: str) -> list[str]:
    """The keyword index entries of a memory: its distinct terms, each prefixed with the user id."""
    return [f"{user_id}|{t}" for t in dict.fromkeys(f"{text_terms} {keyword_terms}".split())]


def tsquery_text(user_id: str, terms: Sequence[str], *, all_terms: bool = False) -> str:
    """A tsquery that ORs (or ANDs) the user's terms, each quoted so user text stays inert."""
    quoted = ["'" + f"{user_id}|{t}".replace("\\", "\\\\").replace("'", "''") + "'" for t in terms if t]
    return (" & " if all_terms else " | ").join(quoted)
