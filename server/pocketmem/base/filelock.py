"""An exclusive lock on a file, across processes, served in turn: the store's writers on `<db>.lock`, the
profile files' take-in and rewrite on the folder's `.pocketmem-store`.

SQLite lets a second writer wait with its busy handler, which sleeps and retries with growing
pauses (up to 100 ms). Under steady load from several processes a waiter keeps missing the short
gaps between other writers' transactions and can wait many seconds, then fail with "database is
locked". Taking an exclusive `flock` on `<db>.lock` before `BEGIN IMMEDIATE` makes waiters block
in the kernel instead, which wakes them as soon as the lock is free, so writes from every process
are served in turn and SQLite's own wait is rarely needed.

The blocking call runs in a daemon thread of its own, which the process need not join: a command
that gave up waiting (busy, after the timeout) exits at once, not when the other process lets go.
If the waiting request is cancelled or times out, the thread may still get the lock later;
whichever side sees the other's flag releases it, so the lock is never left held by nobody. Where
`fcntl` does not exist (Windows) this lock does nothing and SQLite's busy timeout alone applies.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.from_thread
import anyio.lowlevel

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
        self.error: OSError | None = None

    def block(self, done: Callable[[], None]) -> None:
        """In a daemon thread: wait for the lock; release it at once if nobody wants it any more. `done` is
        called at the end, whatever happened."""
        assert fcntl is not None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError as exc:
            with self.mutex:
                self.error = exc
                if self.abandoned:
                    os.close(self.fd)
        else:
            with self.mutex:
                if self.abandoned:
                    _release(self.fd)
                else:
                    self.acquired = True
        done()

    def abandon(self) -> bool:
        """Give up waiting; True when the wait has ended (the lock ours, or an error): the caller must then release
        the lock or close the descriptor."""
        with self.mutex:
            self.abandoned = True
            return self.acquired or self.error is not None


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
        wait, done = _Wait(fd), anyio.Event()
        token = anyio.lowlevel.current_token()

        def wake() -> None:
            with suppress(anyio.RunFinishedError):  # the loop has ended: nobody waits any more
                anyio.from_thread.run_sync(done.set, token=token)

        threading.Thread(target=wait.block, args=(wake,), name="pocketmem-lock-wait", daemon=True).start()
        try:
            with anyio.fail_after(self.timeout):
                await done.wait()
            if wait.error is not None:
                raise wait.error
        except BaseException as exc:
            if wait.abandon():  # the wait had ended: the lock is ours to release, or the descriptor to close
                if wait.acquired:
                    _release(fd)
                else:
                    os.close(fd)
            if isinstance(exc, TimeoutError):
                raise StoreError(self.busy) from None
            raise
