"""`/stop` and TaskStop from any process reach the turn or specialist wherever it runs."""

from __future__ import annotations

import asyncio
import json
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
                    await pubsub.subscribe(queue.stop_channel, queue.task_stop_channel)
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
            if message is None or message["type"] != "message":
                continue
            if message["channel"] == queue.task_stop_channel:
                asked = json.loads(message["data"])
                for task_hook in queue.task_stop_hooks:
                    task_hook(asked["conversation"], asked["task_id"])
                continue
            conversation = message["data"]
            queue.stop_here(conversation)
            for hook in queue.stop_hooks:
                hook(conversation)
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
