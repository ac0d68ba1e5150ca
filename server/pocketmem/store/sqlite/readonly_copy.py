"""A read-only folder holding a store that SQLite cannot open as it is.

Reading a WAL-mode database needs its wal-index, the `-shm` file beside it. SQLite creates that file
when it is missing, which a read-only folder forbids. A cleanly closed store has no WAL: everything is in
the file, which is opened `immutable=1` (no -shm, no locks). A store with a WAL but no `-shm` (a crash,
then a copy or a read-only mount that dropped the -shm) cannot be opened so: `immutable=1` would ignore the
WAL, hiding every write committed since the last checkpoint. So the database and its WAL are copied into
a private temporary folder and the copy is opened with `pragma query_only`: every committed write is seen,
and any write is refused as for any other read-only store. The copy costs the file's size in the
temporary folder for as long as the store is open; it is removed on close.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

WAL, SHM = "-wal", "-shm"


def wal_without_shm(path: str) -> bool:
    """The case above: the database and its WAL are there, the -shm is not and cannot be created."""
    db = Path(path)
    return (
        db.is_file()
        and Path(path + WAL).is_file()
        and not Path(path + SHM).exists()
        and not os.access(db.parent, os.W_OK)
    )


def closed_read_only(path: str) -> bool:
    """A cleanly closed store (no WAL left) in a folder this process may not write (a read-only mount): SQLite
    cannot create the -shm it needs, but nothing is in a WAL either, so the file is opened `immutable=1`."""
    db = Path(path)
    return db.is_file() and not Path(path + WAL).exists() and not os.access(db.parent, os.W_OK)


def private_copy(path: str) -> str:
    """Copies the database and its WAL into a new private folder; returns the copy's path."""
    folder = tempfile.mkdtemp(prefix="pocketmem-readonly-")
    copy = os.path.join(folder, Path(path).name)
    try:
        shutil.copyfile(path, copy)
        shutil.copyfile(path + WAL, copy + WAL)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return copy


def remove(copy: str) -> None:
    shutil.rmtree(Path(copy).parent, ignore_errors=True)
