"""The Redis connection every Redis seam shares, its error, and what `/healthz` says of it.

redis-py's defaults are wrong for a gateway (reference/scale-out.md): `socket_timeout` 5 s,
`from_url` retrying nothing, so the first command after a Redis restart fails on a connection the
server closed. Here: short deadlines, and one retry for a connection error only. A *timeout* is
never retried, since the command may have run (a retried XADD was seen written 11 times); the
scripts are idempotent or fenced where that matters. Readers that block (XREADGROUP BLOCK,
pub/sub) use their own client whose socket timeout is longer than any BLOCK they send.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from adapters.base import TryLater
from tools.redact import redact_credentials

log = logging.getLogger(__name__)

COMMAND_TIMEOUT_S: Final = 2.0
CONNECT_TIMEOUT_S: Final = 1.0
BLOCK_MS: Final = 1000  # the longest BLOCK a reader sends; its socket waits longer
READER_TIMEOUT_S: Final = BLOCK_MS / 1000 + 4.0
MAX_CONNECTIONS: Final = 64  # a blocking pool queues past this instead of failing
HEALTH_TTL_S: Final = 1.0


class RedisUnavailable(TryLater):
    """Redis did not answer (down, restarting, unreachable): nothing was taken; try later."""


def connect(url: str, *, reader: bool = False) -> Redis:
    """A client for `url`. `reader=True`: for commands that block up to `BLOCK_MS`."""
    retry = Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), 1)
    # Only a refused or dropped connection is retried: the command never reached the server.
    retry.update_supported_errors([RedisConnectionError])
    pool = BlockingConnectionPool.from_url(
        url,
        decode_responses=True,
        socket_timeout=READER_TIMEOUT_S if reader else COMMAND_TIMEOUT_S,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_keepalive=True,
        retry=retry,
        max_connections=MAX_CONNECTIONS,
        timeout=COMMAND_TIMEOUT_S,  # waiting for a free connection
        protocol=2,  # one reply shape for stream reads (RESP3 changes XREADGROUP's)
    )
    return Redis.from_pool(pool)  # closing the client closes its pool


@asynccontextmanager
async def guarded(what: str) -> AsyncIterator[None]:
    """Map redis-py's errors to `RedisUnavailable` (a `TryLater`), naming what failed."""
    try:
        yield
    except RedisError as exc:
        raise RedisUnavailable(f"redis: {what}: {describe(exc)}") from exc


def describe(exc: BaseException) -> str:
    return redact_credentials(f"{type(exc).__name__}: {exc}")


class RedisHealth:
    """For `/healthz`: a PING at most once a second, so a probe storm costs Redis nothing."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._checked = -HEALTH_TTL_S
        self._state: dict[str, Any] = {"redis": "unknown"}
        self._lock = asyncio.Lock()

    async def report(self) -> dict[str, Any]:
        async with self._lock:
            if time.monotonic() - self._checked >= HEALTH_TTL_S:
                self._state = await self._ping()
                self._checked = time.monotonic()
            return self._state

    @property
    def up(self) -> bool:
        return self._state.get("redis") == "ok"

    async def _ping(self) -> dict[str, Any]:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await self._redis.ping()
        except (RedisError, OSError, TimeoutError) as exc:
            return {"redis": "down", "redis_error": describe(exc)}
        return {"redis": "ok"}
