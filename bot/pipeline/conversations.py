"""The conversation lock + queue seam: one turn at a time per conversation, the rest wait.

Messages that arrive while a conversation's turn runs are queued and coalesced into its next
turn (one user's messages at a time, at most `max_turn_messages` of them and `max_turn_chars` of
text: the rest wait for the turn after). `/stop` drops the queue and stops the running turn. A
conversation with `max_queued` messages waiting refuses more (`QueueFull`).
Background specialist results are queued on their conversation like any message, so they are
never dropped because no turn is running.

`LocalConversations` is the embedded implementation (one process); a networked one (Redis
streams with a leased lock per conversation) must pass the same contract test
(tests/test_conversations_contract.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from adapters.base import InboundMessage

log = logging.getLogger(__name__)

RunTurn = Callable[[list[InboundMessage], "TurnSignal"], Awaitable[None]]

# A coalesced turn is one model request: 16,000 characters is two full web socket messages and
# well inside every model's context; uncapped, a flood of queued messages becomes one request of
# megabytes.
MAX_TURN_CHARS: Final = 16_000
MAX_TURN_MESSAGES: Final = 20
MAX_QUEUED: Final = 100


class QueueFull(Exception):
    """The conversation already has its limit of messages waiting; this one was not queued."""

    def __init__(self, conversation_key: str, limit: int) -> None:
        super().__init__(
            f"{limit} messages are already waiting in {conversation_key}; this one was not "
            "queued: wait for the answer, or send /stop to drop the queue"
        )
        self.conversation_key = conversation_key
        self.limit = limit


@dataclass(slots=True)
class TurnSignal:
    """What `/stop` reaches: a flag checked before the model starts, and the model work itself."""

    stopped: bool = False
    work: asyncio.Task[object] | None = None
    # The batch was taken over from a process that died while running it (networked queues):
    # it may have a placeholder showing already, so the turn runner looks before it posts one.
    resumed: bool = False
    # The lease on the conversation was lost (this process stalled past it; networked queues):
    # another process has taken the turn over, so this one stops and leaves it alone.
    lost: bool = False

    def stop(self) -> None:
        self.stopped = True
        if self.work is not None:
            self.work.cancel()

    def lose(self) -> None:
        self.lost = True
        self.stop()


@dataclass(frozen=True, slots=True)
class Stopped:
    """What a stop found: messages dropped from the queue, and whether a turn was running.

    `messages`: the dropped messages themselves, oldest first, so their channel can tell each
    one's sender it will not be answered (the web socket's `message.dropped`)."""

    dropped: int = 0
    running: bool = False
    messages: tuple[InboundMessage, ...] = ()


class ConversationQueue(Protocol):
    """One turn at a time per conversation key; different conversations run side by side."""

    started: asyncio.Event  # set while `run` is taking turns (enqueue before it is an error)

    async def run(self, run_turn: RunTurn) -> None:
        """Take batches and run `run_turn(batch, signal)` for them until cancelled.

        A failing turn is logged and never stops other conversations or later turns.
        """
        ...

    async def enqueue(self, message: InboundMessage) -> None:
        """Queue `message` on its conversation; a turn takes it (with others of its user) soon.

        Raises `QueueFull` when the conversation has too many messages waiting already.
        """
        ...

    async def stop(self, conversation_key: str) -> Stopped:
        """Drop the conversation's queue and signal its running turn to stop."""
        ...

    async def wait_idle(self) -> None:
        """Until no conversation has a turn running or a message queued (tests, shutdown)."""
        ...

    def busy_here(self) -> bool:
        """Whether this process has a turn running or a message queued for one (a pause of its
        loop, the heap's sweep, would hold up an answer)."""
        ...


@dataclass(frozen=True, slots=True)
class Held:
    """Not queued: the conversation's mode is not bot (its `ModeHandler` takes the message)."""

    mode: str


@runtime_checkable
class ClaimingQueue(Protocol):
    """A queue that can claim a message's event for a `Dedup`, and read its conversation's
    mode, in the same step as queueing it (one Redis round trip where claim, read and enqueue
    were three)."""

    def claims_for(self, dedup: object) -> bool:
        """Whether `enqueue_new` claims events exactly as `dedup.claim` would."""
        ...

    def holds_for(self, states: object) -> bool:
        """Whether `enqueue_new` reads the mode `states.mode` would, and holds the message
        (`Held`) when it is not bot."""
        ...

    async def enqueue_new(self, message: InboundMessage) -> bool | Held:
        """Claim the event and queue `message`; False (and nothing queued) when it was claimed
        already; `Held` (claimed, not queued) when its conversation's mode is not bot.
        `QueueFull`: not claimed, so a resend later is a new message."""
        ...


