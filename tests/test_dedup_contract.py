"""The `Dedup` contract, for every implementation: one claim per event id, release, expiry."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bot.pipeline.dedup import Dedup, MemoryDedup, StoreDedup
from bot.redis.dedup import RedisDedup, once_key
from bot.storage import SqliteStore
from tests.redis_kit import redis_prefix

MakeDedup = Callable[[float], Dedup]


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def make(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MakeDedup]:
    """`make(ttl_s)`: a fresh Dedup of the implementation under test (the same store for all)."""
    if request.param == "memory":
        yield lambda ttl_s: MemoryDedup(ttl_s=ttl_s)
        return
    if request.param == "redis":
        async with redis_prefix() as (redis, prefix):
            yield lambda ttl_s: RedisDedup(redis, prefix=prefix, ttl_s=ttl_s)
        return
    async with SqliteStore(tmp_path / "bot.db") as store:
        yield lambda ttl_s: StoreDedup(store, ttl_s=ttl_s)


async def test_an_event_is_claimed_once(make: MakeDedup) -> None:
    dedup = make(60)
    assert await dedup.claim("telegram:1")
    assert not await dedup.claim("telegram:1")
    assert await dedup.claim("telegram:2")  # other ids are independent


async def test_a_released_claim_can_be_claimed_again(make: MakeDedup) -> None:
    dedup = make(60)
    assert await dedup.claim("e")
    await dedup.release("e")
    assert await dedup.claim("e")
    assert not await dedup.claim("e")
    await dedup.release("never-claimed")  # harmless


async def test_a_reopened_event_can_be_claimed_again(make: MakeDedup) -> None:
    dedup = make(60)
    assert await dedup.claim("e")
    await dedup.reopen("e")  # its turn asked for a retry
    assert await dedup.claim("e")
    await dedup.reopen("never-claimed")  # harmless


async def test_in_redis_only_a_reopen_forgets_that_the_queue_took_the_event() -> None:
    """The queue's once-note stops a second enqueue after a reply lost on its way back (the
    gateway then releases the claim: the platform's retry must not queue it twice); a turn that
    asks for a retry reopens the event, and the retry is queued (tests/test_redis_retry.py)."""
    async with redis_prefix() as (redis, prefix):
        dedup = RedisDedup(redis, prefix=prefix, ttl_s=60)
        note = once_key(prefix, "e")
        await redis.set(note, "1", px=60_000)  # as ENQUEUE leaves it
        assert await dedup.claim("e")
        await dedup.release("e")
        assert await redis.exists(note)
        assert await dedup.claim("e")
        await dedup.reopen("e")
        assert not await redis.exists(note) and await dedup.claim("e")


async def test_an_expired_claim_is_taken_again(make: MakeDedup) -> None:
    dedup = make(0)  # every claim expires at once
    assert await dedup.claim("e")
    assert await dedup.claim("e")


async def test_store_claims_survive_a_restart(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db") as store:
        assert await StoreDedup(store, ttl_s=60).claim("telegram:update:7")
    async with SqliteStore(tmp_path / "bot.db") as store:  # the next process on the same file
        assert not await StoreDedup(store, ttl_s=60).claim("telegram:update:7")


async def test_store_claims_are_shared_by_processes_on_one_file(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "bot.db") as one, SqliteStore(tmp_path / "bot.db") as two:
        results = [await StoreDedup(s, ttl_s=60).claim("slack:Ev1") for s in (one, two, one)]
    assert results == [True, False, False]


async def test_redis_claims_are_shared_by_processes_and_expire() -> None:
    async with redis_prefix() as (redis, prefix):
        processes = [RedisDedup(redis, prefix=prefix, ttl_s=0.2) for _ in range(3)]
        results = [await p.claim("telegram:update:9") for p in (*processes, processes[0])]
        assert results == [True, False, False, False]
        assert 0 < await redis.pttl(f"{prefix}dedup:telegram:update:9") <= 200
