"""A clock the test moves: production objects take it as `clock=` and its `sleep` as `sleep=`, so
a test asserts what happens at which time, never how fast the machine is."""

from __future__ import annotations

import asyncio

# time is a float: a sleeper due at `now + delay` may land a rounding error past the `now` the
# test moved to, and a pause computed as `until - now` may come out a rounding error above zero;
# both are due all the same
_ROUNDING_S = 1e-9


class FakeClock:
    """Time stands still until `advance`; `sleep(s)` returns once the clock has moved `s` on."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []
        self._asleep = asyncio.Event()  # set while anything sleeps
        self._watchers: list[asyncio.Future[float]] = []  # next_sleep() callers

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= _ROUNDING_S:
            await asyncio.sleep(0)  # still a yield, as asyncio.sleep(0) is
            return
        for watcher in self._watchers:
            if not watcher.done():
                watcher.set_result(seconds)
        self._watchers.clear()
        entry = (self.now + seconds, asyncio.get_running_loop().create_future())
        self._sleepers.append(entry)
        self._asleep.set()
        try:
            await entry[1]
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)
            if not self._sleepers:
                self._asleep.clear()

    async def advance(self, seconds: float) -> None:
        """Move time on; the sleepers now due wake and run until they wait again."""
        self.now += seconds
        for entry in [e for e in self._sleepers if e[0] <= self.now + _ROUNDING_S]:
            self._sleepers.remove(entry)
            if not entry[1].done():
                entry[1].set_result(None)
        if not self._sleepers:
            self._asleep.clear()
        await asyncio.sleep(0)  # the woken tasks were scheduled first: they run before we go on

    async def sleeping(self) -> float:
        """Once something sleeps on this clock: how long until the first sleeper is due."""
        await self._asleep.wait()
        return min(due for due, _ in self._sleepers) - self.now

    async def next_sleep(self) -> float:
        """How long the next `sleep` called from now on sleeps, once it is called."""
        watcher: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._watchers.append(watcher)
        return await watcher
