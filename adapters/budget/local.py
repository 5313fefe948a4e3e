"""`LocalRateBudget`: the `RateBudget` of one process, its scopes in memory."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from adapters.budget.base import Busy, Rank, Rate

_ORDER = {"final": 0, "send": 1}  # waiting ranks, best first; previews never wait
_PRUNE_AT = 10_000  # scopes remembered before idle ones are forgotten


@dataclass(slots=True, eq=False)
class _Scope:
    free_at: float = 0.0  # not before: the spacing after the last call, or a 429 penalty
    busy: bool = False  # as an own scope: a call is in flight
    queue: list[tuple[int, int]] = field(default_factory=list)  # heap of (rank, arrival)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    tat: float = 0.0  # as a shared scope: the GCRA's theoretical arrival time of the next call
    held: int = 0  # as a shared scope: finals and sends sleeping until it allows them

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    def idle(self, now: float) -> bool:
        return not (self.busy or self.queue or self.held) and max(self.free_at, self.tat) < now


class LocalRateBudget:
    """One process's budget; every channel in it may share one instance (scopes name the bot)."""

    def __init__(self) -> None:
        self._scopes: dict[str, _Scope] = {}
        self._arrivals = itertools.count()

    @asynccontextmanager
    async def slot(
        self, scope: str, rank: Rank, *, interval_s: float, rates: Sequence[Rate] = ()
    ) -> AsyncIterator[None]:
        """Hold `scope` for one call; previews raise `Busy` at once instead of waiting."""
        if scope not in self._scopes and len(self._scopes) >= _PRUNE_AT:
            self._prune()  # only here: shared scopes are looked up while `own` may look idle
        own = self._scope(scope)
        if rank in _ORDER:
            await self._wait_turn(own, rates, _ORDER[rank])
        else:
            shared = self._shared(rates)
            delay = max([own.free_at - time.monotonic()] + [d for _, _, d in shared])
            if own.busy or own.queue:  # whoever holds or waits for the slot goes first
                raise Busy(max(delay, 0.0) + interval_s)
            for state, rate, rate_delay in shared:
                if state.held:  # finals and sends in other scopes wait for this rate: yield
                    delay = max(delay, rate_delay + state.held / rate.per_second)
            if delay > 0:
                raise Busy(delay)
            self._take(own, rates)
        try:
            yield
        finally:
            own.busy = False
            own.free_at = max(own.free_at, time.monotonic() + interval_s)
            own.notify()

    async def penalize(self, scope: str, retry_after: float) -> None:
        """The platform said 429: nothing starts in `scope` for `retry_after` seconds."""
        state = self._scope(scope)
        state.free_at = max(state.free_at, time.monotonic() + retry_after)
        state.notify()

    async def _wait_turn(self, own: _Scope, rates: Sequence[Rate], order: int) -> None:
        ticket = (order, next(self._arrivals))
        heapq.heappush(own.queue, ticket)
        try:
            while True:
                while own.busy or own.queue[0] != ticket:
                    await own.changed.wait()
                own_delay = own.free_at - time.monotonic()
                shared = self._shared(rates)
                delay = max([own_delay] + [d for _, _, d in shared])
                if delay <= 0:
                    break
                # The rates this call is held back by, so previews elsewhere yield them to it.
                held = [state for state, _, d in shared if d >= own_delay]
                for state in held:
                    state.held += 1
                try:
                    await asyncio.sleep(delay)  # then look again: a final may have come first
                finally:
                    for state in held:
                        state.held -= 1
        except BaseException:
            own.queue.remove(ticket)
            heapq.heapify(own.queue)
            own.notify()
            raise
        heapq.heappop(own.queue)
        self._take(own, rates)

    def _take(self, own: _Scope, rates: Sequence[Rate]) -> None:
        now = time.monotonic()
        own.busy = True
        for rate in rates:
            state = self._scope(rate.scope)
            state.tat = max(state.tat, now) + 1.0 / rate.per_second

    def _shared(self, rates: Sequence[Rate]) -> list[tuple[_Scope, Rate, float]]:
        """Each shared scope, its rate, and how long it still says "not yet" (<= 0: now)."""
        now = time.monotonic()
        shared = []
        for rate in rates:
            # Looked up afresh each time: an idle scope may have been pruned while we waited.
            state = self._scope(rate.scope)
            burst_s = (rate.burst - 1) / rate.per_second  # `burst` calls may go at once
            shared.append((state, rate, max(state.tat - burst_s - now, state.free_at - now)))
        return shared

    def _scope(self, scope: str) -> _Scope:
        state = self._scopes.get(scope)
        if state is None:
            state = self._scopes[scope] = _Scope()
        return state

    def _prune(self) -> None:
        now = time.monotonic()
        for scope, state in list(self._scopes.items()):
            if state.idle(now):
                del self._scopes[scope]
