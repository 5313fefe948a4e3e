"""Messages queued at once by one process go to Redis in one ENQUEUE call (bot/redis/
script_batch.py), and each still gets the outcome it would have had alone, in order; turns of
several conversations that end at once finish in one NEXT call.

The calls are counted with MONITOR on the real server, filtered by this test's key prefix.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from adapters.base import ChatRef, InboundMessage
from bot.pipeline.conversations import QueueFull, TurnSignal
from bot.redis import conversations_lua as lua
from bot.redis.client import LuaScript, RedisUnavailable, connect
from bot.redis.conversations import RedisConversations
from bot.redis.dedup import RedisDedup
from tests.redis_kit import URL, redis_prefix


def msg(chat: str, text: str) -> InboundMessage:
    return InboundMessage(ChatRef("fake", chat), "u", text, f"e:{chat}:{text}")


@pytest.fixture
async def queue() -> AsyncIterator[RedisConversations]:
    async with redis_prefix() as (_, prefix):
        redis, reader = connect(URL), connect(URL, reader=True)
        q = RedisConversations(redis, reader, prefix=prefix, lease_s=1, max_queued=1)
        q.dedup = RedisDedup(redis, prefix=prefix)
        try:
            yield q
        finally:
            await redis.aclose()
            await reader.aclose()


async def calls(
    q: RedisConversations, script: str, sentinel: str, seen: list[str], ready: asyncio.Event
) -> None:
    """The calls of `script` naming `q`'s keys that the server ran before `sentinel` was read."""
    sha = LuaScript(q.redis, script).sha
    async with connect(URL).monitor() as monitor:
        ready.set()
        while True:
            command = (await monitor.next_command())["command"]
            if sentinel in command:
                return
            if command.startswith(f"EVALSHA {sha}") and q.base in command:
                seen.append(command)


async def test_messages_queued_at_once_go_in_one_call_each_with_its_outcome(
    queue: RedisConversations,
) -> None:
    q = queue
    turns: list[str] = []
    release = asyncio.Event()

    async def run(batch: list[InboundMessage], signal: TurnSignal) -> None:
        turns.extend(m.text for m in batch)
        await release.wait()

    async with asyncio.TaskGroup() as group:
        task = group.create_task(q.run(run))
        await q.started.wait()
        assert await q.enqueue_new(msg("a", "one"))  # its turn runs (and waits) here
        assert await q.enqueue_new(msg("a", "two"))  # a's queue is full now (max_queued 1)
        ready = asyncio.Event()
        seen: list[str] = []
        sentinel = f"{q.base}sentinel:{uuid.uuid4().hex}"
        monitoring = group.create_task(calls(q, lua.ENQUEUE, sentinel, seen, ready))
        await ready.wait()
        outcomes = await asyncio.gather(
            q.enqueue_new(msg("a", "two")),  # the same event again: a duplicate
            q.enqueue_new(msg("a", "three")),  # refused: a's queue is full
            q.enqueue_new(msg("b", "x")),  # queued, and its turn runs here
            return_exceptions=True,
        )
        await q.redis.get(sentinel)
        async with asyncio.timeout(10):
            await monitoring
        release.set()
        async with asyncio.timeout(10):
            await q.wait_idle()
        task.cancel()
    assert outcomes[0] is False and isinstance(outcomes[1], QueueFull) and outcomes[2] is True
    assert len(seen) == 1  # the three messages in one call
    assert all(f"e:{event}" in seen[0] for event in ("a:two", "a:three", "b:x"))
    assert sorted(turns) == ["one", "two", "x"]
    assert q.dedup is not None and await q.dedup.claim(
        "e:a:three"
    )  # the refused message left no claim behind


async def test_each_waiting_caller_gets_the_outage() -> None:
    """Redis away: every message of the call fails as RedisUnavailable (try later)."""
    down = "redis://127.0.0.1:1/0"  # nothing listens there
    redis, reader = connect(down), connect(down, reader=True)
    q = RedisConversations(redis, reader, prefix=f"test:{uuid.uuid4().hex[:12]}:")

    async def run(batch: list[InboundMessage], signal: TurnSignal) -> None:
        pass

    try:
        async with asyncio.TaskGroup() as group:
            task = group.create_task(q.run(run))
            await q.started.wait()  # set on the first failure too: enqueue says try later
            outcomes = await asyncio.gather(
                *(q.enqueue(msg(chat, "m")) for chat in "abc"), return_exceptions=True
            )
            task.cancel()
    finally:
        await redis.aclose()
        await reader.aclose()
    assert all(isinstance(outcome, RedisUnavailable) for outcome in outcomes), outcomes


async def test_turns_ending_together_finish_in_one_call(queue: RedisConversations) -> None:
    """Two conversations' turns end at once: one NEXT call finishes both (and lets both go)."""
    q = queue
    running = asyncio.Semaphore(0)
    release = asyncio.Event()

    async def run(batch: list[InboundMessage], signal: TurnSignal) -> None:
        running.release()
        await release.wait()

    async with asyncio.TaskGroup() as group:
        task = group.create_task(q.run(run))
        await q.started.wait()
        await q.enqueue(msg("a", "one"))
        await q.enqueue(msg("b", "one"))
        async with asyncio.timeout(10):  # both turns are running
            await running.acquire()
            await running.acquire()
        ready = asyncio.Event()
        seen: list[str] = []
        sentinel = f"{q.base}sentinel:{uuid.uuid4().hex}"
        monitoring = group.create_task(calls(q, lua.NEXT_MANY, sentinel, seen, ready))
        await ready.wait()
        release.set()
        async with asyncio.timeout(10):
            await q.wait_idle()
        await q.redis.get(sentinel)
        async with asyncio.timeout(10):
            await monitoring
        task.cancel()
    assert len(seen) == 1
    assert f"{q.base}fake:a:lock" in seen[0] and f"{q.base}fake:b:lock" in seen[0]
