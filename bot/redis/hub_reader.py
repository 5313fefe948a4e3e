"""The event hub's pub/sub reader: frames to sockets, and back on its feet after a reconnect."""

from __future__ import annotations

import asyncio
import logging
from typing import Final, Protocol

from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from bot.redis.client import BLOCK_MS, cancelled_meanwhile, describe

log = logging.getLogger(__name__)

BACKOFF_S: Final = (0.05, 2.0)


class ReadHub(Protocol):
    """What the reader drives of the hub it reads for (`RedisEventHub`)."""

    subscribed_once: asyncio.Event  # a PubSub has no connection before its first subscribe

    async def resubscribe(self, pubsub: PubSub) -> None: ...
    async def catch_up(self) -> None: ...
    def confirmed(self, channel: str) -> None: ...
    async def deliver(self, channel: str, frame: str) -> None: ...


async def read_frames(hub: ReadHub, pubsub: PubSub) -> None:
    """Until cancelled. Redis down: retry with backoff (redis-py reconnects and subscribes
    again), then fetch from the streams what pub/sub lost meanwhile."""
    await hub.subscribed_once.wait()  # a PubSub has no connection before its first subscribe
    backoff, lost = BACKOFF_S[0], False
    while True:
        try:
            if lost:
                # Subscribe again ourselves: redis-py's own resubscribe on reconnect can meet a
                # Redis still loading its data, and then nothing is subscribed (seen here).
                await hub.resubscribe(pubsub)
                await hub.catch_up()
                log.info("event hub: Redis is back; caught up")
                backoff, lost = BACKOFF_S[0], False
            message = await pubsub.get_message(timeout=BLOCK_MS / 1000)
            if message is None:
                continue
            kind = message["type"]
            if kind == "subscribe":
                hub.confirmed(message["channel"])
            elif kind == "message":
                await hub.deliver(message["channel"], message["data"])
        except (RedisError, OSError) as exc:
            cancelled_meanwhile()
            if not lost:
                log.warning("event hub: Redis connection lost (%s); reconnecting", describe(exc))
            lost = True
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_S[1])
