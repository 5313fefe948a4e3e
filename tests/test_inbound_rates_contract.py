"""The `InboundRates` contract (users' message limits), run against every implementation.

Each implementation counts on a clock the test moves (`clock=`), so no assertion depends on how
fast the test runs; the tests of several processes keep the Redis server's own clock, with rates
slow enough that no refill can come during the test.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest

from adapters.rates import InboundRates, LocalInboundRates, burst
from bot.redis.client import connect
from bot.redis.inbound import RedisInboundRates
from tests.clock import FakeClock
from tests.redis_kit import URL, redis_prefix

SLOW = 6  # a minute: burst 6, then one every 10 s (a test never waits that out)


@asynccontextmanager
async def local_rates(clock: FakeClock) -> AsyncIterator[InboundRates]:
    yield LocalInboundRates(clock=clock)


@asynccontextmanager
async def redis_rates(clock: FakeClock) -> AsyncIterator[InboundRates]:
    async with redis_prefix() as (redis, prefix):
        yield RedisInboundRates(redis, prefix=prefix, clock=clock)


IMPLEMENTATIONS: list[Callable[[FakeClock], AbstractAsyncContextManager[InboundRates]]] = [
    local_rates,
    redis_rates,
]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=IMPLEMENTATIONS, ids=lambda factory: factory.__name__)
async def rates(request: pytest.FixtureRequest, clock: FakeClock) -> AsyncIterator[InboundRates]:
    async with request.param(clock) as made:
        yield made


async def takes(rates: InboundRates, scope: str, per_minute: int, count: int) -> list[float]:
    return [await rates.take(scope, per_minute) for _ in range(count)]


async def test_a_burst_goes_then_messages_are_refused_with_the_wait(rates: InboundRates) -> None:
    waits = await takes(rates, "ws:a", SLOW, burst(SLOW) + 2)
    assert waits[: burst(SLOW)] == [0.0] * burst(SLOW)
    for wait in waits[burst(SLOW) :]:
        assert 0 < wait <= 60 / SLOW


async def test_the_burst_is_at_most_ten(rates: InboundRates) -> None:
    waits = await takes(rates, "ws:a", 600, 11)
    assert waits[:10] == [0.0] * 10
    assert waits[10] == pytest.approx(0.1, abs=0.002)  # one every 100 ms


async def test_a_refused_message_is_not_counted(rates: InboundRates) -> None:
    await takes(rates, "ws:a", SLOW, burst(SLOW))
    first, *later = await takes(rates, "ws:a", SLOW, 5)
    for wait in later:
        assert wait <= first  # refusals do not push the next allowed message further out


async def test_scopes_are_independent(rates: InboundRates) -> None:
    await takes(rates, "ws:a", SLOW, burst(SLOW) + 1)
    assert await rates.take("ws:b", SLOW) == 0.0
    assert await rates.take("api:a", SLOW) == 0.0


async def test_a_message_goes_again_after_the_wait_and_not_before(
    rates: InboundRates, clock: FakeClock
) -> None:
    waits = await takes(rates, "ws:a", 1200, 11)  # one every 50 ms
    assert waits[10] == pytest.approx(0.05, abs=0.002)
    await clock.advance(waits[10] - 0.01)
    assert await rates.take("ws:a", 1200) == pytest.approx(0.01, abs=0.002)
    await clock.advance(0.01 + 1e-6)  # and a rounding error's worth past the wait
    assert await rates.take("ws:a", 1200) == 0.0


# --- several processes over one Redis ----------------------------------------------------------


async def test_two_processes_together_keep_one_rate() -> None:
    """Two instances, each with its own connection (as two processes), one key prefix."""
    async with redis_prefix() as (redis, prefix):
        other = connect(URL)
        try:
            pair = [
                RedisInboundRates(redis, prefix=prefix),
                RedisInboundRates(other, prefix=prefix),
            ]
            waits = [await pair[n % 2].take("ws:a", SLOW) for n in range(2 * burst(SLOW))]
        finally:
            await other.aclose()
    assert waits.count(0.0) == burst(SLOW)


async def test_messages_arriving_together_are_counted_together_in_arrival_order() -> None:
    """Many sockets' messages at once: one script call in flight at a time (so one connection,
    not one each), each message counted against its own scope in the order it arrived."""
    async with redis_prefix() as (_, prefix):
        redis = connect(URL)
        try:
            rates = RedisInboundRates(redis, prefix=prefix)
            scopes = [f"ws:{n % 5}" for n in range(50)]
            waits = await asyncio.gather(*(rates.take(scope, SLOW) for scope in scopes))
            opened = sum(count for count, _ in redis.connection_pool.get_connection_count())
        finally:
            await redis.aclose()
    for scope in set(scopes):
        mine = [wait for s, wait in zip(scopes, waits, strict=True) if s == scope]
        assert mine[: burst(SLOW)] == [0.0] * burst(SLOW)
        assert all(wait > 0 for wait in mine[burst(SLOW) :])
    assert opened == 1


async def test_with_redis_down_messages_are_counted_in_the_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = connect("redis://127.0.0.1:1/0")  # nothing listens there
    try:
        rates = RedisInboundRates(down, prefix="test:down:")
        with caplog.at_level(logging.WARNING, logger="bot.redis.inbound"):
            waits = await takes(rates, "ws:a", SLOW, burst(SLOW) + 1)
    finally:
        await down.aclose()
    assert waits[: burst(SLOW)] == [0.0] * burst(SLOW)
    assert waits[-1] > 0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # once per outage, not once per message
