"""`RedisDedup`: claim each platform event once across every process, with `SET NX PX`."""

from __future__ import annotations

from redis.asyncio import Redis

from bot.redis.client import guarded


def once_key(prefix: str, event_id: str) -> str:
    """The conversation queue's note that `event_id` was queued (conversations_lua.py ENQUEUE):
    a second enqueue of it, after a reply lost on the way back, queues nothing."""
    return f"{prefix}q:once:{event_id}"


class RedisDedup:
    """`SET <prefix>dedup:<event> 1 NX PX <ttl>`: the first process to set it answers the event.

    The key expires with the TTL, so Redis holds the claims of the last day only. Errors raise
    `RedisUnavailable`: the gateway then refuses the event so the platform delivers it again.
    """

    def __init__(self, redis: Redis, *, prefix: str, ttl_s: float = 86400) -> None:
        self.redis = redis
        self.base = prefix
        self.prefix = f"{prefix}dedup:"
        self.ttl_ms = int(ttl_s * 1000)

    def key(self, event_id: str) -> str:
        """The claim's key (RedisConversations.enqueue_new sets it while queueing)."""
        return self.prefix + event_id

    async def claim(self, event_id: str) -> bool:
        if self.ttl_ms < 1:
            return True  # a claim that expires at once holds nothing
        async with guarded("claiming an event"):
            claimed = await self.redis.set(self.key(event_id), "1", nx=True, px=self.ttl_ms)
        return bool(claimed)

    async def release(self, event_id: str) -> None:
        async with guarded("releasing an event"):
            await self.redis.delete(self.key(event_id))

    async def reopen(self, event_id: str) -> None:
        """The claim and the queue's once-note together (one DEL): the event's turn asked for
        a retry, and the queue must take the redelivery instead of dropping it as the double of
        an enqueue whose reply was lost. `release` alone keeps the note, for that very case."""
        async with guarded("reopening an event"):
            await self.redis.delete(self.key(event_id), once_key(self.base, event_id))
