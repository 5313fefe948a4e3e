"""A per-chat call budget: every send, edit and chat action to a chat goes through one slot.

Telegram allows about one message or edit per second per chat (one per three seconds in groups)
and about thirty per second per bot; past that it answers 429 and bans the chat for a while.
So each chat has one call in flight at most, and the next starts `interval` after the previous
one *finished* (finish, not start: the server sees arrivals, and ours are only known to be
spaced if we measure from the reply). Callers rank themselves:

- finals and sends wait for the slot, finals first in line (the answer beats everything);
- previews and chat actions never wait: they get `Busy(retry_after)` and try again later with
  newer text, so stale intermediate states are never queued. They also yield the bot-wide rate
  to sends and finals waiting for it in other chats.

A 429 from the platform (`penalize`) pushes the chat's next slot past its `retry_after`, which
every kind of call then respects.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal

Rank = Literal["final", "send", "preview", "typing"]
_ORDER = {"final": 0, "send": 1}
_PRUNE_AT = 10_000  # chats remembered before idle ones are forgotten


class Busy(Exception):
    """No slot now for a call that does not wait; try again in `retry_after` seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"chat busy; retry after {retry_after:.2f}s")
        self.retry_after = retry_after


@dataclass(slots=True)
class _Chat:
    free_at: float = 0.0
    busy: bool = False
    queue: list[tuple[int, int]] = field(default_factory=list)  # heap of (rank, arrival)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


class ChatBudget:
    """Slots per chat (`interval_for(chat_id)` seconds apart) under a bot-wide rate."""

    def __init__(
        self,
        interval_for: Callable[[str], float],
        *,
        per_second: float = 30.0,
        burst: int = 30,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_second <= 0 or burst < 1:
            raise ValueError(f"per_second must be > 0 and burst >= 1, not {per_second}, {burst}")
        self._interval_for = interval_for
        self._spacing = 1.0 / per_second
        self._burst_s = (burst - 1) * self._spacing  # `burst` calls may go at once
        self._tat = 0.0  # bot-wide: theoretical arrival time of the next call (GCRA)
        self._held_globally = 0  # waiting sends/finals held back by the bot-wide rate
        self._clock = clock
        self._chats: dict[str, _Chat] = {}
        self._arrivals = itertools.count()

    @asynccontextmanager
    async def slot(self, chat_id: str, rank: Rank) -> AsyncIterator[None]:
        """Hold the chat's slot for one call; raises `Busy` at once for previews and typing."""
        chat = self._chat(chat_id)
        if rank in _ORDER:
            await self._wait_turn(chat, _ORDER[rank])
        else:
            delay = self._delay(chat)
            if chat.busy or chat.queue:  # whoever holds or waits for the slot goes first
                raise Busy(max(delay, 0.0) + self._interval_for(chat_id))
            if self._held_globally:  # sends and finals elsewhere wait for the bot-wide rate
                delay = max(delay, self._global_delay() + self._spacing * self._held_globally)
            if delay > 0:
                raise Busy(delay)
            self._take(chat)
        try:
            yield
        finally:
            chat.busy = False
            chat.free_at = max(chat.free_at, self._clock() + self._interval_for(chat_id))
            chat.notify()

    def penalize(self, chat_id: str, retry_after: float) -> None:
        """The platform said 429: nothing goes to this chat for `retry_after` seconds."""
        chat = self._chat(chat_id)
        chat.free_at = max(chat.free_at, self._clock() + retry_after)
        chat.notify()

    async def _wait_turn(self, chat: _Chat, order: int) -> None:
        ticket = (order, next(self._arrivals))
        heapq.heappush(chat.queue, ticket)
        try:
            while True:
                while chat.busy or chat.queue[0] != ticket:
                    await chat.changed.wait()
                delay = self._delay(chat)
                if delay <= 0:
                    break
                held = self._global_delay() >= chat.free_at - self._clock()
                self._held_globally += int(held)
                try:
                    await asyncio.sleep(delay)  # then look again: a final may have come first
                finally:
                    self._held_globally -= int(held)
        except BaseException:
            chat.queue.remove(ticket)
            heapq.heapify(chat.queue)
            chat.notify()
            raise
        heapq.heappop(chat.queue)
        self._take(chat)

    def _take(self, chat: _Chat) -> None:
        chat.busy = True
        self._tat = max(self._tat, self._clock()) + self._spacing

    def _delay(self, chat: _Chat) -> float:
        return max(chat.free_at - self._clock(), self._global_delay())

    def _global_delay(self) -> float:
        return self._tat - self._burst_s - self._clock()

    def _chat(self, chat_id: str) -> _Chat:
        chat = self._chats.get(chat_id)
        if chat is None:
            if len(self._chats) >= _PRUNE_AT:
                self._prune()
            chat = self._chats[chat_id] = _Chat()
        return chat

    def _prune(self) -> None:
        now = self._clock()
        for chat_id, chat in list(self._chats.items()):
            if not chat.busy and not chat.queue and chat.free_at < now:
                del self._chats[chat_id]
