"""Whether this user can keep the SQLite store where it is, in words that name the path and what to change.

SQLite writes more than memory.db: `memory.db-wal` and `memory.db-shm` beside it (created by whoever opens it
first) and temporary files in its folder; pocketmem's writers take turns on `memory.db.lock` (base/filelock.py). A
store is writable only when all of these are. Permission bits and read-only mounts are causes of their own,
never damage: their remedy is a chmod, a chown (base/permissions.py says which) or another POCKETMEM_HOME, not a
backup. A store path that is a folder is a setting to change.

Another process that holds the write lock is told apart too, by name where the system says who it is
(/proc/locks on Linux: the WAL write lock is byte 120 of `memory.db-shm`; a write lock on `memory.db`'s lock bytes
from 0x40000000, a rollback journal's RESERVED lock or any process's EXCLUSIVE one (`pragma locking_mode =
exclusive`, which keeps even readers out); pocketmem's own turn the `flock` of `memory.db.lock`). Every look here
waits `wait` seconds at most, never a writer's longer wait.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from pocketmem.base.files import in_place_of
from pocketmem.base.permissions import grant, read_only_mount
from pocketmem.store.sqlite.driver import NotAStore, connect

WAL_WRITE_BYTE = 120
# memory.db's lock bytes: PENDING (0x40000000), RESERVED (a rollback journal's writer), then the SHARED range; a
# write lock on any of them (an EXCLUSIVE one: `pragma locking_mode = exclusive`) keeps others from writing.
DB_LOCK_BYTES = (0x40000000, 0x40000000 + 2 + 510 - 1)
# File systems made by the kernel: a folder cannot be made in them.
SYSTEM_FILESYSTEMS = frozenset({"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs",
                                "securityfs", "configfs", "pstore", "bpf", "mqueue", "efivarfs"})
# Free bytes under which saving fails: a memory with its vector, keyword rows and events takes tens of KiB of WAL
# frames, and memory.db-shm 32 KiB when it is made.
LOW_SPACE = 1 << 20
# What SQLite says when another connection holds the write lock.
LOCKED = ("database is locked", "database is busy")


def _nearest(path: Path) -> Path:
    """The deepest part of `path` that exists."""
    while not os.path.lexists(path) and path.parent != path:
        path = path.parent
    return path


def _filesystem(path: Path) -> str | None:
    """The type of the file system `path` lies on, from the mount table (Linux), or None."""
    try:
        mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        return None
    found = [(m[1], m[2]) for m in mounts if len(m) > 2 and (str(path) + "/").startswith(m[1].rstrip("/") + "/")]
    return max(found, key=lambda m: len(m[0]))[1] if found else None


def absent(db_path: Path) -> bool:
    """Nothing stands at `db_path`, and the folders up to it could be made: no store there yet (a mistyped
    POCKETMEM_HOME, a store not made yet). False when something is there, or when a folder on the way cannot be made
    (a file, a read-only or system file system, no permission: `creation_problem` says which)."""
    try:
        os.lstat(db_path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    else:
        return False
    there = _nearest(db_path)
    return (os.path.isdir(there) and os.access(there, os.W_OK | os.X_OK) and not read_only_mount(there)
            and _filesystem(there) not in SYSTEM_FILESYSTEMS)


def creation_problem(folder: Path, exc: OSError) -> str:
    """Why the store's folder cannot be made, from the error mkdir gave: the part of the path to change."""
    there = _nearest(folder)
    home = "POCKETMEM_HOME must name a folder this user can write"
    if os.path.exists(there) and not os.path.isdir(there):
        return (f"{there} is a file, not a folder, so {folder} cannot be made in it ({home}): move that file "
                "away, or set POCKETMEM_HOME to a folder")
    if exc.errno == errno.EROFS or read_only_mount(there):
        return (f"{folder} cannot be made: {there} is on a read-only file system ({home}); set POCKETMEM_HOME "
                "to a folder on a writable disk")
    if (kind := _filesystem(there)) in SYSTEM_FILESYSTEMS:
        return (f"{folder} cannot be made: {there} belongs to the system ({kind}), which holds no files of ours "
                f"({home}); set POCKETMEM_HOME to a folder in your home or data directory")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return (f"{folder} cannot be made: this user may not write in {there} ({home}); set POCKETMEM_HOME to a "
                f"folder of your own, or give this user write permission on {there}")
    return (f"{folder} cannot be made under {there} ({exc.strerror}; {home}); set POCKETMEM_HOME to a folder "
            "on an ordinary disk")


