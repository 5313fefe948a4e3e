"""The `ConversationQueue` contract, for every implementation: one turn at a time per
conversation, coalescing, `/stop`, isolation of failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field

import pytest

from adapters.base import ChatRef, InboundMessage
from bot.pipeline.conversations import (
    MAX_QUEUED,
    MAX_TURN_CHARS,
    MAX_TURN_MESSAGES,
    ConversationQueue,
    LocalConversations,
    QueueFull,
    TurnSignal,
)
from bot.redis.client import connect
from bot.redis.conversations import RedisConversations
from tests.redis_kit import URL, redis_prefix


@asynccontextmanager
async def local_queue() -> AsyncIterator[ConversationQueue]:
    yield LocalConversations()


@asynccontextmanager
async def redis_queue() -> AsyncIterator[ConversationQueue]:
    async with redis_prefix() as (redis, prefix):
        reader = connect(URL, reader=True)
        try:
            yield RedisConversations(redis, reader, prefix=prefix, lease_s=2)
        finally:
            await reader.aclose()


IMPLEMENTATIONS: dict[str, Callable[[], AbstractAsyncContextManager[ConversationQueue]]] = {
    "local": local_queue,
    "redis": redis_queue,
}


def msg(chat: str, text: str, user: str = "u") -> InboundMessage:
    return InboundMessage(ChatRef("fake", chat), user, text, f"e:{chat}:{user}:{text}")


@dataclass
class Turns:
    """A turn runner the test steers: each turn waits for its gate (per conversation)."""

    batches: list[list[str]] = field(default_factory=list)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    running: dict[str, int] = field(default_factory=dict)
    most_at_once: dict[str, int] = field(default_factory=dict)
    stopped: list[str] = field(default_factory=list)
    started: asyncio.Queue[str] = field(default_factory=asyncio.Queue)

    def gate(self, chat: str) -> asyncio.Event:
        return self.gates.setdefault(chat, asyncio.Event())

    async def run(self, batch: list[InboundMessage], signal: TurnSignal) -> None:
        chat = batch[0].chat.chat_id
        self.running[chat] = self.running.get(chat, 0) + 1
        self.most_at_once[chat] = max(self.most_at_once.get(chat, 0), self.running[chat])
        self.batches.append([m.text for m in batch])
        try:
            if batch[0].text == "boom":
                raise RuntimeError("this turn fails")
            signal.work = asyncio.current_task()  # so stop() reaches this turn's work
            await self.started.put(chat)
            try:
                await self.gate(chat).wait()
            except asyncio.CancelledError:
                self.stopped.append(chat)
                asyncio.current_task().uncancel()  # type: ignore[union-attr]
        finally:
            self.running[chat] -= 1


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
async def queue(request: pytest.FixtureRequest) -> AsyncIterator[tuple[ConversationQueue, Turns]]:
    async with IMPLEMENTATIONS[request.param]() as conversations:
        turns = Turns()
        task = asyncio.create_task(conversations.run(turns.run))
        await conversations.started.wait()
        yield conversations, turns
        task.cancel()
        await asyncio.wait([task])


async def test_one_turn_at_a_time_and_a_burst_is_coalesced(
    queue: tuple[ConversationQueue, Turns],
) -> None:
    conversations, turns = queue
    await conversations.enqueue(msg("a", "one"))
    assert await turns.started.get() == "a"
    for text in ("two", "three"):
        await conversations.enqueue(msg("a", text))
    turns.gate("a").set()
    await conversations.wait_idle()
    assert turns.batches == [["one"], ["two", "three"]]
    assert turns.most_at_once["a"] == 1


async def test_conversations_run_side_by_side(queue: tuple[ConversationQueue, Turns]) -> None:
    conversations, turns = queue
    await conversations.enqueue(msg("a", "hi"))
    await conversations.enqueue(msg("b", "hi"))
    assert {await turns.started.get(), await turns.started.get()} == {"a", "b"}
    turns.gate("a").set()
    turns.gate("b").set()
    await conversations.wait_idle()


async def test_a_batch_holds_one_users_messages(queue: tuple[ConversationQueue, Turns]) -> None:
    conversations, turns = queue
    await conversations.enqueue(msg("g", "first", user="ann"))
    await turns.started.get()
    for text, user in (("b1", "bob"), ("a2", "ann"), ("b2", "bob")):
        await conversations.enqueue(msg("g", text, user=user))
    turns.gate("g").set()
    await conversations.wait_idle()
    assert turns.batches == [["first"], ["b1", "b2"], ["a2"]]


async def test_stop_drops_the_queue_and_stops_the_running_turn(
    queue: tuple[ConversationQueue, Turns],
) -> None:
    conversations, turns = queue
    await conversations.enqueue(msg("a", "long"))
    await turns.started.get()
    await conversations.enqueue(msg("a", "queued 1"))
    await conversations.enqueue(msg("a", "queued 2"))
    stopped = await conversations.stop("fake:a")
    assert (stopped.dropped, stopped.running) == (2, True)
    # the messages themselves, so their channel can tell each sender (`message.dropped`)
    assert stopped.messages == (msg("a", "queued 1"), msg("a", "queued 2"))
    await conversations.wait_idle()
    assert turns.stopped == ["a"] and turns.batches == [["long"]]


async def test_stop_with_nothing_running(queue: tuple[ConversationQueue, Turns]) -> None:
    conversations, _ = queue
    stopped = await conversations.stop("fake:nobody")
    assert (stopped.dropped, stopped.running) == (0, False)


async def test_a_failing_turn_stops_nothing_else(queue: tuple[ConversationQueue, Turns]) -> None:
    conversations, turns = queue
    turns.gate("a").set()
    turns.gate("b").set()
    await conversations.enqueue(msg("a", "boom"))
    await conversations.enqueue(msg("b", "other"))
    await conversations.wait_idle()
    await conversations.enqueue(msg("a", "after"))
    await conversations.wait_idle()
    assert turns.batches == [["boom"], ["other"], ["after"]]


async def test_a_message_queued_after_idle_starts_a_new_turn(
    queue: tuple[ConversationQueue, Turns],
) -> None:
    conversations, turns = queue
    turns.gate("a").set()
    await conversations.enqueue(msg("a", "one"))
    await conversations.wait_idle()
    await conversations.enqueue(msg("a", "two"))
    await conversations.wait_idle()
    assert turns.batches == [["one"], ["two"]]


async def test_a_coalesced_turn_is_capped_by_characters(
    queue: tuple[ConversationQueue, Turns],
) -> None:
    conversations, turns = queue
    await conversations.enqueue(msg("a", "first"))
    await turns.started.get()
    third = MAX_TURN_CHARS // 3
    texts = [f"{n}" + "x" * (third - 1) for n in range(7)]
    for text in texts:
        await conversations.enqueue(msg("a", text))
    turns.gate("a").set()
    await conversations.wait_idle()
    assert turns.batches[0] == ["first"]
    batches = turns.batches[1:]
    assert [len(batch) for batch in batches] == [3, 3, 1]
    assert [text for batch in batches for text in batch] == texts  # all of them, in order
    assert all(sum(map(len, batch)) <= MAX_TURN_CHARS for batch in batches)


async def test_one_message_longer_than_the_cap_still_gets_its_turn(
    queue: tuple[ConversationQueue, Turns],
) -> None:
    conversations, turns = queue
    turns.gate("a").set()
    await conversations.enqueue(msg("a", "y" * (MAX_TURN_CHARS + 1)))
    await conversations.wait_idle()
    assert [len(batch) for batch in turns.batches] == [1]


async def test_a_coalesced_turn_is_capped_by_count(queue: tuple[ConversationQueue, Turns]) -> None:
    conversations, turns = queue
    await conversations.enqueue(msg("a", "first"))
    await turns.started.get()
    for n in range(MAX_TURN_MESSAGES + 5):
        await conversations.enqueue(msg("a", f"m{n}"))
    turns.gate("a").set()
    await conversations.wait_idle()
    assert [len(batch) for batch in turns.batches] == [1, MAX_TURN_MESSAGES, 5]


async def test_a_full_queue_refuses_with_a_clear_error(
    queue: tuple[ConversationQueue, Turns],
) -> None:
    conversations, turns = queue
    await conversations.enqueue(msg("a", "first"))
    await turns.started.get()
    for n in range(MAX_QUEUED):
        await conversations.enqueue(msg("a", f"m{n}"))
    with pytest.raises(QueueFull, match="/stop"):
        await conversations.enqueue(msg("a", "one too many"))
    await conversations.enqueue(msg("b", "another conversation is not affected"))
    stopped = await conversations.stop("fake:a")
    assert stopped.dropped == MAX_QUEUED
    await conversations.enqueue(msg("a", "after /stop there is room again"))
    turns.gate("a").set()
    turns.gate("b").set()
    await conversations.wait_idle()
    assert ["one too many"] not in turns.batches


async def test_busy_here_while_a_turn_runs_in_this_process(
    queue: tuple[ConversationQueue, Turns],
) -> None:
    """What the heap's sweep waits on (bot/runtime/heap.py): no pause while an answer waits."""
    conversations, turns = queue
    assert not conversations.busy_here()
    await conversations.enqueue(msg("a", "one"))
    assert await turns.started.get() == "a"
    assert conversations.busy_here()
    turns.gate("a").set()
    await conversations.wait_idle()
    assert not conversations.busy_here()
