"""A circuit breaker per provider: a provider that keeps failing is left alone for a while.

    closed ──(threshold failures in a row, or a retry-after we will not wait for)──► open
    open ──(cool-down over)──► half-open: one trial call at a time
    half-open ──trial succeeds──► closed;  ──trial fails──► open again

Without it every model call of a turn starts from zero: a primary that answers 503 is retried in
full each round while a healthy fallback waits. Only failures worth retrying (`ProviderUnavailable`)
count; a rejected request says nothing about the provider's health. The state is in memory and
shared by every conversation of the process: an outage is everyone's outage.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

State = Literal["closed", "open", "half-open"]

MAX_OPEN_S = 300.0  # a retry-after longer than this (a daily quota, a bogus header) is capped


class CircuitBreaker:
    def __init__(
        self,
        *,
        threshold: int = 3,
        open_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if threshold < 1:
            raise ValueError(f"threshold must be at least 1, got {threshold}")
        self.threshold = threshold
        self.open_s = open_s
        self._clock = clock
        self._failures = 0  # in a row
        self._open_until: float | None = None  # None: closed
        self._trial = False  # a half-open trial call is in flight

    @property
    def state(self) -> State:
        if self._open_until is None:
            return "closed"
        return "open" if self._clock() < self._open_until else "half-open"

    @property
    def usable(self) -> bool:
        """Would `acquire()` let a call through now (without taking the trial)?"""
        state = self.state
        return state == "closed" or (state == "half-open" and not self._trial)

    @property
    def open_for_s(self) -> float:
        """Seconds until the cool-down is over (0 when not open)."""
        if self._open_until is None:
            return 0.0
        return max(0.0, self._open_until - self._clock())

    def acquire(self) -> State | None:
        """May a call go to this provider now? None: no (open, or a trial is already out).
        "half-open": yes, as the one trial call, which must end in `success()`, `failure()` or
        `release()`."""
        state = self.state
        if state == "open" or (state == "half-open" and self._trial):
            return None
        self._trial = state == "half-open"
        return state

    def success(self) -> None:
        self._failures = 0
        self._open_until = None
        self._trial = False

    def failure(self, *, open_for_s: float | None = None) -> None:
        """One failed attempt. `open_for_s`: the server said when it will serve again and we will
        not wait that long: open now, until then (at least the cool-down)."""
        self._failures += 1
        self._trial = False
        tripped = self._failures >= self.threshold or self._open_until is not None
        if tripped or open_for_s is not None:
            pause = max(self.open_s, min(open_for_s or 0.0, MAX_OPEN_S))
            self._open_until = self._clock() + pause

    def release(self) -> None:
        """The trial call ended without a verdict (cancelled, or refused for its own content)."""
        self._trial = False
