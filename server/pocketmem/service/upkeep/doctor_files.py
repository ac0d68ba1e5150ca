"""The doctor's look at the profile folders beside the store.

A folder is kept by one store: the first to write it leaves its id there (`.pocketmem-store`, shared/folder_owner.py)
and any other store leaves it alone. A folder that names another store while this one is in charge of the home
means the files there are neither updated nor read back: most often memory.db was emptied or replaced (a file cut
to zero bytes opens as a new, empty store), sometimes two stores share one POCKETMEM_HOME. The doctor says
which, and what to do; it deletes nothing. A store that holds memories but lost its id (its store_meta table
recreated by `doctor --repair`) takes back the one its folders hold. A user's folder this user may not read or
write is named with the change (chmod, or chown when another user owns it: shared/folder_owner.py).
"""

from __future__ import annotations

from contextlib import suppress

from pocketmem.base.config import Settings
from pocketmem.service.shared.folder_owner import (
    OWNER_FILE,
    STORE_ID_KEY,
    UnreadableMarker,
    folder_name,
    folder_owner,
    folder_problem,
)
from pocketmem.store.base import Store


async def folder_problems(settings: Settings, store: Store, memories: int | None) -> list[str]:
    """A line for each user's profile folder this user may not read or write, and for each profile folder in
    POCKETMEM_HOME that another store keeps."""
    if not settings.files_on:
        return []
    async with store.read() as reader:
        users = await reader.user_ids()
    folders = [settings.home / folder_name(user) for user in dict.fromkeys([settings.user, *users])]
    problems = [line for folder in folders if (line := folder_problem(folder)) is not None]
    ours = await store.get_meta(STORE_ID_KEY)
    for marker in sorted(settings.home.glob(f"*/{OWNER_FILE}")):
        try:
            theirs = folder_owner(marker)
        except UnreadableMarker as exc:
            if marker.parent not in folders:  # a user's folder: named by folder_problem above
                problems.append(str(exc))
            continue
        if theirs is None or theirs == ours:
            continue
        folder = marker.parent
        line = (f"{folder} keeps the profile files of another pocketmem store ({theirs[:8]}…), so this store leaves "
                "them alone: edits there are not taken in and they are not updated")
        if memories == 0:
            line += (f". This store holds no memories: memory.db was probably emptied or replaced. Stop pocketmem, "
                     f"then restore memory.db from a backup and remove memory.db-wal and memory.db-shm beside it, or "
                     f"import a `pocketmem export`; the files in {folder} are kept as they are")
        else:
            line += (". If memory.db was replaced, put the right one back from a backup; if two stores share this "
                     "POCKETMEM_HOME on purpose, give each its own POCKETMEM_HOME")
        problems.append(line)
    return problems


async def adopt_lost_id(settings: Settings, store: Store, memories: int | None) -> list[str]:
    """`doctor --repair`: a store with memories but without an id of its own (store_meta lost and recreated) takes
    back the id its profile folders hold, when they all hold the same one."""
    if not settings.files_on or not memories or await store.get_meta(STORE_ID_KEY) is not None:
        return []
    ids = set()
    for marker in settings.home.glob(f"*/{OWNER_FILE}"):
        with suppress(UnreadableMarker):
            ids.add(folder_owner(marker))
    ids.discard(None)
    if len(ids) != 1:
        return []
    await store.claim_meta(STORE_ID_KEY, str(ids.pop()))
    return ["the store had lost its id (store_meta): it keeps its profile folders again"]
