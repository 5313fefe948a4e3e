"""The Redis calls a turn makes: its conversation's state comes with its messages (no read of its
own), and the leases a process holds are extended together, in one call per beat.

The calls are counted with MONITOR on the real server, filtered by this test's key prefix.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from adapters.base import ChatRef, InboundMessage
from bot.pipeline.conversation_state import StateSnapshot
from bot.pipeline.conversations import TurnSignal
from bot.redis import conversations_lua as lua
from bot.redis.client import LuaScript, connect
from bot.redis.conversations import RedisConversations
from bot.redis.states import redis_conversation_state
from tests.redis_kit import URL, redis_prefix


def msg(chat: str, text: str) -> InboundMessage:
    return InboundMessage(ChatRef("fake", chat), "u", text, f"e:{chat}:{text}")


@pytest.fixture
async def queue() -> AsyncIterator[RedisConversations]:
    async with redis_prefix() as (_, prefix):
        redis, reader = connect(URL), connect(URL, reader=True)
        states = redis_conversation_state(redis, prefix=prefix)
        q = RedisConversations(redis, reader, prefix=prefix, lease_s=0.3, states=states)
        try:
            yield q
        finally:
            await redis.aclose()
            await reader.aclose()


async def commands(
    q: RedisConversations, sentinel: str, seen: list[str], ready: asyncio.Event
) -> None:
    """The commands naming `q`'s keys that clients sent (not scripts) before `sentinel`."""
    async with connect(URL).monitor() as monitor:
        ready.set()
        while True:
            info = await monitor.next_command()
            command = info["command"]
            if sentinel in command:
                return
            if info.get("client_type") != "lua" and q.base.removesuffix("q:") in command:
                seen.append(command)


async def test_a_turn_reads_its_state_with_its_messages_and_a_second_read_from_redis(
    queue: RedisConversations,
) -> None:
    q = queue
    assert q.states is not None
    states = q.states
    await states.update("fake:a", lambda s: s.with_setting("model", "small"))
    read: list[StateSnapshot] = []

    async def run(batch: list[InboundMessage], signal: TurnSignal) -> None:
        read.append(await states.get("fake:a"))  # as the turn's language and choices read it
        await states.update("fake:a", lambda s: s.with_setting("model", "big"))
        read.append(await states.get("fake:a"))

    ready, seen = asyncio.Event(), list[str]()
    sentinel = f"{q.base}sentinel:{uuid.uuid4().hex}"
    async with asyncio.TaskGroup() as group:
        monitoring = group.create_task(commands(q, sentinel, seen, ready))
        await ready.wait()
        task = group.create_task(q.run(run))
        await q.started.wait()
        await q.enqueue(msg("a", "hi"))
        async with asyncio.timeout(10):
            await q.wait_idle()
        await q.redis.get(sentinel)
        async with asyncio.timeout(10):
            await monitoring
        task.cancel()
    assert [s.settings.get("model") for s in read] == ["small", "big"]
    hgetall = [c for c in seen if c.startswith("HGETALL")]
    # the update reads it (compare-and-set), then the turn's second read: never the first
    assert len(hgetall) == 2, seen


async def test_the_leases_a_process_holds_are_extended_in_one_call(
    queue: RedisConversations,
) -> None:
    """Two turns running longer than a lease: every beat extends both leases in one call, and
    neither turn is lost (the fenced lease holds)."""
    q = queue
    running = asyncio.Semaphore(0)
    release = asyncio.Event()
    signals: list[TurnSignal] = []

    async def run(batch: list[InboundMessage], signal: TurnSignal) -> None:
        signals.append(signal)
        running.release()
        await release.wait()

    sha = LuaScript(q.redis, lua.EXTEND_MANY).sha
    ready, seen = asyncio.Event(), list[str]()
    sentinel = f"{q.base}sentinel:{uuid.uuid4().hex}"
    async with asyncio.TaskGroup() as group:
        task = group.create_task(q.run(run))
        await q.started.wait()
        await q.enqueue(msg("a", "one"))
        await q.enqueue(msg("b", "one"))
        async with asyncio.timeout(10):
            await running.acquire()
            await running.acquire()
        monitoring = group.create_task(commands(q, sentinel, seen, ready))
        await ready.wait()
        await asyncio.sleep(1.0)  # over three leases
        await q.redis.get(sentinel)
        async with asyncio.timeout(10):
            await monitoring
        release.set()
        async with asyncio.timeout(10):
            await q.wait_idle()
        task.cancel()
    beats = [c for c in seen if c.startswith(f"EVALSHA {sha}")]
    assert len(beats) >= 3  # a beat every third of a lease
    assert all(f"{q.base}fake:a:lock" in c and f"{q.base}fake:b:lock" in c for c in beats)
    assert not [c for c in seen if c.startswith("XCLAIM")]  # inside the beat's script
    assert not any(signal.lost for signal in signals)
