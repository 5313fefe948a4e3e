"""`RedisRateBudget`: the `RateBudget` every process shares, so ten of them keep one platform limit.

Each attempt is one Lua script (budget_lua.py) on the server's clock: it takes the slot, or says
how long until it could (spacing, a penalty, the GCRA of a shared rate), or that another call
holds the scope or comes first. Waits are slept here, outside Redis. A wait behind a call in
flight is polled every `POLL_S`: it lasts one platform request, and a poll is one round trip.

If Redis fails, a call is not refused: it goes through this process's `LocalRateBudget`
instead (logged), which keeps the process itself within the limits until Redis is back.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from adapters.budget import Busy, LocalRateBudget, Rank, Rate
from bot.redis import budget_lua
from bot.redis.client import LuaScript, describe

log = logging.getLogger(__name__)

POLL_S: Final = 0.02
LEASE_S: Final = 30.0  # longer than any platform call (Telegram's request timeout is 15 s)
STALE_S: Final = 2.0  # a waiter that has not asked for this long is gone
_RANKS: Final = {"final": 0, "send": 1, "preview": 2}
_WARN_EVERY_S: Final = 10.0


class RedisRateBudget:
    """One budget for every process sharing `redis` and `prefix`."""

    def __init__(self, redis: Redis, *, prefix: str, lease_s: float = LEASE_S) -> None:
        self.redis = redis
        self.prefix = f"{prefix}rb:"
        self._lease_ms = int(lease_s * 1000)
        self._acquire = LuaScript(redis, budget_lua.ACQUIRE)
        self._release = LuaScript(redis, budget_lua.RELEASE)
        self._cancel = LuaScript(redis, budget_lua.CANCEL)
        self._penalize = LuaScript(redis, budget_lua.PENALIZE)
        self._local = LocalRateBudget()
        self._warned = -_WARN_EVERY_S

    @asynccontextmanager
    async def slot(
        self, scope: str, rank: Rank, *, interval_s: float, rates: Sequence[Rate] = ()
    ) -> AsyncIterator[None]:
        token = uuid.uuid4().hex
        try:
            await self._take(scope, rank, token, interval_s, rates)
        except RedisError as exc:
            self._warn(exc)
            async with self._local.slot(scope, rank, interval_s=interval_s, rates=rates):
                yield
            return
        try:
            yield
        finally:
            try:
                await self._release(
                    keys=[self._key(scope, "busy"), self._key(scope, "free")],
                    args=[token, int(interval_s * 1000)],
                )
            except RedisError as exc:
                self._warn(exc)  # the slot's lease ends it

    async def penalize(self, scope: str, retry_after: float) -> None:
        try:
            await self._penalize(keys=[self._key(scope, "free")], args=[int(retry_after * 1000)])
        except RedisError as exc:
            self._warn(exc)
        await self._local.penalize(scope, retry_after)  # also kept here, should Redis fail next

    async def _take(
        self, scope: str, rank: Rank, token: str, interval_s: float, rates: Sequence[Rate]
    ) -> None:
        keys = [self._key(scope, part) for part in ("busy", "free", "q", "seen")]
        keys.append(f"{self.prefix}arrivals")
        args: list[str | int | float] = [
            "preview" if rank == "preview" else "wait",
            token,
            _RANKS[rank],
            interval_s * 1000,
            self._lease_ms,
            STALE_S * 1000,
        ]
        for rate in rates:
            keys += [self._key(rate.scope, part) for part in ("tat", "free", "held")]
            args += [1000 / rate.per_second, rate.burst]
        if rank == "preview":
            taken, wait_ms = await self._acquire(keys=keys, args=args)
            if int(taken) != 1:
                raise Busy(max(float(wait_ms), 1.0) / 1000)
            return
        try:
            while True:
                status, wait_ms = await self._acquire(keys=keys, args=args)
                if int(status) == 1:
                    return
                await asyncio.sleep(POLL_S if int(status) == 2 else float(wait_ms) / 1000)
        except BaseException:
            held = [self._key(rate.scope, "held") for rate in rates]
            try:
                await self._cancel(keys=[keys[2], keys[3], *held], args=[token])
            except RedisError:
                pass  # the waiter stops asking, so the others drop it after STALE_S
            raise

    def _key(self, scope: str, part: str) -> str:
        return f"{self.prefix}{scope}:{part}"

    def _warn(self, exc: RedisError) -> None:
        if time.monotonic() - self._warned >= _WARN_EVERY_S:
            self._warned = time.monotonic()
            log.warning("rate budget: Redis failed (%s); pacing in this process", describe(exc))
