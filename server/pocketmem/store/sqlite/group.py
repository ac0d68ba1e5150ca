"""Group commit for SQLite: concurrent durable writes share one transaction and one fsync.

With WAL and synchronous=FULL every commit waits for the disk (1-3 ms here, far more on a busy
disk), and writers take turns on one lock, so N adds arriving together cost N fsyncs in a row. Here
each caller queues its unit of work; one committer takes everything queued, runs each unit inside
its own SAVEPOINT of a single BEGIN IMMEDIATE transaction, commits once, and only then answers every
caller. A unit that raises is rolled back to its savepoint and its caller gets the exception; the
others commit. Nothing is acknowledged before the commit that holds it, so durability is unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

MAX_GROUP = 64  # units per transaction: bounds how long one commit holds the write lock

Work = Callable[[Any], Awaitable[Any]]


class GroupCommitter:
    def __init__(self, begin: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
        self._begin = begin  # the store's locked write transaction
        self._queue: list[tuple[Work, asyncio.Future[Any]]] = []
        self._running: asyncio.Task[None] | None = None

    async def submit(self, work: Work) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((work, future))
        if self._running is None or self._running.done():
            self._running = asyncio.create_task(self._drain())
        return await asyncio.shield(future)  # a cancelled caller does not cancel the others' commit

    async def _drain(self) -> None:
        while self._queue:
            group, self._queue = self._queue[:MAX_GROUP], self._queue[MAX_GROUP:]
            await self._commit(group)

    async def _commit(self, group: list[tuple[Work, asyncio.Future[Any]]]) -> None:
        outcomes: list[tuple[asyncio.Future[Any], BaseException | None, Any]] = []
        try:
            async with self._begin() as tx:
                for work, future in group:
                    outcomes.append((future, *await _unit(tx, work)))
        except BaseException as exc:  # the commit (or the transaction) failed: nobody's work is kept
            for _, future in group:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for future, error, value in outcomes:
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)


async def _unit(tx: Any, work: Work) -> tuple[BaseException | None, Any]:
    await tx.execute("savepoint pm_unit")
    try:
        value = await work(tx)
    except Exception as exc:  # noqa: BLE001 - handed to its own caller
        await tx.execute("rollback to pm_unit")
        await tx.execute("release pm_unit")
        return exc, None
    await tx.execute("release pm_unit")
    return None, value
