"""`/stop` from any process reaches the turn wherever it runs: a message on one channel."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Final

from redis.exceptions import RedisError

from bot.redis.client import BLOCK_MS, cancelled_meanwhile, describe

if TYPE_CHECKING:
    from bot.redis.conversations import RedisConversations

log = logging.getLogger(__name__)

BACKOFF_S: Final = (0.05, 2.0)


async def listen_for_stops(queue: RedisConversations) -> None:
    """Until cancelled. At most once (pub/sub): the lease heartbeat also reads the stop flag."""
    pubsub = queue.reader.pubsub(ignore_subscribe_messages=True)
    backoff = BACKOFF_S[0]
    fresh = True
    try:
        while True:
            try:
                if fresh:  # at start, and after a reconnect (Redis may have been loading)
                    await pubsub.subscribe(queue.stop_channel)
                    fresh = False
                message = await pubsub.get_message(timeout=BLOCK_MS / 1000)
                backoff = BACKOFF_S[0]
            except (RedisError, OSError) as exc:
                cancelled_meanwhile()
                fresh = True
                log.warning("stop listener: Redis failed (%s); reconnecting", describe(exc))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_S[1])
                continue
            if message is not None and message["type"] == "message":
                conversation = message["data"]
                queue.stop_here(conversation)
                for hook in queue.stop_hooks:
                    hook(conversation)
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
