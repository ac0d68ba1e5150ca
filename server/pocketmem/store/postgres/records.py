"""Value adapters of the PostgreSQL backend (vectors, lexemes, tsquery), and the shared row mappers
(store/sql/records.py) bound to its dialect for the query modules that take a row alone."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import Any

from pocketmem.store.postgres.dialect import POSTGRES, dt, ts
from pocketmem.store.sql import records as shared
from pocketmem.store.sql.records import (
    EVENT_COLUMNS,
    MEMORY_COLUMN_LIST,
    MEMORY_COLUMNS,
    PENDING_COLUMNS,
    REVISION_COLUMNS,
    TOMBSTONE_COLUMNS,
    USAGE_COLUMNS,
)

__all__ = [
    "EVENT_COLUMNS",
    "MEMORY_COLUMNS",
    "MEMORY_COLUMN_LIST",
    "PENDING_COLUMNS",
    "REVISION_COLUMNS",
    "TOMBSTONE_COLUMNS",
    "USAGE_COLUMNS",
    "dt",
    "ts",
]

memory_from_row = partial(shared.memory_from_row, d=POSTGRES)
memory_params = partial(shared.memory_params, d=POSTGRES)
pending_from_row = partial(shared.pending_from_row, d=POSTGRES)
tombstone_from_row = partial(shared.tombstone_from_row, d=POSTGRES)
tombstone_params = partial(shared.tombstone_params, d=POSTGRES)
revision_from_row = partial(shared.revision_from_row, d=POSTGRES)
revision_params = partial(shared.revision_params, d=POSTGRES)
event_from_row = partial(shared.event_from_row, d=POSTGRES)
usage_from_row = partial(shared.usage_from_row, d=POSTGRES)


def vector_text(vector: Sequence[float]) -> str:
    return "[" + ",".join(format(float(x), ".9g") for x in vector) + "]"


def parse_vector(text: str) -> list[float]:
    return [float(x) for x in text.strip("[]").split(",")] if text and text != "[]" else []


def json_text(value: Any) -> str:
    return json.dumps(value if value is not None else {}, ensure_ascii=False, default=str)


def lexemes(user_id: str, text_terms: str, keyword_terms: str) -> list[str]:
    """The keyword index entries of a memory: its distinct terms, each prefixed with the user id."""
    return [f"{user_id}|{t}" for t in dict.fromkeys(f"{text_terms} {keyword_terms}".split())]


def tsquery_text(user_id: str, terms: Sequence[str], *, all_terms: bool = False) -> str:
    """A tsquery that ORs (or ANDs) the user's terms, each quoted so user text stays inert."""
    quoted = ["'" + f"{user_id}|{t}".replace("\\", "\\\\").replace("'", "''") + "'" for t in terms if t]
    return (" & " if all_terms else " | ").join(quoted)
