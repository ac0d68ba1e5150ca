"""The derived columns of a memory row, made the same way by every path that writes one.

What gets embedded, what the keyword index holds, a new id, and the hash a tombstone keeps of the
deleted memory. Writing, patching, sync, import, export and the embed queue all use these.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence

from pocketmem.base.models import Memory
from pocketmem.core.text import indexed_text as index_text_columns
from pocketmem.store.types import IndexedText


def new_id() -> str:
    return uuid.uuid4().hex


def embedding_text(content: str, keywords: Sequence[str]) -> str:
    """What gets embedded: the content, with the agent's keywords appended as extra context."""
    return content if not keywords else f"{content}\n{' '.join(keywords)}"


def indexed_text(content: str, keywords: Sequence[str]) -> IndexedText:
    """What the keyword index stores for a memory with this content and these keywords."""
    terms, kw_terms = index_text_columns(content, keywords)
    return IndexedText(terms=terms, keyword_terms=kw_terms)


def payload_hash(memory: Memory) -> str:
    """A short hash of what a memory says (not of how often it was used), kept by its tombstone."""
    body = memory.model_dump(mode="json", exclude={"use_count", "last_active_at", "time_coef", "importance"})
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]
