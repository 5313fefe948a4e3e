"""`RedisAccounts`: who runs a platform account, across every host that shares the Redis server.

The key is deliberately outside `redis.prefix`: two deployments on one Redis (staging and
production, say) given the same bot token must see each other. Its value names the holder's
identity (`<prefix><instance>`: the processes of one deployment share the account and elect
their poller as before) and a label for the refusal. The holder extends it every third of its
lease; it lapses a lease after the last holder stops.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Final

from redis.asyncio import Redis
from redis.exceptions import RedisError

from adapters.accounts import AccountTaken, holder_label
from bot.redis.client import cancelled_meanwhile, describe

log = logging.getLogger(__name__)

KEY_PREFIX: Final = "chatgw:account:"
# '' when held (taken now, or already ours); else the other holder's label
_CLAIM: Final = """
local held = redis.call('GET', KEYS[1])
if held then
  local holder = cjson.decode(held)
  if holder.identity ~= ARGV[1] then return holder.label end
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return ''
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return ''
"""


class RedisAccounts:
    def __init__(self, redis: Redis, *, prefix: str, lease_s: float = 15.0) -> None:
        self.redis = redis
        self.prefix = prefix
        self.lease_s = lease_s
        self._claim = redis.register_script(_CLAIM)

    def hold(self, key: str, account: str, instance: str) -> AbstractAsyncContextManager[None]:
        return self._hold(key, account, instance)

    @asynccontextmanager
    async def _hold(self, key: str, account: str, instance: str) -> AsyncIterator[None]:
        identity = f"{self.prefix}{instance}"
        label = f"{holder_label(instance)} with redis.prefix {self.prefix!r}"
        value = json.dumps({"identity": identity, "label": label})
        args: list[str | int] = [identity, value, int(self.lease_s * 1000)]
        theirs = await self._claim(keys=[KEY_PREFIX + key], args=args)
        if theirs:
            raise AccountTaken(account, _text(theirs), label)
        # owned here, not by a TaskGroup: one would wrap the block's own errors in a group
        extending = asyncio.create_task(self._extend(KEY_PREFIX + key, account, args))
        try:
            yield
        finally:
            extending.cancel()
            await asyncio.wait({extending})

    async def _extend(self, key: str, account: str, args: list[str | int]) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                theirs = await self._claim(keys=[key], args=args)
            except RedisError as exc:  # a blip: the lease outlasts two of these
                cancelled_meanwhile()
                log.warning("%s: holding it in Redis failed (%s)", account, describe(exc))
                continue
            if theirs:  # our lease lapsed while Redis was away, and another took the bot
                log.error("%s: lost to %s while Redis was unreachable", account, _text(theirs))
                return


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
