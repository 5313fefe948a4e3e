"""Deadlines for one model call: connect, first token and total, fit for chat (not 600 s).

The SDK's httpx timeouts bound connecting and every silence on the wire (read = the first-token
deadline). `Deadline` adds what httpx cannot see: a server that answers at once but sends no
content (pings, or an empty opening event), and the total for one call. Keep-alives (Anthropic
`ping` events, SSE comments) reset httpx's read timeout but never reach us, so a server that
pings forever is only stopped by the total deadline: every await on the stream, before and after
the first token, is bounded. The timeout covers each await, never a `yield`: a timeout spanning a
yield would fire inside the consumer's code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

import httpx2

from agent.providers.base import ProviderUnavailable

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect_s: float = 5.0
    first_token_s: float = 30.0
    total_s: float = 120.0

    def httpx(self) -> httpx2.Timeout:
        # read: any silence on the wire longer than the first-token deadline is a stall
        return httpx2.Timeout(
            connect=self.connect_s,
            read=self.first_token_s,
            write=self.first_token_s,
            pool=self.connect_s,
        )

    def timed_out(self, who: str) -> ProviderUnavailable:
        """What an httpx timeout means here: no connection, or the wire went quiet."""
        return ProviderUnavailable(
            f"{who}: timed out: no connection within {self.connect_s:g} s (llm.connect_timeout_s)"
            f" or no data for {self.first_token_s:g} s (llm.first_token_timeout_s)"
        )


class Deadline:
    __slots__ = ("_first", "_loop", "_started", "_timeouts", "_total", "_who")

    def __init__(self, timeouts: Timeouts, who: str) -> None:
        self._loop = asyncio.get_running_loop()
        now = self._loop.time()
        self._first = now + min(timeouts.first_token_s, timeouts.total_s)
        self._total = now + timeouts.total_s
        self._timeouts = timeouts
        self._who = who
        self._started = False

    def token(self) -> None:
        """Content has arrived: from now on only the total deadline applies."""
        self._started = True

    async def wait(self, awaitable: Awaitable[T]) -> T:
        when = self._total if self._started else self._first
        if self._loop.time() >= when:
            # a chunk already buffered would be returned without a pause, so the scope never fires
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise self._expired()
        scope = asyncio.timeout_at(when)
        try:
            async with scope:
                return await awaitable
        except TimeoutError:
            if not scope.expired():
                raise
            raise self._expired() from None

    def _expired(self) -> ProviderUnavailable:
        t = self._timeouts
        if not self._started:
            return ProviderUnavailable(
                f"{self._who}: no answer within {min(t.first_token_s, t.total_s):g} s"
                " (llm.first_token_timeout_s)"
            )
        return ProviderUnavailable(
            f"{self._who}: the answer took longer than {t.total_s:g} s (llm.total_timeout_s)"
        )
