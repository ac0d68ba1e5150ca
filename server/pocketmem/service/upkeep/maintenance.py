"""Maintenance: the store's life over time, run by `pocketmem maintain` and by the server on a timer.

One run, for every user, at one instant `now`:

    1. expire   active or superseded non-core memories whose expires_at has come (episodes: created_at
                + POCKETMEM_EPISODE_DAYS) move to the trash, reason `expired`, restorable until purged
    2. purge    trashed memories whose purge_at has come are deleted for good, with their vector, keyword
                row, revisions and usage; their tombstones stay (marked purged_at), event `purged`. With a
                cloud library, what sync has yet to carry there waits (unsent.py: evicted memories not pushed)
    3. rescore  stored time_coef / importance are refreshed to the formula at `now` (scoring.py); they
                feed the candidate order of recall. The values follow from the formula, so the log gets
                one `rescored` event with the count per user and run (per 500 memories), not one per memory;
                each chunk of 500 is read first without the write lock, which only a chunk with a change takes
    4. cap      over POCKETMEM_MAX_ACTIVE (lowered since the last write, or after an import), the least
                important non-core memories are evicted to the trash as after a write

Every step runs in write transactions that select their rows inside the transaction, so a run is
idempotent (a second run at the same `now` changes nothing and logs nothing) and two processes may
run it at the same time without doing anything twice.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import anyio
from pydantic import BaseModel, Field

from pocketmem.base.clock import Clock, monotonic
from pocketmem.base.config import Settings
from pocketmem.base.errors import PocketmemError, StoreUnreachable, UnreadableRow
from pocketmem.base.models import DeleteReason, EventKind, Status
from pocketmem.base.progress import Progress, no_progress
from pocketmem.core.instants import UnreadableInstant
from pocketmem.core.scoring import importance
from pocketmem.service.upkeep.unsent import unsent
from pocketmem.service.writing.trash import Trash
from pocketmem.store.base import UpkeepStore
from pocketmem.store.types import ScoreRow

log = logging.getLogger(__name__)

BATCH = 200
RESCORE_BATCH = 500  # memories per rescore chunk: bounds how long one chunk holds the write lock
RESCORED = (Status.active, Status.superseded)
FIRST_RUN_DELAY = 2.0  # seconds after start, so the first run never competes with the MCP handshake
RETRY_FIRST = 30.0  # seconds before the first retry after a failed run (doubling, up to the interval)
# Scores are rewritten only when they moved by more than this: a change below it alters no ranking or
# eviction, and rewriting every row on every run (decay moves each a little every hour) is what made a
# pass over a large store write its whole size.
EPSILON = 1e-3


class UserReport(BaseModel):
    user_id: str
    expired: list[str] = Field(default_factory=list)
    purged: list[str] = Field(default_factory=list)
    rescored: int = 0
    evicted: list[str] = Field(default_factory=list)
    skipped: list[dict[str, str]] = Field(
        default_factory=list, description="rows that could not be read (table, user_id, id, why); others went on"
    )

    @property
    def changed(self) -> bool:
        return bool(self.expired or self.purged or self.rescored or self.evicted)


class MaintenanceReport(BaseModel):
    now: datetime
    users: list[UserReport]
    changed: bool = Field(description="false when the run found nothing to do")


class Maintenance:
    def __init__(self, settings: Settings, store: UpkeepStore, clock: Clock, trash: Trash) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.trash = trash
        self._lock = anyio.Lock()
        self.last_run: float | None = None  # monotonic() of the last finished run
        self._checked = False  # the structural check (store.quick_check) runs on the first run only

    async def run(self, now: datetime | None = None, progress: Progress = no_progress) -> MaintenanceReport:
        now = now or self.clock.now()
        async with self._lock:
            async with self.store.read() as reader:
                users = await reader.user_ids()
            reports = []
            for done, user_id in enumerate(users, 1):
                reports.append(await self._run_user(user_id, now))
                progress(done, len(users))
            if not self._checked:  # once per process: a full read of the file, so not on every run
                self._checked = True
                await self.store.quick_check()
            await self.store.optimize()
            self.last_run = monotonic()
        changed = [r for r in reports if r.changed]
        if changed:
            log.info("maintenance at %s: %s", now.isoformat(), [r.model_dump() for r in changed])
        return MaintenanceReport(now=now, users=reports, changed=bool(changed))

    async def _run_user(self, user_id: str, now: datetime) -> UserReport:
        """One user's pass; each step stands alone, so a row that cannot be read stops only the step it is in."""
        report = UserReport(user_id=user_id)
        steps: list[tuple[str, Callable[[str, datetime], Awaitable[Any]]]] = [
            ("expired", self._expire), ("purged", self._purge), ("rescored", self._rescore), ("evicted", self._cap),
        ]
        for name, step in steps:
            try:
                setattr(report, name, await step(user_id, now))
            except StoreUnreachable:
                raise  # the store is gone for every user and step: the run stops, the timer tries again soon
            except UnreadableRow as exc:
                log.warning("maintenance of %s: %s skipped: %s", user_id, name, exc)
                report.skipped.append({**exc.as_report(), "step": name})
            except UnreadableInstant as exc:
                log.warning("maintenance of %s: %s skipped: a stored time cannot be read: %s", user_id, name, exc)
                report.skipped.append({"user_id": user_id, "step": name, "why": str(exc)})
            except Exception as exc:  # noqa: BLE001 - one user's fault must not stop maintenance for the others
                # One line (a named fault, a damaged or read-only store, says it all); the traceback at DEBUG.
                why = str(exc) if isinstance(exc, PocketmemError) else f"{type(exc).__name__}: {exc}"
                log.error("maintenance of %s: %s failed: %s", user_id, name, why)
                log.debug("maintenance of %s: %s failed", user_id, name, exc_info=True)
                report.skipped.append({"user_id": user_id, "step": name, "why": f"{type(exc).__name__}: {exc}"})
        return report

    async def _expire(self, user_id: str, now: datetime) -> list[str]:
        done: list[str] = []
        while True:
            async with self.store.write(user_id=user_id) as tx:
                batch = await tx.expired_memories(user_id, now, BATCH)
                for memory in batch:
                    await self.trash.trash_memory(
                        tx,
                        user_id,
                        memory,
                        DeleteReason.expired,
                        EventKind.expired,
                        now,
                        note=f"expires_at {memory.expires_at.isoformat() if memory.expires_at else ''}",
                    )
                    done.append(memory.id)
            if len(batch) < BATCH:
                return done

    async def _purge(self, user_id: str, now: datetime) -> list[str]:
        done: list[str] = []
        while True:
            async with self.store.write(user_id=user_id) as tx:
                batch = await tx.purgeable_memories(user_id, now, BATCH, await unsent(self.settings, tx, user_id))
                for memory in batch:
                    if await tx.purge_memory(user_id, memory.id, now):
                        await tx.add_event(
                            user_id,
                            EventKind.purged,
                            now,
                            memory_id=memory.id,
                            payload={
                                "reason": memory.delete_reason.value if memory.delete_reason else None,
                                "deleted_at": memory.deleted_at.isoformat() if memory.deleted_at else None,
                            },
                        )
                        done.append(memory.id)
            if len(batch) < BATCH:
                return done

    async def _rescore(self, user_id: str, now: datetime) -> int:
        """Chunks of RESCORE_BATCH memories in id order. Each is read without the write lock; only a chunk with
        a score to change takes it, for that chunk alone (read again inside, so a memory written meanwhile is
        scored as it is now). Adds and recalls wait for one chunk at most, never for the whole pass."""
        count = 0
        after: str | None = None
        while True:
            async with self.store.read() as reader:
                batch = await reader.scan_scores(user_id, RESCORED, after, RESCORE_BATCH)
            if _changed_scores(batch, now):
                written, batch = await self._rescore_chunk(user_id, now, after)
                count += written
            if len(batch) < RESCORE_BATCH:
                return count
            after = batch[-1].id

    async def _rescore_chunk(self, user_id: str, now: datetime, after: str | None) -> tuple[int, list[ScoreRow]]:
        async with self.store.write(user_id=user_id) as tx:
            batch = await tx.scan_scores(user_id, RESCORED, after, RESCORE_BATCH)
            changed = _changed_scores(batch, now)
            if changed:
                await tx.update_scores(user_id, changed)
                await tx.add_event(
                    user_id, EventKind.rescored, now, payload={"count": len(changed), "at": now.isoformat()}
                )
        return len(changed), batch

    async def _cap(self, user_id: str, now: datetime) -> list[str]:
        async with self.store.write(user_id=user_id) as tx:
            evicted = await self.trash.enforce_cap(tx, user_id, now, keep=[])
        return [item.id for item in evicted]

    async def run_periodically(
        self, interval: float, after_run: Callable[[MaintenanceReport], Awaitable[None]] | None = None
    ) -> None:
        """The server's timer: a first run soon after start, then one every `interval` seconds; after a failed run
        again soon, RETRY_FIRST seconds doubling per failure up to the interval (a database server that is down
        or restarting comes back, and the 7-day purge should not wait an interval for it).

        Several connections may each run this loop over one store; a tick is skipped when a run finished
        less than half an interval ago, so the store is still maintained about once per interval.
        """
        await anyio.sleep(min(FIRST_RUN_DELAY, interval))
        failures = 0
        while True:
            if self.last_run is None or monotonic() - self.last_run >= interval / 2:
                try:
                    report = await self.run()
                    failures = 0
                    if after_run is not None:
                        await after_run(report)
                except Exception as exc:  # noqa: BLE001 - a failed run must not stop the timer or the server
                    failures += 1
                    _say_failure(exc, retry_delay(interval, failures))
            await anyio.sleep(retry_delay(interval, failures))


