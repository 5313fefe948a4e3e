"""The queue timeout: a handoff nobody took within `handoff.queue_timeout_s` goes back to the bot.

One timer for all of this process's waiting handoffs: it sleeps until the earliest deadline or
until a new one is added (an event, not a polling loop). `run` starts with every waiting handoff
in the store, so after a restart the ones left behind still expire; `desk.expire` is a
compare-and-set, so two processes firing for one handoff move it once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

log = logging.getLogger(__name__)

RETRY_S = 30.0
Expire = Callable[[str], Awaitable[None]]


class Timeouts:
    def __init__(self, expire: Expire, *, clock: Callable[[], float] = time.time) -> None:
        self.expire = expire
        self.clock = clock
        self._due: dict[str, float] = {}
        self._wake = asyncio.Event()

    def add(self, handoff_id: str, at: float) -> None:
        self._due[handoff_id] = at
        self._wake.set()

    def cancel(self, handoff_id: str) -> None:
        self._due.pop(handoff_id, None)

    def pending(self) -> int:
        return len(self._due)

    async def run(self, waiting: Iterable[tuple[str, float]] = ()) -> None:
        """Until cancelled: each deadline, once it passes, expires its handoff."""
        for handoff_id, at in waiting:
            self._due.setdefault(handoff_id, at)
        while True:
            self._wake.clear()
            if not self._due:
                await self._wake.wait()
                continue
            handoff_id, at = min(self._due.items(), key=lambda item: item[1])
            delay = at - self.clock()
            if delay > 0:
                try:
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
                except TimeoutError:
                    pass
                continue
            self._due.pop(handoff_id, None)
            try:
                await self.expire(handoff_id)
            except Exception:  # tried again later; the next deadline still fires
                log.exception("handoff %s: the queue timeout failed; retrying", handoff_id)
                self._due.setdefault(handoff_id, self.clock() + RETRY_S)
