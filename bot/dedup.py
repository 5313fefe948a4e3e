"""Claim each platform event once: a bounded, time-limited set of seen event ids (embedded mode)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable


class MemoryDedup:
    """`claim(id)` is True the first time an id is seen within `ttl_s`, False after that.

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

    def claim(self, event_id: str) -> bool:
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

    def release(self, event_id: str) -> None:
        """Forget a claim whose event produced nothing, so the platform's retry is answered."""
        self._seen.pop(event_id, None)

    def __len__(self) -> int:
        return len(self._seen)
