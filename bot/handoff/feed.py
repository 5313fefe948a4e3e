"""Live handoff events for the admin view's SSE streams, through the event hub seam.

A subscriber gets every event published for one handoff after it subscribed (`*`: of every
handoff, for the list page): a user's message relayed, an operator's reply, a change of state,
an audited action. The hub is this process's own (`MemoryEventHub`), or Redis's with
`redis.url` (bot/redis/hub.py): then an operator's page sees what any process did. Each
subscriber has a bounded queue; one that falls behind (a stalled browser) loses its oldest
events and reloads the page to catch up (the transcript is the store's). Publishing never fails
a handoff: an event the hub refuses is logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final

from adapters.base import ChannelError, TryLater
from adapters.hub.base import EventHub
from adapters.hub.local import MemoryEventHub

log = logging.getLogger(__name__)

QUEUE: Final = 200
KEY: Final = "admin-handoffs:"  # the hub's conversation keys: apart from every channel's
REPLAY: Final = 100

Event = Mapping[str, Any]


class _Queued:
    """A hub subscriber that queues the encoded frames for one SSE stream."""

    def __init__(self, queue: asyncio.Queue[str]) -> None:
        self.queue = queue

    def push(self, frame: str) -> bool:
        if self.queue.full():
            self.queue.get_nowait()
        self.queue.put_nowait(frame)
        return True


class HandoffFeed:
    def __init__(self, hub: EventHub | None = None) -> None:
        self.hub: EventHub = hub if hub is not None else MemoryEventHub(replay_events=REPLAY)

    async def publish(self, handoff_id: str, event: Event) -> None:
        """To the handoff's subscribers and to those of every handoff (`*`); `kind` is the type."""
        fields = {"handoff_id": handoff_id, **{k: v for k, v in event.items() if k != "kind"}}
        kind = str(event.get("kind", "message"))
        for topic in (handoff_id, "*"):
            try:
                await self.hub.publish(KEY + topic, kind, fields)
            except (ChannelError, TryLater) as exc:
                log.warning("handoff %s: a live %s event not published: %s", handoff_id, kind, exc)

    @asynccontextmanager
    async def subscribe(self, topic: str) -> AsyncIterator[asyncio.Queue[str]]:
        """The queue of encoded frames (JSON with `type`) this subscriber reads (a plain queue:
        a read cancelled by a keep-alive timeout loses nothing)."""
        queue: asyncio.Queue[str] = asyncio.Queue(QUEUE)
        subscriber = _Queued(queue)
        await self.hub.attach(KEY + topic, subscriber, None)
        try:
            yield queue
        finally:
            await self.hub.detach(KEY + topic, subscriber)
