"""The `RateBudget` contract, run against every implementation (append a Redis one to IMPLEMENTATIONS).

Real time with short intervals: assertions are on order and lower bounds, never tight upper
bounds, and "does not wait" is shown with intervals far longer than the test's deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager

import pytest

from adapters.budget import Busy, LocalRateBudget, Rank, Rate, RateBudget
from adapters.telegram.throttle import ChatSlots
from bot.redis.budget import RedisRateBudget
from bot.redis.client import connect
from tests.redis_kit import URL, redis_prefix

SLACK = 0.005  # clock granularity, and a server clock against ours (a Redis budget's TIME)
LONG = 60.0  # an interval no test waits out: a call that would wait it fails the deadline
DEADLINE = 10.0  # generous for a loaded CI machine; only reached when something hangs


@asynccontextmanager
async def local_budget() -> AsyncIterator[RateBudget]:
    yield LocalRateBudget()


@asynccontextmanager
async def redis_budget() -> AsyncIterator[RateBudget]:
    async with redis_prefix() as (redis, prefix):
        yield RedisRateBudget(redis, prefix=prefix)


IMPLEMENTATIONS: list[Callable[[], AbstractAsyncContextManager[RateBudget]]] = [
    local_budget,
    redis_budget,
]


@pytest.fixture(params=IMPLEMENTATIONS, ids=lambda factory: factory.__name__)
async def budget(request: pytest.FixtureRequest) -> AsyncIterator[RateBudget]:
    async with request.param() as made:
        yield made


async def arrive() -> None:
    """Let waiters started just now reach the budget (in memory at once; Redis: a round trip)."""
    await asyncio.sleep(0.05)


async def busy(budget: RateBudget, scope: str, *, interval_s: float, **kw: list[Rate]) -> Busy:
    """The `Busy` a preview gets now; fails if the preview was let through."""
    with pytest.raises(Busy) as caught:
        async with (
            asyncio.timeout(DEADLINE),
            budget.slot(scope, "preview", interval_s=interval_s, **kw),
        ):
            pass
    assert caught.value.retry_after > 0
    return caught.value


async def test_calls_in_a_scope_are_spaced_from_the_end_of_the_last(budget: RateBudget) -> None:
    async with budget.slot("chat", "send", interval_s=0.05):
        await asyncio.sleep(0.03)  # the call itself takes a while: spacing counts from its end
        ended = time.monotonic()
    for rank in ("final", "send"):
        async with asyncio.timeout(DEADLINE), budget.slot("chat", rank, interval_s=0.05):
            assert time.monotonic() - ended >= 0.05 - SLACK
            ended = time.monotonic()


async def test_scopes_are_independent(budget: RateBudget) -> None:
    async with budget.slot("a", "send", interval_s=LONG):
        pass
    async with budget.slot("b", "send", interval_s=LONG):
        async with asyncio.timeout(DEADLINE), budget.slot("c", "final", interval_s=LONG):
            pass
    async with budget.slot("d", "preview", interval_s=LONG):  # previews too, in a fresh scope
        pass


async def test_finals_go_before_sends_before_previews(budget: RateBudget) -> None:
    order: list[str] = []

    async def call(name: str, rank: Rank) -> None:
        async with budget.slot("chat", rank, interval_s=0.01):
            order.append(name)

    async with asyncio.timeout(DEADLINE):
        async with budget.slot("chat", "send", interval_s=0.01):
            waiting = []
            for name, rank in (("send 1", "send"), ("send 2", "send"), ("final", "final")):
                waiting.append(asyncio.create_task(call(name, rank)))  # type: ignore[arg-type]
                await arrive()
            assert (await busy(budget, "chat", interval_s=0.01)).retry_after >= 0.01 - SLACK
        # Free, but awaited by the final and the sends: a preview still goes after them.
        await busy(budget, "chat", interval_s=0.01)
        await asyncio.gather(*waiting)
    assert order == ["final", "send 1", "send 2"]


async def test_previews_get_busy_instead_of_waiting(budget: RateBudget) -> None:
    async with budget.slot("chat", "send", interval_s=LONG):
        assert (await busy(budget, "chat", interval_s=LONG)).retry_after >= LONG - SLACK
    # Done, but not `interval_s` ago: told how long is left, which is no longer than the interval.
    assert (await busy(budget, "chat", interval_s=LONG)).retry_after <= LONG


async def test_a_penalty_delays_every_rank(budget: RateBudget) -> None:
    await budget.penalize("held", LONG)
    await budget.penalize("held", 0.0)  # penalties only lengthen
    assert (await busy(budget, "held", interval_s=0.0)).retry_after > LONG - 1
    async with asyncio.timeout(DEADLINE), budget.slot("other", "send", interval_s=0.0):
        pass  # other scopes go on
    penalized = time.monotonic()
    await budget.penalize("chat", 0.1)
    for rank in ("final", "send"):
        async with asyncio.timeout(DEADLINE), budget.slot("chat", rank, interval_s=0.0):
            assert time.monotonic() - penalized >= 0.1


async def test_a_penalty_on_a_shared_scope_delays_every_scope_under_it(budget: RateBudget) -> None:
    bot = [Rate("bot", 1000, burst=100)]
    await budget.penalize("bot", LONG)
    assert (await busy(budget, "chat", interval_s=0.0, rates=bot)).retry_after > LONG - 1
    bot = [Rate("bot 2", 1000, burst=100)]
    penalized = time.monotonic()
    await budget.penalize("bot 2", 0.1)
    async with asyncio.timeout(DEADLINE), budget.slot("chat", "send", interval_s=0.0, rates=bot):
        assert time.monotonic() - penalized >= 0.1


async def test_a_shared_rate_caps_the_sum_of_its_scopes(budget: RateBudget) -> None:
    bot = [Rate("bot", 20, burst=2)]
    starts: list[float] = []
    began = time.monotonic()

    async def call(chat: str) -> None:
        async with budget.slot(chat, "send", interval_s=0.0, rates=bot):
            starts.append(time.monotonic())

    async with asyncio.timeout(DEADLINE):
        await asyncio.gather(*(call(f"chat {n}") for n in range(6)))
    starts.sort()
    for n, started in enumerate(starts[2:], start=1):  # 2 at once, then one per 50 ms
        assert started - began >= n / 20 - SLACK


async def test_previews_yield_a_shared_rate_to_sends_waiting_for_it(budget: RateBudget) -> None:
    bot = [Rate("bot", 1, burst=1)]
    async with budget.slot("a", "send", interval_s=0.0, rates=bot):
        pass
    waiting = asyncio.create_task(_enter(budget.slot("b", "send", interval_s=0.0, rates=bot)))
    await arrive()
    # The rate is free in 1 s, and then it is the waiting send's: the preview is told 1 s more.
    assert (await busy(budget, "c", interval_s=0.0, rates=bot)).retry_after > 1.0
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_a_cancelled_waiter_leaves_no_trace(budget: RateBudget) -> None:
    async with budget.slot("chat", "send", interval_s=0.0):
        waiting = asyncio.create_task(_enter(budget.slot("chat", "final", interval_s=0.0)))
        await arrive()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    async with asyncio.timeout(DEADLINE):
        async with budget.slot("chat", "preview", interval_s=0.0):  # nobody left in the queue
            pass
        async with budget.slot("chat", "send", interval_s=0.0):
            pass


async def test_an_error_inside_a_slot_releases_it(budget: RateBudget) -> None:
    with pytest.raises(RuntimeError):
        async with budget.slot("chat", "send", interval_s=0.0):
            raise RuntimeError("the platform call failed")
    async with asyncio.timeout(DEADLINE):
        async with budget.slot("chat", "preview", interval_s=0.0):
            pass
        async with budget.slot("chat", "final", interval_s=0.0):
            pass


async def _enter(slot: AbstractAsyncContextManager[None]) -> None:
    async with slot:
        pass


# --- Telegram's scopes over the budget --------------------------------------------------------


async def test_telegram_scopes_are_per_bot_and_chat_with_the_chats_interval() -> None:
    budget = LocalRateBudget()
    one, other = ChatSlots(budget, 1, lambda chat: LONG), ChatSlots(budget, 2, lambda chat: LONG)
    async with one.slot("-100", "send"):
        pass
    with pytest.raises(Busy) as caught:
        async with one.slot("-100", "preview"):
            pass
    assert LONG - 1 < caught.value.retry_after <= LONG
    async with asyncio.timeout(DEADLINE):
        async with other.slot("-100", "send"):  # another bot in the same chat
            pass
        async with one.slot("-200", "send"):  # another chat of the same bot
            pass


# --- several processes over one Redis ----------------------------------------------------------


async def test_ten_processes_together_keep_one_bot_rate_and_one_chat_pace() -> None:
    """Ten budgets, each with its own connections (as ten processes), one key prefix."""
    async with redis_prefix() as (_, prefix), AsyncExitStack() as stack:
        budgets = []
        for _ in range(10):
            client = connect(URL)
            stack.push_async_callback(client.aclose)
            budgets.append(RedisRateBudget(client, prefix=prefix))
        bot = [Rate("bot", 50, burst=5)]
        starts: list[float] = []
        chat_starts: list[float] = []
        began = time.monotonic()

        async def call(n: int) -> None:
            async with budgets[n % 10].slot(f"chat {n}", "send", interval_s=0.0, rates=bot):
                starts.append(time.monotonic())
            async with budgets[n % 10].slot("one chat", "send", interval_s=0.02):
                chat_starts.append(time.monotonic())
                await asyncio.sleep(0.005)

        async with asyncio.timeout(DEADLINE * 2):
            await asyncio.gather(*(call(n) for n in range(40)))
    starts.sort()
    for n, started in enumerate(starts[5:], start=1):  # 5 at once, then one per 20 ms
        assert started - began >= n / 50 - SLACK
    gaps = [b - a for a, b in zip(chat_starts, chat_starts[1:], strict=False)]
    assert min(gaps) >= 0.02 + 0.005 - SLACK  # one in flight, spaced from the end of the last
