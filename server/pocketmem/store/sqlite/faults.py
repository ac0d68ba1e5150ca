"""Storage faults of the SQLite file, told apart and put in words a user can act on.

    full        SQLITE_FULL ("database or disk is full"): the disk, or a size limit, is exhausted
    read-only   no write permission on the file, its folder or its lock file (a read-only mount, a chmod)
    damaged     "database disk image is malformed", "file is not a database", a corrupt FTS5 index

Each says that nothing was written (SQLite rolls the transaction back) and what to do. Anything else is
left alone. The message carries no memory text.
"""

from __future__ import annotations

from pocketmem.base.errors import StoreError

FULL = ("database or disk is full", "disk is full", "no space left")
READ_ONLY = ("readonly database", "read-only", "permission denied", "unable to open database file")
DAMAGED = ("malformed", "file is not a database", "database corruption", "fts5: corrupt", "corrupt")


class StorageFault(StoreError):
    """A write or read failed because of the storage itself."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


def classify(exc: BaseException, path: str, *, writing: bool) -> StorageFault | None:
    if isinstance(exc, StorageFault):
        return exc
    text = str(exc).lower()
    if not isinstance(exc, OSError | StoreError) and type(exc).__module__.split(".")[0] not in ("sqlite3", "sqlean"):
        return None
    nothing = "nothing was written. " if writing else ""
    if any(s in text for s in FULL):
        return StorageFault(
            "full",
            f"the disk holding the memory store ({path}) is full: {nothing}Free some space and try again.",
        )
    if isinstance(exc, PermissionError) or any(s in text for s in READ_ONLY):
        return StorageFault(
            "read-only",
            f"the memory store at {path} is read-only (no write permission on the file or its folder): {nothing}"
            "Recall and listing still work; make the folder writable to save memories.",
        )
    if any(s in text for s in DAMAGED):
        return StorageFault(
            "damaged",
            f"the memory store at {path} looks damaged ({str(exc)[:80]}): {nothing}"
            "Run `pocketmem doctor` to see what is wrong.",
        )
    return None