def instead(setting: str | None, example: Path | None = None) -> str:
    """What to change so that pocketmem opens its own store, by what named the path it met: `setting` (POCKETMEM_DB,
    or `db (in …/config.toml)`), or None for the default place, $POCKETMEM_HOME/memory.db."""
    if setting is None:
        return ("move it away (pocketmem keeps its store in POCKETMEM_HOME as memory.db, and makes a new one where "
                "there is none), or set POCKETMEM_HOME to another folder")
    unset = "remove that key" if " (in " in setting else "unset it"
    file = f"a file (such as {example})" if example is not None else "the store's SQLite file"
    return f"set {setting} to {file}, or {unset} to keep the store in $POCKETMEM_HOME/memory.db"


def not_a_store(exc: NotAStore, setting: str | None) -> NotAStore:
    """The refusal of another program's database, with what to change."""
    if not exc.tables:
        return exc  # a -wal of another database: its message says what to do
    return NotAStore(f"{exc}; {instead(setting)}", exc.path, exc.tables)


def access_problems(db_path: str, setting: str | None = None) -> list[str]:
    """What keeps this user from reading and writing the store at `db_path`, a line per path (none when all is
    well); `setting`: what named that path (`instead`). A store not made yet is judged by its folder."""
    db = Path(db_path)
    folder = db.parent
    if not os.path.isdir(folder):
        return []  # opening reports a folder that cannot be made (creation_problem)
    if not os.access(folder, os.R_OK | os.X_OK):
        return [f"the folder {folder} cannot be read by this user: {grant(folder, 'rx', 'readable and searchable')}, "
                "or set POCKETMEM_HOME to a folder of your own"]
    if read_only_mount(folder):
        return [f"{folder} is on a read-only file system: the store can be read but nothing can be saved; "
                "remount it read-write, or copy the folder to a writable disk and point POCKETMEM_HOME there"]
    if os.path.isdir(db):
        return [f"{db} is a folder, not the store's SQLite file: {instead(setting, db / 'memory.db')}"]
    if problems := _odd_files(db, setting):
        return problems
    if not os.access(folder, os.W_OK):
        problems.append(
            f"the folder {folder} is not writable by this user: SQLite makes memory.db-wal, memory.db-shm and "
            f"temporary files beside memory.db, so nothing can be saved; {grant(folder, 'w', 'writable')}"
        )
    for path in (db, Path(f"{db_path}-wal"), Path(f"{db_path}-shm")):
        if os.path.exists(path) and not os.access(path, os.R_OK | os.W_OK):
            may = "write" if os.access(path, os.R_OK) else "read"
            problems.append(f"this user may not {may} {path}: {grant(path, 'rw', 'readable and writable')}")
    lock = Path(f"{db_path}.lock")
    if os.path.isdir(lock):
        problems.append(f"the write lock {lock} is a folder, not a file: nothing can be saved; remove that folder "
                        "(pocketmem makes the file itself)")
    elif os.path.exists(lock) and not os.access(lock, os.R_OK | os.W_OK):
        problems.append(f"the write lock {lock} is not readable and writable by this user: nothing can be saved; "
                        f"{grant(lock, 'rw', 'readable and writable')}, or remove it (pocketmem makes it again)")
    if (full := space_problem(folder)) is not None:
        problems.append(full)
    return problems


def _odd_files(db: Path, setting: str | None) -> list[str]:
    """memory.db, its -wal or its -shm where something other than a file stands (a folder, a link loop, a pipe, a
    device): SQLite cannot open the store, and nothing is damaged, so the line says what to move, never to restore."""
    problems = []
    if (what := in_place_of(db, "file")) is not None:
        problems.append(f"{db} is {what}, not the store's SQLite file, so the store cannot be opened; nothing is "
                        f"damaged: {instead(setting)}")
    for suffix in ("-wal", "-shm"):
        path = Path(f"{db}{suffix}")
        if (what := in_place_of(path, "file")) is not None:
            problems.append(f"{path} is {what}, not the file SQLite keeps beside {db.name}, so the store cannot be "
                            f"opened; nothing is damaged: move it out of {db.parent} (SQLite makes that file itself)")
    return problems


