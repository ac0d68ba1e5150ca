"""What the 7-day purge leaves in the trash until sync has carried it to the cloud library, and where the
notebook records how far sync got (per library and user): one rule, for maintenance, its preview and sync.

Eviction is the notebook's own business, not a delete (docs/postgres-and-sync.md): an evicted memory stays
active in the library. So with a library configured, an evicted memory waits in the notebook's trash until
its last change has gone up with a completed push; with the scope `memory.trash`, every trashed memory
waits for the trash handover, which takes it out of the notebook itself. A notebook with no library purges
on time.
"""

from __future__ import annotations

from pocketmem.base.config import Settings
from pocketmem.base.models import DeleteReason
from pocketmem.store.roles import MetaReads
from pocketmem.store.types import Unsent

LIBRARY_KEY = "sync.library_id"  # the id of the library this notebook last synced with


def position_key(library_id: str | None, user_id: str, direction: str) -> str:
    """Where the notebook keeps how far the `direction` ("push" or "pull") pass of a user got."""
    return f"sync.{library_id}.{user_id}.{direction}"


async def unsent(settings: Settings, reader: MetaReads, user_id: str) -> Unsent | None:
    """The user's trashed memories a purge must leave for sync now; None when nothing waits."""
    if settings.cloud_url is None:
        return None
    if settings.sync_trash:
        return Unsent(reasons=None, since=None)
    library_id = await reader.meta(LIBRARY_KEY)
    since = await reader.meta(position_key(library_id, user_id, "push")) if library_id else None
    return Unsent(reasons=(DeleteReason.evicted,), since=since)
