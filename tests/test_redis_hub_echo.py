"""`RedisEventHub` publishes a frame on pub/sub only when another process has a socket for it.

A process hands its own sockets its frames itself; receiving them back through pub/sub only to
skip them cost it more CPU than the rest of publishing. These tests watch the channel with a
plain Redis subscriber (which no hub counts as a process with sockets) and read it up to a
marker the test publishes after each step: what came before the marker is what the hubs sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest
from redis.asyncio.client import PubSub

from bot.redis.client import connect
from bot.redis.hub import RedisEventHub
from tests.redis_kit import URL, redis_prefix
from tests.test_event_hub_contract import Tab, publish_turn


@pytest.fixture
async def hubs() -> AsyncIterator[list[RedisEventHub]]:
    """Three hubs with their own connections, as three processes; one key prefix."""
    async with redis_prefix() as (_, prefix), AsyncExitStack() as stack:
        made = []
        for _ in range(3):
            redis, reader = connect(URL), connect(URL, reader=True)
            stack.push_async_callback(redis.aclose)
            stack.push_async_callback(reader.aclose)
            hub = RedisEventHub(redis, reader, prefix=prefix, replay_events=200)
            made.append(await stack.enter_async_context(hub))
        yield made


async def sent_on(channel: PubSub, hub: RedisEventHub, conversation: str) -> list[str]:
    """What the hubs published on the conversation's channel since the last call."""
    await hub.redis.publish(hub.base + conversation, "marker")
    seen: list[str] = []
    async with asyncio.timeout(5):
        while True:
            message = await channel.get_message(ignore_subscribe_messages=True, timeout=1)
            if message is None:
                continue
            if message["data"] == "marker":
                return seen
            seen.append(message["data"])


async def test_frames_go_on_pubsub_only_while_another_process_has_a_socket(
    hubs: list[RedisEventHub],
) -> None:
    own, other, _ = hubs
    watcher = connect(URL)
    channel = watcher.pubsub()
    try:
        await channel.subscribe(own.base + "c")
        mine = await Tab().join(own, "c")
        await publish_turn(own, "c", "m1")
        assert mine.seqs == [1, 2, 3, 4]  # handed over by the publisher itself
        assert await sent_on(channel, own, "c") == []

        theirs = await Tab().join(other, "c")
        await publish_turn(own, "c", "m2")
        assert mine.seqs == [1, 2, 3, 4, 5, 6, 7, 8]
        await theirs.until(8)
        assert theirs.seqs == [5, 6, 7, 8]
        assert len(await sent_on(channel, own, "c")) == 4

        await other.detach("c", theirs)
        await publish_turn(own, "c", "m3")
        assert mine.seqs == list(range(1, 13))
        assert await sent_on(channel, own, "c") == []
    finally:
        await channel.aclose()
        await watcher.aclose()


async def test_a_tab_on_one_process_gets_every_process_frames_in_order(
    hubs: list[RedisEventHub],
) -> None:
    """Its own process's frames are not echoed, the others' come through pub/sub: overlapping,
    they still arrive once each, in seq order, the own ones by the time publish returns."""
    tab = await Tab().join(hubs[0], "c")
    late: list[int] = []

    async def publisher(n: int) -> None:
        for i in range(20):
            seq = await hubs[n].publish("c", "agent.started", {"task_id": f"{n}-{i}"})
            if n == 0 and seq not in tab.seqs:
                late.append(seq)

    await asyncio.gather(*(publisher(n) for n in range(3)))
    await tab.until(60)
    assert tab.seqs == list(range(1, 61))
    assert late == []


async def test_sockets_redis_lost_are_told_again_so_frames_still_reach_them() -> None:
    """A Redis restarted without persistence forgets which process has sockets where; the
    next heartbeat says it again, so the other processes publish to them again."""
    async with redis_prefix() as (_, prefix), AsyncExitStack() as stack:
        made = []
        for _ in range(2):
            redis, reader = connect(URL), connect(URL, reader=True)
            stack.push_async_callback(redis.aclose)
            stack.push_async_callback(reader.aclose)
            hub = RedisEventHub(redis, reader, prefix=prefix, replay_events=200, heartbeat_s=0.1)
            made.append(await stack.enter_async_context(hub))
        own, other = made
        theirs = await Tab().join(other, "c")
        where = f"{own.base}c:where"
        await own.redis.delete(where)  # what a restart without persistence loses
        async with asyncio.timeout(5):
            while not await own.redis.exists(where):  # noqa: ASYNC110 (a key: polled)
                await asyncio.sleep(0.05)
        await publish_turn(own, "c", "m1")
        await theirs.until(4)
        assert theirs.seqs == [1, 2, 3, 4]
