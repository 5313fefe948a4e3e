"""Claim each platform event once: the `Dedup` seam, in memory or durable in the store.

Platforms redeliver: Telegram after a restart that did not confirm an update, Slack up to three
times, Feishu for about seven hours. One inbound event must get one reply, so the gateway claims
its id before anything else; a claim whose event produced nothing visible is released so the
platform's retry is answered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from adapters.base import TryLater
from bot.storage.roles import ClaimRecords

log = logging.getLogger(__name__)

UNCLAIM_RETRIES_S = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)


class Dedup(Protocol):
    """`claim(id)` is True exactly once per id within the TTL, across everything sharing it."""

    async def claim(self, event_id: str) -> bool: ...

    async def release(self, event_id: str) -> None:
        """Forget a claim whose event produced nothing, so the platform's retry is answered."""
        ...

    async def reopen(self, event_id: str) -> None:
        """The event's turn ended without keeping it (no placeholder posted, nothing stored) and
        asked for a retry: forget the event everywhere it was remembered, the queue included, so
        the platform's redelivery is taken as new. Not for an event that was never queued: a
        queue that remembers events (Redis) does so against a lost reply's double."""
        ...


class StoreDedup:
    """Claims kept in the store (SQLite: the `event_claims` table), so a restart remembers them."""

    def __init__(self, store: ClaimRecords, *, ttl_s: float = 86400) -> None:
        self.store = store
        self.ttl_s = ttl_s

    async def claim(self, event_id: str) -> bool:
        return await self.store.claim_event(event_id, self.ttl_s)

    async def release(self, event_id: str) -> None:
        await self.store.release_event(event_id)

    async def reopen(self, event_id: str) -> None:
        await self.release(event_id)  # the embedded queue remembers no event


class ClaimsAhead(StoreDedup):
    """The gateway's claims in the store, made by a channel before the gateway sees the event
    (`Claims` to the channel): the web socket's echo must know whether a resend was answered
    before it publishes it. The gateway's own claim of the event then costs no statement."""

    async def claim(self, event_id: str) -> bool:
        return await self.store.claim_event_ahead(event_id, self.ttl_s)


class MemoryDedup:
    """A bounded, time-limited set of seen ids in this process (tests, `bot chat`).

    Every entry lives equally long, so insertion order is expiry order: expired ids are dropped
    from the front, and the oldest go first when `max_entries` is reached.
    """

    def __init__(
        self,
        *,
        ttl_s: float = 86400,
        max_entries: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()

    async def claim(self, event_id: str) -> bool:
        now = self._clock()
        seen = self._seen
        while seen:
            oldest, expires = next(iter(seen.items()))
            if expires > now and len(seen) < self.max_entries:
                break
            del seen[oldest]
        if event_id in seen:
            return False
        seen[event_id] = now + self.ttl_s
        return True

    async def release(self, event_id: str) -> None:
        self._seen.pop(event_id, None)

    async def reopen(self, event_id: str) -> None:
        await self.release(event_id)

    def __len__(self) -> int:
        return len(self._seen)


async def release_retrying(dedup: Dedup, event_id: str) -> None:
    """The event was claimed but could not be queued (Redis went down in between): release
    the claim, so the redelivery the channel asks for is answered. Retried for a while: the
    same outage that refused the queue may refuse this too."""
    for delay in UNCLAIM_RETRIES_S:
        try:
            await dedup.release(event_id)
            return
        except TryLater:
            await asyncio.sleep(delay)
    log.error("event %s was claimed but not queued, and its claim not released", event_id)
