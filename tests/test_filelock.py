"""The per-file write lock: one holder at a time, across objects and processes, never left held."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from pocketmem.base.errors import StoreError
from pocketmem.store.sqlite.filelock import FileWriteLock

pytestmark = pytest.mark.anyio


async def test_holders_take_turns_and_a_timed_out_waiter_leaves_nothing_held(tmp_path):
    path = str(tmp_path / "memory.db")
    first, second = FileWriteLock(path, timeout=0.3), FileWriteLock(path, timeout=0.3)
    order: list[str] = []
    async with first.hold():
        with pytest.raises(StoreError, match="busy"):
            async with second.hold():
                order.append("never")
        async with anyio.create_task_group() as tg:  # a waiter whose request is cancelled
            tg.start_soon(_hold, second, order, "cancelled")
            await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        order.append("first")
    # The abandoned waiters got the lock after `first` let go and released it at once.
    await anyio.sleep(0.2)
    with anyio.fail_after(2):
        async with FileWriteLock(path, timeout=1).hold():
            order.append("third")
    assert order == ["first", "third"]


async def _hold(lock: FileWriteLock, order: list[str], name: str) -> None:
    async with lock.hold():
        order.append(name)


async def test_another_process_waits_for_the_holder(tmp_path):
    path = str(tmp_path / "memory.db")
    script = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({path + '.lock'!r}, os.O_RDWR | os.O_CREAT)\n"
        "t = time.monotonic(); fcntl.flock(fd, fcntl.LOCK_EX); print(round(time.monotonic() - t, 2))\n"
    )
    async with FileWriteLock(path, timeout=5).hold():
        child = await anyio.open_process([sys.executable, "-c", script], stdout=subprocess.PIPE)
        await anyio.sleep(0.5)
        assert child.returncode is None  # still waiting
    assert child.stdout is not None
    with anyio.fail_after(10):
        output = b"".join([chunk async for chunk in child.stdout])
        await child.wait()
    waited = float(output.decode())
    assert waited >= 0.3
