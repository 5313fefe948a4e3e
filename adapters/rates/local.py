"""`LocalInboundRates`: the `InboundRates` of one process, a token bucket per identity in an LRU.

A bucket that has refilled is forgotten (a new one is the same, full), so identities that
stopped sending cost nothing, and `max_identities` bounds the rest.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from adapters.rates.base import burst

MAX_IDENTITIES: Final = 100_000


class TokenBucket:
    """`per_minute` messages a minute on average, at most `min(10, per_minute)` in a burst."""

    __slots__ = ("_capacity", "_per_second", "tokens", "updated")

    def __init__(self, per_minute: int, now: float) -> None:
        self._capacity = float(burst(per_minute))
        self._per_second = per_minute / 60
        self.tokens = self._capacity
        self.updated = now

    @property
    def refill_s(self) -> float:
        """Seconds after its last use by which the bucket is full again."""
        return self._capacity / self._per_second

    def wait_s(self, now: float) -> float:
        """Seconds from `now` until the bucket holds a whole token again."""
        tokens = self.tokens + (now - self.updated) * self._per_second
        return max(0.0, (1 - tokens) / self._per_second)

    def take(self, now: float) -> bool:
        self.tokens = min(self._capacity, self.tokens + (now - self.updated) * self._per_second)
        self.updated = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class RateLimiter:
    """One token bucket per identity, shared by all its sockets; bounded memory."""

    def __init__(
        self,
        per_minute: int,
        *,
        max_identities: int = MAX_IDENTITIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_minute = per_minute
        self._max_identities = max_identities
        self._clock = clock
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, identity: str) -> bool:
        """Spend one message of `identity`'s budget; False when it has none left."""
        now = self._clock()
        self._forget_refilled(now)
        bucket = self._buckets.pop(identity, None) or TokenBucket(self.per_minute, now)
        self._buckets[identity] = bucket
        if len(self._buckets) > self._max_identities:
            self._buckets.popitem(last=False)
        return bucket.take(now)

    def wait_s(self, identity: str) -> float:
        """Seconds until `identity` may send again (0 when it may now)."""
        bucket = self._buckets.get(identity)
        return bucket.wait_s(self._clock()) if bucket is not None else 0.0

    def _forget_refilled(self, now: float) -> None:
        # Every take moves its bucket to the end, so the first bucket is the one used longest ago.
        while self._buckets:
            oldest = next(iter(self._buckets.values()))
            if now - oldest.updated < oldest.refill_s:
                return
            self._buckets.popitem(last=False)


class LocalInboundRates:
    """The `InboundRates` of one process: a bounded `RateLimiter` per configured rate."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._limiters: dict[int, RateLimiter] = {}
        self._clock = clock

    async def take(self, scope: str, per_minute: int) -> float:
        return self.take_now(scope, per_minute)

    def take_now(self, scope: str, per_minute: int) -> float:
        limiter = self._limiters.get(per_minute)
        if limiter is None:
            limiter = self._limiters[per_minute] = RateLimiter(per_minute, clock=self._clock)
        if limiter.take(scope):
            return 0.0
        return max(limiter.wait_s(scope), 1e-3)