def next_batch(pending: Sequence[InboundMessage], max_chars: int, max_messages: int) -> list[int]:
    """Which queued messages the next turn takes (their indices): the first user's, in order,
    up to the turn's caps; the rest stay queued. Every implementation batches by this."""
    user = pending[0].user_id
    taken: list[int] = []
    chars = 0
    for index, message in enumerate(pending):
        if message.user_id != user:
            continue
        size = len(message.text)
        # The first message always goes, however long: its channel has bounded it already.
        if taken and (len(taken) >= max_messages or chars + size > max_chars):
            break  # later ones wait too, so the user's messages keep their order
        taken.append(index)
        chars += size
    return taken


@dataclass(slots=True)
class _Conversation:
    key: str
    pending: list[InboundMessage] = field(default_factory=list)
    drain: asyncio.Task[None] | None = None
    signal: TurnSignal | None = None  # the turn running now


class LocalConversations:
    """In this process: a task per busy conversation, owned by the task group of `run`."""

    def __init__(
        self,
        *,
        coalesce_ms: int = 0,
        max_turn_chars: int = MAX_TURN_CHARS,
        max_turn_messages: int = MAX_TURN_MESSAGES,
        max_queued: int = MAX_QUEUED,
    ) -> None:
        for name, value in (
            ("max_turn_chars", max_turn_chars),
            ("max_turn_messages", max_turn_messages),
            ("max_queued", max_queued),
        ):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        self.coalesce_ms = coalesce_ms
        self.max_turn_chars = max_turn_chars
        self.max_turn_messages = max_turn_messages
        self.max_queued = max_queued
        self._conversations: dict[str, _Conversation] = {}
        self._group: asyncio.TaskGroup | None = None
        self._run_turn: RunTurn | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self.started = asyncio.Event()

    async def run(self, run_turn: RunTurn) -> None:
        async with asyncio.TaskGroup() as group:
            self._group, self._run_turn = group, run_turn
            self.started.set()
            try:
                await asyncio.Future()
            finally:
                self._group = self._run_turn = None
                self.started.clear()

    async def enqueue(self, message: InboundMessage) -> None:
        if self._group is None:
            raise RuntimeError("the conversation queue is not running: start its run() first")
        conversation = self._conversations.get(message.conversation_key)
        if conversation is None:
            conversation = _Conversation(message.conversation_key)
            self._conversations[conversation.key] = conversation
        if len(conversation.pending) >= self.max_queued:
            log.warning(
                "%s has %d messages waiting; refusing more", conversation.key, self.max_queued
            )
            raise QueueFull(conversation.key, self.max_queued)
        conversation.pending.append(message)
        if conversation.drain is None:
            self._idle.clear()
            conversation.drain = self._group.create_task(self._drain(conversation))

    async def stop(self, conversation_key: str) -> Stopped:
        conversation = self._conversations.get(conversation_key)
        if conversation is None:
            return Stopped()
        dropped = tuple(conversation.pending)
        conversation.pending.clear()
        running = conversation.signal is not None
        if conversation.signal is not None:
            conversation.signal.stop()
        return Stopped(len(dropped), running, dropped)

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def busy_here(self) -> bool:
        return not self._idle.is_set()

    def waiting(self) -> int:
        """Conversations with messages queued for a turn (the /metrics gauge)."""
        return sum(1 for conversation in self._conversations.values() if conversation.pending)

    def _next_batch(self, conversation: _Conversation) -> list[InboundMessage]:
        taken = next_batch(conversation.pending, self.max_turn_chars, self.max_turn_messages)
        batch = [conversation.pending[i] for i in taken]
        chosen = set(taken)
        conversation.pending = [m for i, m in enumerate(conversation.pending) if i not in chosen]
        return batch

    async def _drain(self, conversation: _Conversation) -> None:
        try:
            if self.coalesce_ms:
                await asyncio.sleep(self.coalesce_ms / 1000)  # let a burst arrive
            while conversation.pending and self._run_turn is not None:
                batch = self._next_batch(conversation)
                conversation.signal = signal = TurnSignal()
                try:
                    await self._run_turn(batch, signal)
                except Exception:
                    # one conversation's failure (say, its channel cannot deliver) never stops others
                    log.exception("turn in %s failed to deliver", conversation.key)
                finally:
                    conversation.signal = None
        finally:
            conversation.drain = None
            if not conversation.pending:
                self._conversations.pop(conversation.key, None)
            if not self._conversations:
                self._idle.set()
