"""`RedisInboundRates`: users' message limits counted in Redis, so N processes keep one rate.

One key per scope, `<prefix>in:<scope>`, holds the GCRA's theoretical arrival time (ms, the
server's clock) and expires once it is in the past plus a second, so a user who stopped sending
costs nothing. Messages are counted in a script, so two processes cannot both let through the
last one. A script call is a round trip, which costs the gateway more CPU than the rest of
taking a message in; so, as the event hub's outbox does, one call is in flight at a time per
process, and the messages arriving meanwhile (any user) are counted together in the next one,
in the order they arrived. A lone message goes at once.

If Redis fails, the message is counted in this process only (`LocalInboundRates`) and a warning
is logged once per outage: the limit guards against floods, and refusing every user while Redis
blinks, or failing their messages for it, would be worse than a per-process limit for a while.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from adapters.rates import LocalInboundRates, burst
from bot.redis.client import LuaScript, cancelled_meanwhile, describe

log = logging.getLogger(__name__)

MAX_TAKES: Final = 100  # per call: a script runs alone on the server, keep each one short

# KEYS: tat per message; ARGV: now_ms ('' for the server's clock), then emission_ms burst per
# message -> per message: '0' taken, or ms until one would be. Two messages of one scope in a
# call are counted one after the other.
TAKE: Final = """
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local out = {}
for i = 1, #KEYS do
  local em, burst = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local tat = math.max(tonumber(redis.call('GET', KEYS[i]) or '0') or 0, now)
  local wait = tat - (burst - 1) * em - now
  if wait > 0 then
    out[i] = string.format('%.3f', math.max(wait, 0.001))
  else
    tat = tat + em
    redis.call('SET', KEYS[i], string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 1000)
    out[i] = '0'
  end
end
return out
"""


@dataclass(slots=True)
class _Take:
    scope: str
    per_minute: int
    waited: asyncio.Future[float]


class RedisInboundRates:
    """The `InboundRates` every process sharing `redis` and `prefix` counts in."""

    def __init__(
        self, redis: Redis, *, prefix: str, clock: Callable[[], float] | None = None
    ) -> None:
        """`clock`: None counts on the Redis server's clock (one for every process); a test
        passes its own, in seconds, so no assertion depends on how fast the calls go."""
        self.prefix = f"{prefix}in:"
        self._take = LuaScript(redis, TAKE)
        self._clock = clock
        self._local = LocalInboundRates(clock=clock or time.monotonic)
        self._failing = False
        self._waiting: list[_Take] = []
        self._sender: asyncio.Task[None] | None = None

    async def take(self, scope: str, per_minute: int) -> float:
        waited: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Take(scope, per_minute, waited))
        if self._sender is None:
            self._sender = asyncio.create_task(self._send_all(), name="redis-inbound-rates")
        return await waited

    async def _send_all(self) -> None:
        takes: list[_Take] = []
        try:
            while self._waiting:
                takes, self._waiting = self._waiting[:MAX_TAKES], self._waiting[MAX_TAKES:]
                for take, wait_s in zip(takes, await self._count(takes), strict=True):
                    if not take.waited.done():  # its message's task was cancelled meanwhile
                        take.waited.set_result(wait_s)
        except BaseException as exc:
            for take in takes + self._waiting:  # cancelled (shutdown): nobody counts them
                if not take.waited.done():
                    if isinstance(exc, Exception):
                        take.waited.set_exception(exc)
                    else:
                        take.waited.cancel()
            self._waiting = []
            raise
        finally:
            self._sender = None

    async def _count(self, takes: list[_Take]) -> list[float]:
        keys: list[str] = []
        args: list[float | str] = ["" if self._clock is None else self._clock() * 1000]
        for take in takes:
            keys.append(f"{self.prefix}{take.scope}")
            args += [60_000 / take.per_minute, burst(take.per_minute)]
        try:
            waits_ms: list[str] = await self._take(keys=keys, args=args)
        except RedisError as exc:
            cancelled_meanwhile()
            if not self._failing:
                self._failing = True
                log.warning(
                    "message rate limits: Redis failed (%s); counting in this process until it "
                    "answers",
                    describe(exc),
                )
            return [self._local.take_now(take.scope, take.per_minute) for take in takes]
        if self._failing:
            self._failing = False
            log.info("message rate limits: Redis answers again; counting there")
        return [float(wait_ms) / 1000 for wait_ms in waits_ms]
