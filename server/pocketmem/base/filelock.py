"""An exclusive lock on a file, across processes, served in turn: the store's writers on `<db>.lock`, the
profile files' take-in and rewrite on the folder's `.pocketmem-store`.

SQLite lets a second writer wait with its busy handler, which sleeps and retries with growing
pauses (up to 100 ms). Under steady load from several processes a waiter keeps missing the short
gaps between other writers' transactions and can wait many seconds, then fail with "database is
locked". Taking an exclusive `flock` on `<db>.lock` before `BEGIN IMMEDIATE` makes waiters block
in the kernel instead, which wakes them as soon as the lock is free, so writes from every process
are served in turn and SQLite's own wait is rarely needed.

The blocking call runs in a worker thread. If the waiting request is cancelled or times out, the
thread may still get the lock later; whichever side sees the other's flag releases it, so the
lock is never left held by nobody. Where `fcntl` does not exist (Windows) this lock does nothing
and SQLite's busy timeout alone applies.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from pocketmem.base.errors import StoreError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class _Wait:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.mutex = threading.Lock()
        self.acquired = False
        self.abandoned = False

    def block(self) -> None:
        """In a worker thread: wait for the lock; release it at once if nobody wants it any more."""
        assert fcntl is not None
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        with self.mutex:
            if self.abandoned:
                _release(self.fd)
            else:
                self.acquired = True

    def abandon(self) -> bool:
        """Give up waiting; True when the lock was already ours (the caller must release it)."""
        with self.mutex:
            self.abandoned = True
            return self.acquired


def _release(fd: int) -> None:
    assert fcntl is not None
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class FileLock:
    """`async with lock.hold():` around each unit of work that must not interleave with another process's.
    `busy` is the error raised when the lock is not free within `timeout` seconds; with `create` False the file
    must exist (FileNotFoundError otherwise) and is only opened for reading."""

    def __init__(self, path: str, timeout: float, busy: str, *, create: bool = True) -> None:
        self.path = path
        self.timeout = timeout
        self.busy = busy
        self.flags = os.O_RDWR | os.O_CREAT if create else os.O_RDONLY

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        if fcntl is None:
            yield
            return
        # A descriptor per acquisition: flock locks belong to the open file description, so two
        # holders in one process (another store object on the same file) also exclude each other.
        try:
            fd = os.open(self.path, self.flags, 0o600)
        except IsADirectoryError:
            raise StoreError(
                f"the lock file {self.path} is a folder, not a file: nothing was written. Remove that folder "
                "(pocketmem creates the file itself) and try again"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            await self._wait(fd)
        except BaseException:
            os.close(fd)
            raise
        try:
            yield
        finally:
            _release(fd)

    async def _wait(self, fd: int) -> None:
        """Block until `fd` holds the lock; on failure `fd` is released and closed by one side or the other."""
        wait = _Wait(fd)
        try:
            with anyio.fail_after(self.timeout):
                await anyio.to_thread.run_sync(wait.block, abandon_on_cancel=True)
        except BaseException as exc:
            if wait.abandon():
                _release(fd)
            if isinstance(exc, TimeoutError):
                raise StoreError(self.busy) from None
            raise
