"""Live handoff events for the admin view's SSE streams, in this process.

A subscriber gets every event published for one handoff after it subscribed: a user's message
relayed, an operator's reply, a change of state, an audited action. Each subscriber has a
bounded queue; one that falls behind (a stalled browser) loses its oldest events and reloads
the page to catch up (the transcript is the store's), rather than holding memory for ever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

QUEUE: Final = 200

Event = Mapping[str, Any]


class HandoffFeed:
    def __init__(self) -> None:
        self._subscribers: dict[str, set[asyncio.Queue[Event]]] = {}

    def publish(self, handoff_id: str, event: Event) -> None:
        """To the handoff's subscribers, and to those of every handoff (`*`: the list page)."""
        event = {"handoff_id": handoff_id, **event}
        for topic in (handoff_id, "*"):
            for queue in self._subscribers.get(topic, ()):
                if queue.full():
                    queue.get_nowait()
                queue.put_nowait(event)

    @contextmanager
    def subscribe(self, handoff_id: str) -> Iterator[asyncio.Queue[Event]]:
        """The queue this subscriber reads (a plain queue: a read cancelled by a keep-alive
        timeout loses nothing, where an async generator would be closed by it)."""
        queue: asyncio.Queue[Event] = asyncio.Queue(QUEUE)
        subscribers = self._subscribers.setdefault(handoff_id, set())
        subscribers.add(queue)
        try:
            yield queue
        finally:
            subscribers.discard(queue)
            if not subscribers:
                self._subscribers.pop(handoff_id, None)

    def subscribers(self, handoff_id: str) -> int:
        return len(self._subscribers.get(handoff_id, ()))
