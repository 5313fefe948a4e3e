"""`RedisInboundRates`: users' message limits counted in Redis, so N processes keep one rate.

One key per scope, `<prefix>in:<scope>`, holds the GCRA's theoretical arrival time (ms, the
server's clock) and expires once it is in the past plus a second, so a user who stopped sending
costs nothing. Each message is one EVALSHA: two processes cannot both let through the last one.

If Redis fails, the message is counted in this process only (`LocalInboundRates`) and a warning
is logged once per outage: the limit guards against floods, and refusing every user while Redis
blinks, or failing their messages for it, would be worse than a per-process limit for a while.
"""

from __future__ import annotations

import logging
from typing import Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from adapters.websocket.limits import LocalInboundRates, burst
from bot.redis.client import LuaScript, describe

log = logging.getLogger(__name__)

# KEYS: tat; ARGV: emission_ms burst -> '0' taken, or ms until one would be
TAKE: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local em, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or '0') or 0, now)
local wait = tat - (burst - 1) * em - now
if wait > 0 then return string.format('%.3f', math.max(wait, 0.001)) end
tat = tat + em
redis.call('SET', KEYS[1], string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 1000)
return '0'
"""


class RedisInboundRates:
    """The `InboundRates` every process sharing `redis` and `prefix` counts in."""

    def __init__(self, redis: Redis, *, prefix: str) -> None:
        self.prefix = f"{prefix}in:"
        self._take = LuaScript(redis, TAKE)
        self._local = LocalInboundRates()
        self._failing = False

    async def take(self, scope: str, per_minute: int) -> float:
        try:
            wait_ms = await self._take(
                keys=[f"{self.prefix}{scope}"], args=[60_000 / per_minute, burst(per_minute)]
            )
        except RedisError as exc:
            if not self._failing:
                self._failing = True
                log.warning(
                    "message rate limits: Redis failed (%s); counting in this process until it "
                    "answers",
                    describe(exc),
                )
            return self._local.take_now(scope, per_minute)
        if self._failing:
            self._failing = False
            log.info("message rate limits: Redis answers again; counting there")
        return float(wait_ms) / 1000
