"""`RedisLeader`: one process at a time does the work; another takes over when it leaves or dies."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest

from bot.redis.client import connect
from bot.redis.leader import RedisLeader
from tests.redis_kit import URL, redis_prefix

LEASE_S = 1.0


@pytest.fixture
async def leaders() -> AsyncIterator[list[RedisLeader]]:
    async with redis_prefix() as (_, prefix), AsyncExitStack() as stack:
        made = []
        for _ in range(3):
            client = connect(URL)
            stack.push_async_callback(client.aclose)
            made.append(RedisLeader(client, prefix=prefix, lease_s=LEASE_S))
        yield made


async def test_one_leads_and_another_takes_over_when_it_leaves(leaders: list[RedisLeader]) -> None:
    working: list[int] = []
    changed = asyncio.Event()

    def work(n: int):  # type: ignore[no-untyped-def]
        async def run() -> None:
            working.append(n)
            changed.set()
            try:
                await asyncio.Future()
            finally:
                working.remove(n)

        return run

    tasks = [asyncio.create_task(leader.lead("poll", work(n))) for n, leader in enumerate(leaders)]
    try:
        async with asyncio.timeout(10):
            await changed.wait()
            await asyncio.sleep(LEASE_S)  # several holds and tries later, still one
            assert len(working) == 1
            first = working[0]
            changed.clear()
            left = time.monotonic()
            tasks[first].cancel()  # a deploy: it lets go
            await changed.wait()
            assert time.monotonic() - left < LEASE_S  # no need to wait out the lease
            assert len(working) == 1 and working[0] != first
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)


async def test_a_dead_leaders_lease_is_taken_over_within_seconds(
    leaders: list[RedisLeader],
) -> None:
    """A process killed while leading leaves its key; the others take over when it lapses."""
    dead = leaders[0]
    await dead.redis.set(f"{dead.prefix}poll", "a-dead-process", px=int(LEASE_S * 1000))
    began = time.monotonic()
    took_over = asyncio.Event()

    async def run() -> None:
        took_over.set()
        await asyncio.Future()

    task = asyncio.create_task(leaders[1].lead("poll", run))
    try:
        async with asyncio.timeout(10):
            await took_over.wait()
        assert LEASE_S * 0.9 <= time.monotonic() - began <= LEASE_S * 2
    finally:
        task.cancel()
        await asyncio.wait([task])


async def test_a_leader_that_loses_its_lease_stops_working(leaders: list[RedisLeader]) -> None:
    stopped = asyncio.Event()
    started = asyncio.Event()

    async def run() -> None:
        started.set()
        try:
            await asyncio.Future()
        finally:
            stopped.set()

    leader = leaders[0]
    task = asyncio.create_task(leader.lead("poll", run))
    try:
        async with asyncio.timeout(10):
            await started.wait()
            await leader.redis.set(f"{leader.prefix}poll", "someone-else")  # stolen, say
            await stopped.wait()
    finally:
        task.cancel()
        await asyncio.wait([task])
