"""The store interface of the profile layer (docs/profile.md): persona and identity sections, their revisions, the
text last written to each Markdown file, and the counts and orders the profile and listing need.

Part of StoreReader / StoreWriter (store/roles.py); implemented once for both backends in store/sql/profile.py.
Rows in, rows out: no policy here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pocketmem.base.models import Category, Memory, ProfileRevision
from pocketmem.store.types import MemoryFilter


class ProfileReader(ABC):
    @abstractmethod
    async def get_profile(self, user_id: str, *, strict: bool = False) -> dict[str, dict[str, Any]]:
        """{section: fields} for every section the user has (persona, identity, ...). A section that cannot be read
        is left out with a warning, or with `strict` (export: never half a user) raises UnreadableRow."""

    @abstractmethod
    async def list_profile_revisions(self, user_id: str, limit: int) -> list[ProfileRevision]:
        """The most recent profile revisions, newest first."""

    @abstractmethod
    async def get_profile_file(self, user_id: str, name: str) -> tuple[str, str, list[str]] | None:
        """(text, hash, earlier texts newest first) pocketmem last wrote to the file `name` of this user; earlier
        texts that cannot be read are left out with a warning (the save is then judged against the text alone)."""

    @abstractmethod
    async def category_counts(self, user_id: str, flt: MemoryFilter) -> dict[str, int]:
        """Memories per category matching `flt` (its category, limit and offset ignored)."""

    @abstractmethod
    async def most_used(self, user_id: str, categories: Sequence[Category], limit: int) -> list[Memory]:
        """Active memories of these categories, most recalled first (use_count, then newest)."""


class ProfileWriter(ProfileReader):
    @abstractmethod
    async def put_profile(self, user_id: str, section: str, fields: Mapping[str, Any], now: datetime) -> None:
        """Create or overwrite a section's fields."""

    @abstractmethod
    async def insert_profile_revision(self, revision: ProfileRevision) -> None: ...

    @abstractmethod
    async def import_profile_revision(self, revision: ProfileRevision) -> bool:
        """Insert unless a revision with its id exists; True when inserted."""

    @abstractmethod
    async def put_profile_file(
        self, user_id: str, name: str, text: str, digest: str, earlier: Sequence[str], now: datetime
    ) -> None:
        """Record what was just written to the file `name`, with the texts written before it."""

    @abstractmethod
    async def set_identity_confirmed(self, user_id: str, confirmed: bool, now: datetime) -> None:
        """users.identity_confirmed (the users row is created when missing)."""
