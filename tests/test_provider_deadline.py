"""A model call's deadline: one timer for the call, bounding each await and never the consumer.

The deadlines themselves, against fake servers that stall or ping, are in test_provider_resilience.
"""

import asyncio
import inspect
from typing import Any

import pytest

from agent.providers.base import ProviderUnavailable
from agent.providers.deadline import Deadline, Timeouts


async def test_a_call_arms_one_timer_and_moves_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()
    armed: list[float] = []
    real = loop.call_at

    def counting(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        armed.append(when)
        return real(when, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counting)
    deadline = Deadline(Timeouts(first_token_s=30, total_s=120), "m")
    for n in range(20):
        assert await deadline.wait(asyncio.sleep(0, n)) == n
    deadline.token()  # the first token: the total deadline from now on
    for n in range(20):
        assert await deadline.wait(asyncio.sleep(0, n)) == n
    deadline.close()
    assert len(armed) == 2 and armed[1] - armed[0] == pytest.approx(90)


async def test_an_await_past_the_deadline_is_stopped() -> None:
    deadline = Deadline(Timeouts(first_token_s=0.01, total_s=60), "m")
    with pytest.raises(ProviderUnavailable, match="no answer within 0.01 s"):
        await deadline.wait(asyncio.Event().wait())
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0  # the timer's cancel was taken back


async def test_the_deadline_passing_between_awaits_spares_the_consumer() -> None:
    deadline = Deadline(Timeouts(first_token_s=0.01, total_s=0.01), "m")
    assert await deadline.wait(asyncio.sleep(0, "first")) == "first"  # arms the timer
    await asyncio.sleep(0.05)  # the consumer's own await, past the deadline: not cancelled
    never = asyncio.Event().wait()
    with pytest.raises(ProviderUnavailable, match="no answer within"):
        await deadline.wait(never)  # the next await on the stream fails at once
    assert inspect.getcoroutinestate(never) == "CORO_CLOSED"  # not left to warn "never awaited"


async def test_a_cancellation_from_outside_stays_a_cancellation() -> None:
    deadline = Deadline(Timeouts(first_token_s=60, total_s=60), "m")
    waiting = asyncio.Event()

    async def call() -> None:
        waiting.set()
        await deadline.wait(asyncio.Event().wait())

    task = asyncio.create_task(call())
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline.close()
