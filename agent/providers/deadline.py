"""Deadlines for one model call: connect, first token and total, fit for chat (not 600 s).

The SDK's httpx timeouts bound connecting and every silence on the wire (read = the first-token
deadline). `Deadline` adds what httpx cannot see: a server that answers at once but sends no
content (pings, or an empty opening event), and the total for one call. Keep-alives (Anthropic
`ping` events, SSE comments) reset httpx's read timeout but never reach us, so a server that
pings forever is only stopped by the total deadline: every await on the stream, before and after
the first token, is bounded. The timeout covers each await, never a `yield`: a timeout spanning a
yield would fire inside the consumer's code.

One timer serves a whole call (two: it moves once, to the total deadline, at the first token),
not one per await: `asyncio.timeout` around each of a call's dozen awaits cost ~15 % of the
call's CPU (bench/provider_bench.py). The timer cancels the task only while it is awaiting in
`wait`, and takes the cancellation back as `asyncio.timeout` does, so a cancellation from outside
stays one; when it fires between awaits, the next `wait` raises at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx2

from agent.providers.base import ProviderUnavailable
from agent.providers.classify import connection_failure, timed_out_connecting

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

    def timed_out(self, who: str, exc: BaseException | None = None) -> ProviderUnavailable:
        """What an SDK's timeout or connection error means here: what really happened (refused,
        DNS, TLS) when its causes tell, else no connection in time, or the wire went quiet."""
        if exc is not None:
            failure = connection_failure(exc)
            if failure is not None:
                return ProviderUnavailable(f"{who}: {failure}")
        connect = f"no connection within {self.connect_s:g} s (llm.connect_timeout_s)"
        quiet = f"no data for {self.first_token_s:g} s (llm.first_token_timeout_s)"
        connecting = None if exc is None else timed_out_connecting(exc)
        if connecting is None:
            return ProviderUnavailable(f"{who}: timed out: {connect} or {quiet}")
        return ProviderUnavailable(f"{who}: timed out: {connect if connecting else quiet}")


class Deadline:
    __slots__ = (
        "_fired",
        "_first",
        "_handle",
        "_loop",
        "_started",
        "_timeouts",
        "_total",
        "_waiting",
        "_who",
    )

    def __init__(self, timeouts: Timeouts, who: str) -> None:
        self._loop = asyncio.get_running_loop()
        now = self._loop.time()
        self._first = now + min(timeouts.first_token_s, timeouts.total_s)
        self._total = now + timeouts.total_s
        self._timeouts = timeouts
        self._who = who
        self._started = False
        self._handle: asyncio.TimerHandle | None = None
        self._waiting: asyncio.Task[Any] | None = None  # the task awaiting in `wait`, if one is
        self._fired = False  # the timer cancelled `_waiting`

    def token(self) -> None:
        """Content has arrived: from now on only the total deadline applies."""
        self._started = True

    def close(self) -> None:
        """The call is over: its timer goes (one left behind would fire into nothing)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    async def wait(self, awaitable: Awaitable[T]) -> T:
        when = self._total if self._started else self._first
        if self._loop.time() >= when:
            # a chunk already buffered would be returned without a pause, so the timer never fires
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise self._expired()
        if self._handle is None or self._handle.when() != when:
            self.close()
            self._handle = self._loop.call_at(when, self._fire)
        task = asyncio.current_task(self._loop)  # its loop given: no getpid() (3.11's lookup)
        if task is None:
            raise RuntimeError("Deadline.wait must be awaited in a task")
        cancelling = task.cancelling()
        self._waiting = task
        try:
            return await awaitable
        except asyncio.CancelledError:
            if not self._fired:
                raise
            self._fired = False
            if task.uncancel() > cancelling:
                raise  # cancelled from outside as well: that one wins
            raise self._expired() from None
        finally:
            self._waiting = None
            if self._fired:  # the awaitable returned all the same: take the cancellation back
                self._fired = False
                task.uncancel()

    def _fire(self) -> None:
        self._handle = None
        if self._waiting is not None:
            self._fired = True
            self._waiting.cancel()

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
