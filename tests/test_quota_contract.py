"""The `QuotaState` contract, for every implementation: counts add up per bucket, and expire."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from adapters.base import ChatRef, InboundMessage
from bot.pipeline.quota import Check, MemoryQuotaState, Quotas, QuotaState, StoreQuotaState
from bot.redis.client import connect
from bot.redis.quota import RedisQuotaState
from bot.runtime.config.schema import QuotaLimits, QuotasConfig
from bot.storage import SqliteStore
from bot.storage.backends import build_store
from tests.pg_kit import pg_database, pg_url
from tests.redis_kit import URL, redis_prefix

__all__ = ["pg_database", "pg_url"]  # fixtures the contract uses

IMPLEMENTATIONS = ["memory", "sqlite", "postgresql", "redis"]
MakeState = Callable[[], QuotaState]


@pytest.fixture(params=IMPLEMENTATIONS)
def backend(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """The implementation, with its database URL (a sync fixture: pg_url runs its own loop)."""
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    return request.param, url


@pytest.fixture
async def make(backend: tuple[str, str | None], tmp_path: Path) -> AsyncIterator[MakeState]:
    """`make()`: a QuotaState of the implementation under test; all share one backing store."""
    kind, url = backend
    if kind == "memory":
        shared = MemoryQuotaState()
        yield lambda: shared
        return
    if kind == "redis":
        async with redis_prefix() as (redis, prefix):
            yield lambda: RedisQuotaState(redis, prefix=prefix)
        return
    async with build_store(tmp_path / "bot.db", url) as store:
        yield lambda: StoreQuotaState(store)


async def test_additions_add_up_per_bucket(make: MakeState) -> None:
    state = make()
    later = time.time() + 60
    assert await state.counts(["user:a:minute:0"]) == {}
    await state.add("user:a:minute:0", turns=1, tokens=0, expires_at=later)
    await state.add("user:a:minute:0", turns=0, tokens=120, expires_at=later)
    await state.add("user:a:minute:0", turns=1, tokens=30, expires_at=later)
    await state.add("user:b:minute:0", turns=1, tokens=5, expires_at=later)
    counts = await state.counts(["user:a:minute:0", "user:b:minute:0", "user:c:minute:0"])
    assert counts == {"user:a:minute:0": (2, 150), "user:b:minute:0": (1, 5)}


async def test_add_each_adds_to_every_bucket(make: MakeState) -> None:
    state = make()
    later = time.time() + 60
    await state.add("user:a:day:0", turns=1, tokens=10, expires_at=later)
    await state.add_each([("user:a:minute:0", later), ("user:a:day:0", later)], turns=0, tokens=5)
    counts = await state.counts(["user:a:minute:0", "user:a:day:0"])
    assert counts == {"user:a:minute:0": (0, 5), "user:a:day:0": (1, 15)}


async def test_an_expired_bucket_counts_nothing(make: MakeState) -> None:
    state = make()
    await state.add("user:a:minute:0", turns=3, tokens=9, expires_at=time.time() - 1)
    await state.add("user:a:day:0", turns=3, tokens=9, expires_at=time.time() + 60)
    counts = await state.counts(["user:a:minute:0", "user:a:day:0"])
    assert "user:a:minute:0" not in counts
    assert counts["user:a:day:0"] == (3, 9)


async def test_counts_are_shared_by_everything_on_the_same_backing(make: MakeState) -> None:
    one, two = make(), make()
    await one.add("conversation:web:x:day:0", turns=1, tokens=10, expires_at=time.time() + 60)
    await two.add("conversation:web:x:day:0", turns=1, tokens=10, expires_at=time.time() + 60)
    assert await one.counts(["conversation:web:x:day:0"]) == {"conversation:web:x:day:0": (2, 20)}


async def test_take_counts_a_turn_in_every_bucket_until_one_reaches_a_limit(
    make: MakeState,
) -> None:
    state = make()
    later = time.time() + 60
    checks = [Check("user:a:minute:0", 2, None, later), Check("user:a:day:0", None, 100, later)]
    assert await state.take(checks) is None
    assert await state.take(checks) is None
    assert await state.counts(["user:a:minute:0", "user:a:day:0"]) == {
        "user:a:minute:0": (2, 0),
        "user:a:day:0": (2, 0),
    }
    refused = await state.take(checks)  # the minute's two turns are used: nothing is added
    assert refused is not None and refused["user:a:minute:0"] == (2, 0)
    await state.add("user:b:day:0", turns=0, tokens=100, expires_at=later)
    by_tokens = await state.take([Check("user:b:day:0", None, 100, later)])
    assert by_tokens == {"user:b:day:0": (0, 100)}
    assert await state.counts(["user:a:day:0"]) == {"user:a:day:0": (2, 0)}


async def test_an_expired_bucket_does_not_refuse(make: MakeState) -> None:
    state = make()
    await state.add("user:a:minute:0", turns=5, tokens=0, expires_at=time.time() - 1)
    assert await state.take([Check("user:a:minute:0", 1, None, time.time() + 60)]) is None


async def test_takes_at_once_admit_exactly_the_limit(make: MakeState) -> None:
    """Many turns of one process at the same instant: the limit holds exactly, not limit + the
    ones that read before another added."""
    state = make()
    check = [Check("user:a:minute:0", 3, None, time.time() + 60)]
    results = await asyncio.gather(*(state.take(check) for _ in range(12)))
    assert sum(result is None for result in results) == 3
    assert await state.counts(["user:a:minute:0"]) == {"user:a:minute:0": (3, 0)}


async def test_takes_at_once_from_every_process_admit_exactly_the_limit() -> None:
    """The same from processes, each with its own connection: in Redis mode, which is what
    several processes run (the store's take is one step per process, a lock: see bot/pipeline/quota.py)."""
    async with redis_prefix() as (_, prefix):
        connections = [connect(URL) for _ in range(12)]
        try:
            states = [RedisQuotaState(redis, prefix=prefix) for redis in connections]
            check = [Check("user:a:minute:0", 3, None, time.time() + 60)]
            results = await asyncio.gather(*(state.take(check) for state in states))
            assert sum(result is None for result in results) == 3
            assert await states[0].counts(["user:a:minute:0"]) == {"user:a:minute:0": (3, 0)}
        finally:
            for redis in connections:
                await redis.aclose()


async def test_store_counts_survive_a_restart(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        await StoreQuotaState(store).add(
            "user:a:day:0", turns=4, tokens=1, expires_at=time.time() + 60
        )
    async with SqliteStore(tmp_path / "bot.db") as store:
        assert await StoreQuotaState(store).counts(["user:a:day:0"]) == {"user:a:day:0": (4, 1)}


async def test_with_redis_down_a_turn_is_admitted_uncounted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Quotas guard cost: Redis blinking must not refuse every user (it is logged)."""
    redis = connect("redis://127.0.0.1:1/0")  # nothing listens there
    state = RedisQuotaState(redis, prefix="test:down:")
    try:
        assert await state.take([Check("user:a:day:0", 0, None, time.time() + 60)]) is None
        assert await state.counts(["user:a:day:0"]) == {}
        await state.add("user:a:day:0", turns=0, tokens=5, expires_at=time.time() + 60)
    finally:
        await redis.aclose()
    assert "the turn is admitted" in caplog.text and "not counted" in caplog.text


class _Crossings:
    def __init__(self) -> None:
        self.scopes: list[str] = []

    def soft_limit_crossed(self, scope: str) -> None:
        self.scopes.append(scope)


async def test_a_soft_limit_is_reached_and_its_crossing_counted_once_across_processes(
    make: MakeState,
) -> None:
    """Two `Quotas` on one backing state (two processes): past 50 % of 4 turns a day, each
    turn is told it is past the soft limit; the crossing is counted once between them."""
    config = QuotasConfig(per_user=QuotaLimits(turns_per_day=4, soft_ratio=0.5))
    seen = _Crossings()
    quotas = [Quotas(config, make(), observer=seen) for _ in range(2)]
    message = InboundMessage(ChatRef("telegram", f"c-{time.time_ns()}"), "u1", "hi", "e1")
    found = []
    for n in range(4):
        assert await quotas[n % 2].admit(message) is None
        found.append(await quotas[n % 2].soft(message))
    assert [f is not None for f in found] == [False, True, True, True]
    first = found[1]
    assert first is not None and (first.whose, first.window) == ("user", "day")
    assert {f.mark for f in found[1:] if f is not None} == {first.mark}  # one window: one mark
    assert seen.scopes == ["user"]
    assert await quotas[0].admit(message) is not None  # the hard limit refuses as before
