"""Failed admin sign-ins are throttled per client address, so the token cannot be guessed fast.

After `LIMIT` wrong tokens from one address within `WINDOW_S`, that address gets 429 with a
`Retry-After` for every admin request, right token or not, until the oldest failure leaves the
window: were the right token let through, a guesser would still learn it by the answer changing.
The memory is bounded: the addresses with the oldest failures are forgotten first.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable

LIMIT = 10
WINDOW_S = 300.0
ADDRESSES = 10_000


class SignInThrottle:
    def __init__(
        self,
        limit: int = LIMIT,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limit = limit
        self._window_s = window_s
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, address: str) -> int | None:
        """Seconds until `address` may try again, or None when it may try now."""
        failures = self._recent(address)
        if len(failures) < self._limit:
            return None
        return max(1, math.ceil(failures[0] + self._window_s - self._clock()))

    def failed(self, address: str) -> None:
        failures = self._recent(address)
        failures.append(self._clock())
        self._failures[address] = failures
        self._failures.move_to_end(address)
        while len(self._failures) > ADDRESSES:
            self._failures.popitem(last=False)

    def _recent(self, address: str) -> deque[float]:
        failures = self._failures.get(address, deque())
        cutoff = self._clock() - self._window_s
        while failures and failures[0] <= cutoff:
            failures.popleft()
        if not failures:
            self._failures.pop(address, None)
        return failures
