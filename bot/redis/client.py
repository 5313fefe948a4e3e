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
import hashlib
import logging
import random
import time
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

from hiredis import pack_command
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import (
    AbstractConnection,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from adapters.base import TryLater
from tools.redact import redact_credentials

log = logging.getLogger(__name__)

COMMAND_TIMEOUT_S: Final = 2.0
CONNECT_TIMEOUT_S: Final = 1.0
BLOCK_MS: Final = 1000  # the longest BLOCK a reader sends; its socket waits longer
READER_TIMEOUT_S: Final = BLOCK_MS / 1000 + 4.0
# Not a BlockingConnectionPool: it waits with `asyncio.wait_for` (see _CancellableWrites).
# Commands take ~0.1 ms, so even a busy process holds few connections at once.
MAX_CONNECTIONS: Final = 1000
HEALTH_TTL_S: Final = 1.0
RETRY_BACKOFF_S: Final = 0.1  # before the one retry of a refused or dropped connection
KEPT_CONNECTIONS: Final = 8  # per client, for script calls (LuaScript)


class RedisUnavailable(TryLater):
    """Redis did not answer (down, restarting, unreachable): nothing was taken; try later."""


class _CancellableWrites(AbstractConnection):
    """Writes bounded by `asyncio.timeout` instead of redis-py's `asyncio.wait_for`, which on
    Python 3.11 can swallow a cancellation that lands as the write completes (seen here: a
    cancelled XREADGROUP kept its task alive, so shutdown hung)."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        timeout, self.socket_timeout = self.socket_timeout, None
        try:
            async with asyncio.timeout(timeout):
                await super().send_packed_command(command, check_health)
        except TimeoutError:
            await self.disconnect(nowait=True)
            raise RedisTimeoutError("Timeout writing to socket") from None
        finally:
            self.socket_timeout = timeout


class _TcpConnection(_CancellableWrites, Connection):
    pass


class _TlsConnection(_CancellableWrites, SSLConnection):
    pass


class _UnixConnection(_CancellableWrites, UnixDomainSocketConnection):
    pass


class _Pool(ConnectionPool):
    """redis-py's pool, except that once closed it opens nothing: a task still running at
    shutdown gets a ConnectionError (a RedisError, handled as Redis being down) instead of a
    new socket, and a connection handed back is closed. redis-py's own pool connects again for
    a command sent after `aclose`; the connection then stays open until the garbage collector
    meets the pool (a ResourceWarning then: one failed a later test in CI)."""

    closed = False

    async def get_connection(self, *args: Any, **kwargs: Any) -> AbstractConnection:
        if self.closed:
            raise RedisConnectionError("the Redis client is closed")
        return await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call,no-any-return]

    async def release(self, connection: AbstractConnection) -> None:
        await super().release(connection)
        if self.closed:
            await connection.disconnect()

    async def aclose(self) -> None:
        self.closed = True
        await super().aclose()


_CONNECTIONS: Final[dict[str, type[AbstractConnection]]] = {
    "redis": _TcpConnection,
    "rediss": _TlsConnection,
    "unix": _UnixConnection,
}


def connect(url: str, *, reader: bool = False) -> Redis:
    """A client for `url`. `reader=True`: for commands that block up to `BLOCK_MS`."""
    # Only a refused or dropped connection is retried: the command never reached the server.
    retry = Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), 1, (RedisConnectionError,))
    pool = _Pool.from_url(
        url,
        decode_responses=True,
        socket_timeout=READER_TIMEOUT_S if reader else COMMAND_TIMEOUT_S,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_keepalive=True,
        retry=retry,
        max_connections=MAX_CONNECTIONS,
        protocol=2,  # one reply shape for stream reads (RESP3 changes XREADGROUP's)
    )
    # set here: from_url picks its own class for rediss:// and unix://
    pool.connection_class = _CONNECTIONS[url.partition("://")[0].lower()]
    return Redis.from_pool(pool)  # closing the client closes its pool


class LuaScript:
    """A Lua script run by EVALSHA, loaded again if Redis forgot it (a restart, SCRIPT FLUSH).

    In place of redis-py's `register_script` and `execute_command`: a turn is a few script
    calls, and the gateway's CPU per turn in Redis mode is mostly such calls. The command is
    packed by hiredis and sent on a pooled connection directly (redis-py's own path adds a
    Protocol check, argument copies, a retry object and its metrics recording per call: 447 k
    instructions a call against 248 k here, callgrind). Its behaviour is `connect`'s: one retry
    after a refused or dropped connection, none after a timeout; the connection's own reads
    and writes keep their deadlines and drop the connection on a cancellation.
    """

    __slots__ = ("_redis", "script", "sha")

    def __init__(self, redis: Redis, script: str) -> None:
        self._redis = redis
        self.script = script
        self.sha = hashlib.sha1(script.encode()).hexdigest()

    async def __call__(
        self, keys: Sequence[str] = (), args: Sequence[str | int | float] = ()
    ) -> Any:
        try:
            return await self._send(("EVALSHA", self.sha, len(keys), *keys, *args))
        except NoScriptError:
            self.sha = await self._redis.script_load(self.script)
            return await self._send(("EVALSHA", self.sha, len(keys), *keys, *args))

    async def _send(self, command: tuple[str | int | float, ...]) -> Any:
        packed = pack_command(command)  # type: ignore[arg-type]  # its stub: a 1-tuple
        pool: _Pool = self._redis.connection_pool  # type: ignore[assignment]  # connect()'s
        idle = _IDLE.setdefault(pool, [])
        for retry in (False, True):
            # a connection kept for scripts, not handed back: the pool's get and release cost
            # a lock each and metrics records; closing the client still closes them (in use)
            # closed: get_connection refuses (an idle one would connect again as it sends)
            connection = idle.pop() if idle and not pool.closed else await pool.get_connection()
            try:
                await connection.send_packed_command(packed)  # connects again if it was dropped
                return await connection.read_response()  # a failed read drops the connection
            except RedisConnectionError:
                await connection.disconnect()
                if retry:
                    raise
            finally:
                if len(idle) < KEPT_CONNECTIONS and not pool.closed:
                    idle.append(connection)
                else:  # a burst of calls at once: the pool has the rest back (or closes it)
                    await pool.release(connection)
            await asyncio.sleep(random.uniform(0, RETRY_BACKOFF_S))  # noqa: S311
        raise AssertionError("unreachable")


# Per pool: the connections script calls keep to themselves (up to KEPT_CONNECTIONS)
_IDLE: Final[weakref.WeakKeyDictionary[ConnectionPool, list[AbstractConnection]]] = (
    weakref.WeakKeyDictionary()
)


@asynccontextmanager
async def guarded(what: str) -> AsyncIterator[None]:
    """Map redis-py's errors to `RedisUnavailable` (a `TryLater`), naming what failed."""
    try:
        yield
    except RedisError as exc:
        raise RedisUnavailable(f"redis: {what}: {describe(exc)}") from exc


def cancelled_meanwhile() -> None:
    """Re-raise a cancellation redis-py turned into a RedisError.

    A task cancelled while redis-py reads can get a ConnectionError from its cleanup instead
    of the CancelledError (seen here: a retry loop then ran on after shutdown). Every loop that
    retries Redis errors calls this first.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


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