def space_problem(folder: Path) -> str | None:
    """A disk too full to save on: the doctor's write check takes the write lock but writes nothing, so it is
    asked here. None when there is room (or the system does not say)."""
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):  # no statvfs on Windows
        return None
    free = st.f_bavail * st.f_frsize
    if free >= LOW_SPACE:
        return None
    return (f"the disk holding {folder} is full ({free // 1024} KiB free): every save fails with \"disk is full\" "
            "(and opening, once memory.db-shm cannot be made, with \"disk I/O error\"); nothing is damaged. Free "
            "some space, or move POCKETMEM_HOME to another disk")


def _holds(fields: list[str], inodes: dict[tuple[int, int, int], str]) -> bool:
    """Whether a /proc/locks line is a write lock on one of the store's files, on the bytes that mean writing."""
    kind, mode, device, start, end = fields[1], fields[3], fields[5], fields[6], fields[7]
    major, minor, inode = device.split(":")
    name = inodes.get((int(major, 16), int(minor, 16), int(inode)))
    if name is None or mode != "WRITE":
        return False
    if kind == "FLOCK":
        return name == "lock"
    first, last = {"shm": (WAL_WRITE_BYTE, WAL_WRITE_BYTE), "db": DB_LOCK_BYTES}.get(name, (1, 0))
    return int(start) <= last and first <= (int(end) if end != "EOF" else last)


def lock_holders(db_path: str) -> list[str]:
    """The processes that hold the store's write lock, as `process PID (command line)`, where the system tells
    (Linux); an empty list elsewhere or when nobody does."""
    inodes = {}
    for name, path in (("db", db_path), ("shm", f"{db_path}-shm"), ("lock", f"{db_path}.lock")):
        try:
            st = os.stat(path)
        except OSError:
            continue
        inodes[(os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)] = name
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    return [_process(pid) for pid in sorted(holding_pids(lines, inodes) - {os.getpid()})]


def holding_pids(lines: list[str], inodes: dict[tuple[int, int, int], str]) -> set[int]:
    """The processes /proc/locks `lines` show holding a write lock on the store's files. A line marked `->` is a
    process waiting for a lock, not holding one (`2: -> POSIX ADVISORY WRITE 4242 08:01:12 0 EOF`): skipped."""
    held = (fields for fields in (line.split() for line in lines) if len(fields) >= 8 and fields[1] != "->")
    return {int(fields[4]) for fields in held if _holds(fields, inodes)}


def _process(pid: int) -> str:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        command = ""
    return f"process {pid} ({command[:120]})" if command else f"process {pid}"


def write_lock_problem(db_path: str, wait: float) -> str | None:
    """Takes the write lock for a moment (waiting at most `wait` seconds, not the writers' longer wait) and lets
    it go, changing nothing: why it cannot be had, or None. Runs in a worker thread."""
    try:
        conn = connect(db_path, load_vectors=False, wait=wait)
    except Exception as exc:  # noqa: BLE001 - the reason is the answer
        return str(exc)
    try:
        conn.execute("begin immediate")
        conn.execute("rollback")
    except Exception as exc:  # noqa: BLE001 - the reason is the answer
        return str(exc)
    finally:
        conn.close()
    return None


def held_problem(db_path: str, wait: float) -> str:
    """The report line for a write lock another process has held for over `wait` seconds."""
    holders = lock_holders(db_path)
    who = ", ".join(holders) if holders else "another process (the system does not say which)"
    return (f"the store's write lock has been held for over {wait:g} s by {who}: it may be in the middle of a "
            "long write; saving waits for it, then fails as busy. Try again once it is done, or stop that "
            "process if it hangs. Do not restore or remove memory.db, -wal or -shm while a process has them open")
