"""The conversation lock + queue seam: one turn at a time per conversation, the rest wait.

Messages that arrive while a conversation's turn runs are queued and coalesced into its next
turn (one user's messages at a time). `/stop` drops the queue and stops the running turn.
Background specialist results are queued on their conversation like any message, so they are
never dropped because no turn is running.

`LocalConversations` is the embedded implementation (one process); a networked one (Redis
streams with a leased lock per conversation) must pass the same contract test
(tests/test_conversations_contract.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from adapters.base import InboundMessage

log = logging.getLogger(__name__)

RunTurn = Callable[[list[InboundMessage], "TurnSignal"], Awaitable[None]]


@dataclass(slots=True)
class TurnSignal:
    """What `/stop` reaches: a flag checked before the model starts, and the model work itself."""

    stopped: bool = False
    work: asyncio.Task[object] | None = None

    def stop(self) -> None:
        self.stopped = True
        if self.work is not None:
            self.work.cancel()


@dataclass(frozen=True, slots=True)
class Stopped:
    """What a stop found: messages dropped from the queue, and whether a turn was running."""

    dropped: int = 0
    running: bool = False


class ConversationQueue(Protocol):
    """One turn at a time per conversation key; different conversations run side by side."""

    started: asyncio.Event  # set while `run` is taking turns (enqueue before it is an error)

    async def run(self, run_turn: RunTurn) -> None:
        """Take batches and run `run_turn(batch, signal)` for them until cancelled.

        A failing turn is logged and never stops other conversations or later turns.
        """
        ...

    async def enqueue(self, message: InboundMessage) -> None:
        """Queue `message` on its conversation; a turn takes it (with others of its user) soon."""
        ...

    async def stop(self, conversation_key: str) -> Stopped:
        """Drop the conversation's queue and signal its running turn to stop."""
        ...

    async def wait_idle(self) -> None:
        """Until no conversation has a turn running or a message queued (tests, shutdown)."""
        ...


@dataclass(slots=True)
class _Conversation:
    key: str
    pending: list[InboundMessage] = field(default_factory=list)
    drain: asyncio.Task[None] | None = None
    signal: TurnSignal | None = None  # the turn running now


class LocalConversations:
    """In this process: a task per busy conversation, owned by the task group of `run`."""

    def __init__(self, *, coalesce_ms: int = 0) -> None:
        self.coalesce_ms = coalesce_ms
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
        conversation.pending.append(message)
        if conversation.drain is None:
            self._idle.clear()
            conversation.drain = self._group.create_task(self._drain(conversation))

    async def stop(self, conversation_key: str) -> Stopped:
        conversation = self._conversations.get(conversation_key)
        if conversation is None:
            return Stopped()
        dropped = len(conversation.pending)
        conversation.pending.clear()
        running = conversation.signal is not None
        if conversation.signal is not None:
            conversation.signal.stop()
        return Stopped(dropped, running)

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def _drain(self, conversation: _Conversation) -> None:
        try:
            if self.coalesce_ms:
                await asyncio.sleep(self.coalesce_ms / 1000)  # let a burst arrive
            while conversation.pending and self._run_turn is not None:
                user = conversation.pending[0].user_id
                batch = [m for m in conversation.pending if m.user_id == user]
                conversation.pending = [m for m in conversation.pending if m.user_id != user]
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
