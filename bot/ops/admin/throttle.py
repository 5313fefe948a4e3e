"""Failed admin sign-ins are throttled, so the token cannot be guessed fast from any number of
addresses.

Per address: after `LIMIT` wrong tokens from one address within `WINDOW_S`, that address gets
429 with a `Retry-After` for every admin request, right token or not, until the oldest failure
leaves the window: were the right token let through, a guesser would still learn it by the
answer changing.

In all: an attacker with many addresses (127.0.0.0/8 is 16 million, an IPv6 /64 more) would
start fresh on each, so after `GLOBAL_LIMIT` wrong tokens from all addresses together within
`WINDOW_S`, every address is held off the same way. That lock must not keep the real admin out
for as long as an attack lasts, so it spares (a) a browser already signed in (its cookie is
checked before any token: bot/ops/admin/__init__.py) and (b) an address that proved the token
within `KNOWN_S`; those keep their own per-address limit, so sharing the admin's address buys
an attacker no more than `LIMIT` guesses per window. Requests refused while locked are not
counted: the lock ends `WINDOW_S` after the guessing stops. Per-address memory is bounded: the
addresses with the oldest failures are forgotten first.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable

log = logging.getLogger(__name__)

LIMIT = 10
GLOBAL_LIMIT = 100
WINDOW_S = 300.0
KNOWN_S = 7 * 86400.0
ADDRESSES = 10_000
KNOWN = 1_000


class SignInThrottle:
    def __init__(
        self,
        limit: int = LIMIT,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
        *,
        global_limit: int = GLOBAL_LIMIT,
    ) -> None:
        self._limit = limit
        self._global_limit = global_limit
        self._window_s = window_s
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._all: deque[float] = deque(maxlen=global_limit)  # the newest failures, any address
        self._known: OrderedDict[str, float] = OrderedDict()  # address -> when it proved the token

    def retry_after(self, address: str) -> int | None:
        """Seconds until `address` may try again, or None when it may try now."""
        failures = self._recent(address)
        if len(failures) >= self._limit:
            return self._until(failures[0])
        if self._is_known(address):
            return None
        cutoff = self._clock() - self._window_s
        while self._all and self._all[0] <= cutoff:
            self._all.popleft()
        if len(self._all) >= self._global_limit:
            return self._until(self._all[0])
        return None

    def failed(self, address: str) -> None:
        failures = self._recent(address)
        failures.append(self._clock())
        self._failures[address] = failures
        self._failures.move_to_end(address)
        while len(self._failures) > ADDRESSES:
            self._failures.popitem(last=False)
        self._all.append(self._clock())
        if len(self._all) == self._global_limit and self._all[0] > self._clock() - self._window_s:
            log.warning(
                "admin: %d wrong tokens in %.0f s from all addresses; sign-in is held off for"
                " every address that has not signed in before (the last from %s)",
                self._global_limit,
                self._window_s,
                address,
            )

    def succeeded(self, address: str) -> None:
        """`address` proved the token: a lock on everyone else does not hold it off."""
        self._known[address] = self._clock()
        self._known.move_to_end(address)
        while len(self._known) > KNOWN:
            self._known.popitem(last=False)

    def _is_known(self, address: str) -> bool:
        proved = self._known.get(address)
        return proved is not None and self._clock() - proved < KNOWN_S

    def _until(self, oldest: float) -> int:
        return max(1, math.ceil(oldest + self._window_s - self._clock()))

    def _recent(self, address: str) -> deque[float]:
        failures = self._failures.get(address, deque())
        cutoff = self._clock() - self._window_s
        while failures and failures[0] <= cutoff:
            failures.popleft()
        if not failures:
            self._failures.pop(address, None)
        return failures
