"""Circuit breakers over the provider chain, with the real SDK clients against fake servers:
a failing primary is skipped once its circuit opens, tried once after the cool-down, and a long
`retry-after` goes to the fallback at once instead of waiting."""

from __future__ import annotations

import time
from typing import Any

import pytest
from aiohttp import ClientSession

from agent.providers.base import ProviderUnavailable
from agent.providers.breaker import CircuitBreaker
from agent.providers.resilient import ResilientProvider
from bot.runtime.app import App
from tests.conftest import Running, WsClient, ask_once, connect, eventually
from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import Call, FakeLLM, Reply, by_backup, fail, llm_config
from tests.fake_openai import FakeOpenAI

CLOCK = Call("get_current_datetime", '{"timezone": "UTC"}')


def overloaded(body: dict[str, Any]) -> Reply:
    return fail(529, "overloaded_error", "Overloaded")


def with_fallback(primary: FakeLLM, backup: FakeLLM, **extra: Any) -> dict[str, Any]:
    fallback = {"provider": "openai", "base_url": backup.url, "api_key": "test-key"}
    return llm_config("anthropic", primary, fallback=[fallback], **extra)


async def ask(client: WsClient, app: App, n: int) -> str:
    completed = await client.ask(f"question {n}", client_message_id=f"m{n}")
    await app.gateway.wait_idle()
    text: str = completed["text"]
    return text


def breaker(app: App, position: int = 0) -> CircuitBreaker:
    assert isinstance(app.provider, ResilientProvider)
    return app.provider.breakers[position]


async def test_rounds_after_the_circuit_opens_go_straight_to_the_fallback(
    running: Running, session: ClientSession
) -> None:
    async with FakeAnthropic(script=overloaded) as primary, FakeOpenAI() as backup:
        # three model calls in one turn: two tool rounds, then the answer
        backup.add(Reply(calls=[CLOCK]), Reply(calls=[CLOCK]), Reply(text=["It is late."]))
        app = await running(llm=with_fallback(primary, backup, max_retries=1))
        completed, _ = await ask_once(session, app)
        assert by_backup(completed["text"], "It is late."), completed["text"]
        # the first call tried the primary twice (1 + max_retries) and opened its circuit
        assert len(primary.requests) == 2
        assert len(backup.requests) == 3
        assert breaker(app).state == "open"


async def test_after_the_cool_down_the_primary_gets_one_trial_call(
    running: Running, session: ClientSession
) -> None:
    async with FakeAnthropic() as primary, FakeOpenAI() as backup:
        primary.add(*[overloaded({})] * 3, Reply(text=["The primary is back."]))
        backup.add(Reply(text=["Backup 1."]), Reply(text=["Backup 2."]))
        llm = with_fallback(primary, backup, max_retries=1, circuit_open_s=0.2)
        app = await running(llm=llm)
        client = await connect(session, app)
        await client.hello()
        assert by_backup(await ask(client, app, 1), "Backup 1.")
        assert len(primary.requests) == 2
        # a cool-down is time passing: nothing else marks it
        await eventually(lambda: breaker(app).state == "half-open")
        # the trial fails: one request, no retries, the circuit opens again
        assert by_backup(await ask(client, app, 2), "Backup 2.")
        assert len(primary.requests) == 3
        assert breaker(app).state == "open"
        await eventually(lambda: breaker(app).state == "half-open")
        assert await ask(client, app, 3) == "The primary is back."
        assert len(primary.requests) == 4 and len(backup.requests) == 2
        assert breaker(app).state == "closed"


@pytest.mark.parametrize("retry_after", ["5", "60"])
async def test_a_retry_after_goes_to_the_fallback_at_once(
    running: Running, session: ClientSession, retry_after: str
) -> None:
    def limited(body: dict[str, Any]) -> Reply:
        return fail(429, "rate_limit_error", "slow down", **{"retry-after": retry_after})

    async with FakeAnthropic(script=limited) as primary, FakeOpenAI() as backup:
        backup.add(Reply(calls=[CLOCK]), Reply(calls=[CLOCK]), Reply(text=["Done."]))
        app = await running(llm=with_fallback(primary, backup, max_retries=2))
        started = time.monotonic()
        completed, _ = await ask_once(session, app)
        assert by_backup(completed["text"], "Done."), completed["text"]
        assert time.monotonic() - started < 4  # not one retry-after waited out
        # asked once: the server said when it will serve again, later rounds believed it
        assert len(primary.requests) == 1
        assert breaker(app).open_for_s > 3


async def test_with_no_fallback_an_open_circuit_still_gets_one_try(
    running: Running, session: ClientSession
) -> None:
    async with FakeOpenAI() as only:
        only.add(*[fail(503, "server_error", "down")] * 3, Reply(text=["Up again."]))
        app = await running(llm=llm_config("openai", only, max_retries=1))
        client = await connect(session, app)
        await client.hello()
        sorry = f"Sorry — {ProviderUnavailable.user_message}"
        assert await ask(client, app, 1) == sorry
        assert len(only.requests) == 2 and breaker(app).state == "open"
        # open, and nothing else to ask: one attempt without retries, a quick sorry again
        assert await ask(client, app, 2) == sorry
        assert len(only.requests) == 3
        assert await ask(client, app, 3) == "Up again."
        assert breaker(app).state == "closed"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def state(b: CircuitBreaker) -> str:
    """Read afresh each time (mypy would keep a narrowed property across calls)."""
    return b.state


def test_breaker_opens_cools_down_and_lets_one_trial_through() -> None:
    clock = Clock()
    b = CircuitBreaker(threshold=2, open_s=30, clock=clock)
    assert b.acquire() == "closed"
    b.failure()
    assert state(b) == "closed"
    b.failure()
    assert state(b) == "open" and b.acquire() is None and b.open_for_s == 30
    clock.now += 30
    assert state(b) == "half-open" and b.usable
    assert b.acquire() == "half-open"
    assert b.acquire() is None and not b.usable  # one trial at a time
    b.release()  # the trial was cancelled: another may go
    assert b.acquire() == "half-open"
    b.failure()  # a failed trial opens again at once
    assert state(b) == "open"
    clock.now += 30
    assert b.acquire() == "half-open"
    b.success()
    assert state(b) == "closed" and b.acquire() == "closed"


def test_a_retry_after_opens_the_breaker_until_then_within_bounds() -> None:
    clock = Clock()
    b = CircuitBreaker(threshold=5, open_s=30, clock=clock)
    b.failure(open_for_s=60)
    assert state(b) == "open" and b.open_for_s == 60
    b.success()
    b.failure(open_for_s=2)  # never shorter than the cool-down
    assert b.open_for_s == 30
    b.success()
    b.failure(open_for_s=86400)  # a daily quota, or a bogus header: capped
    assert b.open_for_s == 300
