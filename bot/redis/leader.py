"""`RedisLeader`: work that one process at a time may do (Telegram long polling), as a lease.

The leader holds `<p>leader:<name>` (`SET NX PX`, its value this process's id) and extends it
every third of the lease; the others try every fifth of it, so a dead leader is replaced within
about `lease_s` + `lease_s`/5. A leader that cannot extend (lost to another, or Redis silent
for a whole lease) stops the work at once, before another may have started: two processes
polling one bot get 409 Conflict from Telegram. Leaving (shutdown, a deploy) deletes the key,
so the next leader starts at once.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.redis.client import cancelled_meanwhile, describe

log = logging.getLogger(__name__)

_EXTEND: Final = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
"""
_RELEASE: Final = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
"""


class _Lost(Exception):
    pass


class RedisLeader:
    def __init__(self, redis: Redis, *, prefix: str, lease_s: float = 5.0) -> None:
        self.redis = redis
        self.prefix = f"{prefix}leader:"
        self.lease_s = lease_s
        self.me = uuid.uuid4().hex
        self._extend = redis.register_script(_EXTEND)
        self._release = redis.register_script(_RELEASE)

    async def lead(self, name: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run `work` whenever this process leads `name`, until cancelled (or `work` returns)."""
        key = self.prefix + name
        while True:
            await self._acquire(key)
            log.info("leading %s", name)
            try:
                async with asyncio.TaskGroup() as group:
                    hold = group.create_task(self._hold(key))
                    await work()
                    hold.cancel()
                    return
            except* _Lost:
                log.warning("lost the lead of %s; another process may take it", name)
            finally:
                await self._let_go(key)

    async def _acquire(self, key: str) -> None:
        while True:
            try:
                if await self.redis.set(key, self.me, nx=True, px=int(self.lease_s * 1000)):
                    return
            except RedisError as exc:
                cancelled_meanwhile()
                log.warning("leader election: Redis failed (%s)", describe(exc))
            await asyncio.sleep(self.lease_s / 5)

    async def _hold(self, key: str) -> None:
        loop = asyncio.get_running_loop()
        held_until = loop.time() + self.lease_s
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                if not int(
                    await self._extend(keys=[key], args=[self.me, int(self.lease_s * 1000)])
                ):
                    raise _Lost
                held_until = loop.time() + self.lease_s
            except RedisError as exc:
                cancelled_meanwhile()
                log.warning("leader lease not extended (%s)", describe(exc))
                if loop.time() >= held_until - self.lease_s / 3:
                    raise _Lost from exc  # it may lapse before we could know: stop first

    async def _let_go(self, key: str) -> None:
        try:
            async with asyncio.timeout(1):
                await self._release(keys=[key], args=[self.me])
        except (RedisError, TimeoutError):
            pass  # it expires with its lease
