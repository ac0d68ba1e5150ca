"""The file lock (the store's write lock, the profile folder's): one holder at a time, across objects and
processes, never left held."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from pocketmem.base.errors import StoreError
from pocketmem.base.filelock import FileLock

pytestmark = pytest.mark.anyio


async def test_holders_take_turns_and_a_timed_out_waiter_leaves_nothing_held(tmp_path):
    path = str(tmp_path / "memory.db")
    first, second = FileLock(path + ".lock", 0.3, "busy"), FileLock(path + ".lock", 0.3, "busy")
    order: list[str] = []
    async with first.hold():
        with pytest.raises(StoreError, match="busy"):
            async with second.hold():
                order.append("never")
        async with anyio.create_task_group() as tg:  # a waiter whose request is cancelled
            tg.start_soon(_hold, second, order, "cancelled")
            await anyio.wait_all_tasks_blocked()  # it is waiting in its worker thread
            tg.cancel_scope.cancel()
        order.append("first")
    # The abandoned waiters get the lock after `first` lets go and release it at once, so a new holder gets it.
    with anyio.fail_after(10):
        async with FileLock(path + ".lock", 10, "busy").hold():
            order.append("third")
    assert order == ["first", "third"]


async def _hold(lock: FileLock, order: list[str], name: str) -> None:
    async with lock.hold():
        order.append(name)


async def test_another_process_waits_for_the_holder(tmp_path):
    # The child says when it starts to wait, then reports whether the holder had already let go when it got the
    # lock: the holder writes `released` only just before it lets go.
    path = str(tmp_path / "memory.db")
    released = tmp_path / "released"
    script = (
        "import fcntl, os, sys\n"
        f"fd = os.open({path + '.lock'!r}, os.O_RDWR | os.O_CREAT)\n"
        "print('waiting', flush=True); fcntl.flock(fd, fcntl.LOCK_EX)\n"
        f"print('got it after the release' if os.path.exists({str(released)!r}) else 'got it while held')\n"
    )
    async with FileLock(path + ".lock", 5, "busy").hold():
        child = await anyio.open_process([sys.executable, "-c", script], stdout=subprocess.PIPE)
        assert child.stdout is not None
        with anyio.fail_after(10):
            first = await child.stdout.receive()
        assert first.startswith(b"waiting")
        released.write_text("yes")
    with anyio.fail_after(10):
        rest = first + b"".join([chunk async for chunk in child.stdout])
        await child.wait()
    assert rest.decode().splitlines() == ["waiting", "got it after the release"]


def test_a_process_that_gave_up_waiting_exits_while_the_holder_still_holds(tmp_path):
    """`pocketmem add` said "busy" after its wait, then stayed until the other process let go: its waiting thread,
    blocked in flock(), was joined at exit."""
    lock = tmp_path / "memory.db.lock"
    lock.touch()
    holding = ("import fcntl, os, sys, time\n"
               f"fcntl.flock(os.open({str(lock)!r}, os.O_RDWR), fcntl.LOCK_EX)\n"
               "print('held', flush=True)\n"
               "time.sleep(600)\n")
    with subprocess.Popen([sys.executable, "-c", holding], stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            waiter = (
                "import anyio, sys\n"
                "from pocketmem.base.errors import StoreError\n"
                "from pocketmem.base.filelock import FileLock\n"
                "async def main():\n"
                f"    lock = FileLock({str(lock)!r}, 0.5, 'busy')\n"
                "    try:\n"
                "        async with lock.hold():\n"
                "            print('held by nobody', flush=True)\n"
                "    except StoreError:\n"
                "        print('busy', flush=True)\n"
                "anyio.run(main)\n"
            )
            done = subprocess.run([sys.executable, "-c", waiter], capture_output=True, text=True, timeout=120)
            assert done.returncode == 0 and done.stdout == "busy\n", done.stderr
            assert holder.poll() is None  # it exited while the lock was still held
        finally:
            holder.kill()
