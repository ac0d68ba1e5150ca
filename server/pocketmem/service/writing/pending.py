"""Answering a pending memory: confirm (it is stored), reject (never asked again) or snooze (asked later).

Pending memories are written by the write path (writing.py `pending_in`) when an add's confidence is
between the pending and the store thresholds, or when confirm-everything is on. A proposed profile change
waits in the same list (profile.py); confirming one applies it through the `confirm_profile` the app passes in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Literal

from pocketmem.base.clock import Clock
from pocketmem.base.errors import Conflict, ConflictReason, InvalidInput, NotFound
from pocketmem.base.models import OPEN_PENDING, EventKind, PendingItem, PendingStatus
from pocketmem.base.results import ConfirmResult
from pocketmem.core.shown_time import absolute
from pocketmem.service.writing.add_request import AddRequest, expired_episode
from pocketmem.service.writing.writing import Writing
from pocketmem.store.base import Transactions
from pocketmem.store.roles import WriteTx

MAX_SNOOZE_HOURS = 24 * 90


def require_open(item: PendingItem | None, pending_id: str) -> PendingItem:
    """The pending item, if it exists and is still waiting; otherwise NotFound or Conflict."""
    if item is None:
        raise NotFound(f"pending_id: no pending memory with id {pending_id!r}; see list_memories(status='pending')")
    if item.status not in OPEN_PENDING:
        detail = f" as memory {item.memory_id}" if item.memory_id else ""
        confirmed = item.status == PendingStatus.confirmed
        reason = ConflictReason.pending_confirmed if confirmed else ConflictReason.pending_rejected
        raise Conflict(f"pending {pending_id} was already {item.status.value}{detail}", reason, pending_id=pending_id)
    return item


class Pending:
    def __init__(
        self,
        store: Transactions,
        clock: Clock,
        writing: Writing,
        confirm_profile: Callable[[str, str], Awaitable[ConfirmResult]],
    ) -> None:
        self.store = store
        self.clock = clock
        self.writing = writing
        self.confirm_profile = confirm_profile

    async def confirm_pending(
        self, user_id: str, pending_id: str, action: Literal["confirm", "reject", "snooze"], snooze_hours: float | None
    ) -> ConfirmResult:
        async with self.store.read() as reader:
            item = require_open(await reader.get_pending(user_id, pending_id), pending_id)
        if action == "confirm":
            if "profile" in item.candidate:
                return await self.confirm_profile(user_id, pending_id)
            return await self._confirm(user_id, item)
        if action == "reject":
            return await self._reject(user_id, pending_id)
        return await self._snooze(user_id, pending_id, snooze_hours)

    async def _confirm(self, user_id: str, item: PendingItem) -> ConfirmResult:
        pending_id = item.id
        now = self.clock.now()
        said = AddRequest.model_validate({k: v for k, v in item.candidate.items() if k != "content_hash"})
        # Dated when the user said it, not when they confirmed it (an episode's expiry counts from then too).
        said_at = item.said_at()
        req = said.model_copy(update={"confidence": 1.0, "created_at": said_at})
        settings = self.writing.settings
        if (expired := expired_episode(req, settings, now)) is not None:
            raise Conflict(
                f"pending {pending_id} is an episode said on {absolute(said_at, settings.zone)}; it "
                f"expired on {absolute(expired, settings.zone)} ({settings.episode_days} days, "
                "POCKETMEM_EPISODE_DAYS) before it was confirmed, so it is not stored and stays pending: reject it, "
                "or add it again as another category (fact, event) if it still matters",
                ConflictReason.episode_expired, pending_id=pending_id, said=said_at, expired=expired,
                days=settings.episode_days,
            )
        req = self.writing.clean(req)
        vector = await self.writing.vectors.embed_or_defer(req.content, req.keywords)
        async with self.store.write(user_id=user_id) as tx:
            require_open(await tx.get_pending(user_id, pending_id), pending_id)
            # Settled first, so that store_in settles only the other items asking the same.
            await tx.update_pending(user_id, pending_id, status=PendingStatus.confirmed, updated_at=now)
            req, changed = await self._still_supersedable(tx, user_id, req)
            result = await self.writing.store_in(tx, user_id, req, vector, now)
            await tx.update_pending(user_id, pending_id, memory_id=result.memory_id, updated_at=now)
            await tx.add_event(
                user_id, EventKind.confirmed, now, memory_id=result.memory_id, payload={"pending_id": pending_id}
            )
        if vector is None:
            self.writing.vectors.deferred()
        return ConfirmResult(
            status=PendingStatus.confirmed,
            pending_id=pending_id,
            memory_id=result.memory_id,
            evicted=result.evicted,
            message=result.message + changed,
        )

    async def _still_supersedable(self, tx: WriteTx, user_id: str, req: AddRequest) -> tuple[AddRequest, str]:
        """Inside a transaction: the request as it can be stored now. The memory it was to supersede was checked
        when it was proposed (writing.supersede_target); if that memory has changed since (superseded, forgotten,
        made core), the user's yes still stores it, without superseding anything, and the sentence says so."""
        try:
            await self.writing.supersede_target(tx, user_id, req.supersedes)
        except (NotFound, Conflict) as exc:
            reason = str(exc).removeprefix("supersedes: ")
            return req.model_copy(update={"supersedes": None}), (
                f" Nothing was superseded, as the memory it was to replace changed after it was proposed: {reason}."
            )
        return req, ""

    async def _reject(self, user_id: str, pending_id: str) -> ConfirmResult:
        now = self.clock.now()
        async with self.store.write(user_id=user_id) as tx:
            require_open(await tx.get_pending(user_id, pending_id), pending_id)
            await tx.update_pending(user_id, pending_id, status=PendingStatus.rejected, updated_at=now)
            await tx.add_event(user_id, EventKind.rejected, now, payload={"pending_id": pending_id})
        return ConfirmResult(
            status=PendingStatus.rejected, pending_id=pending_id, message="Rejected; it will not be asked again."
        )

    async def _snooze(self, user_id: str, pending_id: str, snooze_hours: float | None) -> ConfirmResult:
        now = self.clock.now()
        hours = 24.0 if snooze_hours is None else snooze_hours
        if not 0 < hours <= MAX_SNOOZE_HOURS:
            raise InvalidInput("snooze_hours", f"must be more than 0 and at most {MAX_SNOOZE_HOURS}")
        until = now + timedelta(hours=hours)
        async with self.store.write(user_id=user_id) as tx:
            require_open(await tx.get_pending(user_id, pending_id), pending_id)
            await tx.update_pending(
                user_id, pending_id, status=PendingStatus.snoozed, cooldown_until=until, updated_at=now
            )
            await tx.add_event(user_id, EventKind.snoozed, now, payload={"pending_id": pending_id, "until": until})
        return ConfirmResult(
            status=PendingStatus.snoozed,
            pending_id=pending_id,
            cooldown_until=until,
            message=f"Snoozed; it comes back in recall results after {absolute(until, self.writing.settings.zone)}.",
        )