def retry_delay(interval: float, failures: int) -> float:
    """Seconds before the next run: the interval, or after `failures` failed runs in a row RETRY_FIRST doubled per
    failure, never longer than the interval."""
    if failures <= 0:
        return interval
    return min(interval, RETRY_FIRST * 2 ** min(failures - 1, 20))


def _say_failure(exc: Exception, delay: float) -> None:
    """An outage of the store (StoreUnreachable: its message names the server and the cause) in one WARNING line;
    anything else with its traceback, as the fault it is."""
    if isinstance(exc, StoreUnreachable):
        log.warning("maintenance could not reach the store: %s; trying again in %.0f s", exc, delay)
    else:
        log.exception("maintenance run failed; trying again in %.0f s", delay)


def _changed_scores(batch: list[ScoreRow], now: datetime) -> list[tuple[str, float, float, float]]:
    """(id, info_importance, time_coef, importance) at `now` of the rows whose stored values moved by over EPSILON."""
    changed = []
    for row in batch:
        info, coef, imp = importance(row.scores, row.last_active, now)
        if (
            abs(info - row.info_importance) > EPSILON
            or abs(coef - row.time_coef) > EPSILON
            or abs(imp - row.importance) > EPSILON
        ):
            changed.append((row.id, info, coef, imp))
    return changed
