"""`RedisQuotaState`: usage quotas' counters in Redis, one hash per bucket, every step one script.

`<prefix>quota:<bucket>` holds `t` (turns) and `k` (tokens) and expires at the end of its
window (PEXPIREAT, never moved earlier), so Redis forgets old windows by itself. `take` reads
every bucket of a turn and counts the turn only if none has reached its limit, in one script:
two processes cannot both admit the last turn of a window.

If Redis fails, the turn is admitted and not counted (logged): a quota guards cost, and a turn
that got this far has its message queued in Redis already; refusing every user while Redis
blinks would be worse than a few uncounted turns.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.pipeline.quota import Bucket, Check, Counts
from bot.redis.client import LuaScript, describe

log = logging.getLogger(__name__)

_EXPIRE: Final = """
local function expire_at(key, at)
  if redis.call('PEXPIRETIME', key) < at then redis.call('PEXPIREAT', key, at) end
end
"""

# KEYS: the buckets; ARGV: per bucket turn_limit token_limit (-1: none) expires_at_ms
# -> {} admitted and counted, or {turns1, tokens1, turns2, tokens2, ...} refused
TAKE: Final = (
    _EXPIRE
    + """
local counts, refused = {}, false
for i, key in ipairs(KEYS) do
  local have = redis.call('HMGET', key, 't', 'k')
  local turns, tokens = tonumber(have[1] or '0'), tonumber(have[2] or '0')
  counts[#counts + 1], counts[#counts + 2] = turns, tokens
  local turn_limit, token_limit = tonumber(ARGV[3 * i - 2]), tonumber(ARGV[3 * i - 1])
  if (turn_limit >= 0 and turns >= turn_limit) or (token_limit >= 0 and tokens >= token_limit) then
    refused = true
  end
end
if refused then return counts end
for i, key in ipairs(KEYS) do
  redis.call('HINCRBY', key, 't', 1)
  expire_at(key, tonumber(ARGV[3 * i]))
end
return {}
"""
)

# KEYS: the buckets; ARGV: turns tokens, then per bucket expires_at_ms
ADD: Final = (
    _EXPIRE
    + """
for i, key in ipairs(KEYS) do
  redis.call('HINCRBY', key, 't', ARGV[1])
  redis.call('HINCRBY', key, 'k', ARGV[2])
  expire_at(key, tonumber(ARGV[2 + i]))
end
return 1
"""
)


class RedisQuotaState:
    """The `QuotaState` every process sharing `redis` and `prefix` counts in."""

    def __init__(self, redis: Redis, *, prefix: str) -> None:
        self.redis = redis
        self.prefix = f"{prefix}quota:"
        self._take = LuaScript(redis, TAKE)
        self._add = LuaScript(redis, ADD)

    async def counts(self, buckets: Sequence[str]) -> dict[str, Counts]:
        if not buckets:
            return {}
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for bucket in buckets:
                    pipe.hmget(self.prefix + bucket, ["t", "k"])
                found: list[list[str | None]] = await pipe.execute()
        except RedisError as exc:
            log.warning("quota counters not read (nothing refused): %s", describe(exc))
            return {}
        return {
            bucket: (int(turns or 0), int(tokens or 0))
            for bucket, (turns, tokens) in zip(buckets, found, strict=True)
            if turns is not None or tokens is not None
        }

    async def add(self, bucket: str, *, turns: int, tokens: int, expires_at: float) -> None:
        await self.add_each([(bucket, expires_at)], turns=turns, tokens=tokens)

    async def add_each(self, buckets: Sequence[Bucket], *, turns: int, tokens: int) -> None:
        keys = [self.prefix + bucket for bucket, _ in buckets]
        args = [turns, tokens, *(int(expires_at * 1000) for _, expires_at in buckets)]
        try:
            await self._add(keys=keys, args=args)
        except RedisError as exc:
            log.warning("quotas: %d token(s) not counted: %s", tokens, describe(exc))

    async def take(self, checks: Sequence[Check]) -> dict[str, Counts] | None:
        args: list[int] = []
        for check in checks:
            args += [_limit(check.turns), _limit(check.tokens), int(check.expires_at * 1000)]
        try:
            found = await self._take(keys=[self.prefix + c.bucket for c in checks], args=args)
        except RedisError as exc:
            log.warning("quota counters not read; the turn is admitted: %s", describe(exc))
            return None
        if not found:
            return None
        pairs = zip(found[::2], found[1::2], strict=True)
        return {
            check.bucket: (int(turns), int(tokens))
            for check, (turns, tokens) in zip(checks, pairs, strict=True)
            if turns or tokens
        }


def _limit(value: int | None) -> int:
    return -1 if value is None else value
