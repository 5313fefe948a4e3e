"""Resumptions the store refused, tried again in this process once it may answer.

A turn left unfinished by a dead process is resumed at start (embedded mode). If the store
refuses then (the disk still full, another process holding the lock), the turn stays `running`;
waiting for the next restart would leave the user with no answer until then, and answer them
late, over whatever came since. So the refused resumption is queued on its conversation again,
with backoff (as `TurnEnds` retries a refused end), until the store takes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from adapters.base import ChatRef

log = logging.getLogger(__name__)

BACKOFF_S: Final = (0.5, 5.0)  # waits double from 0.5 s up to 5 s while the store refuses

Requeue = Callable[[str, ChatRef], Awaitable[None]]


class Deferred:
    def __init__(self) -> None:
        self.pending: dict[str, ChatRef] = {}  # turn id -> its conversation's chat
        self._more = asyncio.Event()
        self._wait = BACKOFF_S[0]

    def add(self, turn_id: str, chat: ChatRef) -> None:
        """The store refused to resume `turn_id`: try again later."""
        self.pending[turn_id] = chat
        self._more.set()

    def done(self) -> None:
        """A resumption went through: the store answers again, so the next wait is short."""
        self._wait = BACKOFF_S[0]

    async def retry(self, requeue: Requeue) -> None:
        """Until cancelled: queue the refused resumptions again, one round at a time."""
        while True:
            if not self.pending:
                self._more.clear()
                await self._more.wait()
            await asyncio.sleep(self._wait)
            self._wait = min(self._wait * 2, BACKOFF_S[1])
            turns, self.pending = self.pending, {}
            for turn_id, chat in turns.items():
                try:
                    await requeue(turn_id, chat)
                except Exception:  # a full queue, say: the next round tries again
                    log.exception("turn %s: its resumption was not queued again", turn_id)
                    self.pending[turn_id] = chat
