"""`/stop` and TaskStop from any process reach the turn or specialist wherever it runs."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.redis.client import BLOCK_MS, cancelled_meanwhile, describe

log = logging.getLogger(__name__)

BACKOFF_S: Final = (0.05, 2.0)


async def listen_for_stops(
    reader: Redis,
    stop_channel: str,
    task_stop_channel: str,
    *,
    stop: Callable[[str], object],
    stop_task: Callable[[str, str], object],
) -> None:
    """Until cancelled, `stop(conversation key)` for each /stop published on `stop_channel`,
    `stop_task(conversation key, task id)` for each on `task_stop_channel`. At most once
    (pub/sub): the lease heartbeat also reads the stop flag."""
    pubsub = reader.pubsub(ignore_subscribe_messages=True)
    backoff = BACKOFF_S[0]
    fresh = True
    try:
        while True:
            try:
                if fresh:  # at start, and after a reconnect (Redis may have been loading)
                    await pubsub.subscribe(stop_channel, task_stop_channel)
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
            if message["channel"] == task_stop_channel:
                asked = json.loads(message["data"])
                stop_task(asked["conversation"], asked["task_id"])
            else:
                stop(message["data"])
    finally:
        await pubsub.aclose()
