"""A closed Redis client opens nothing and leaves nothing open (bot/redis/client.py `_Pool`).

redis-py's pool connects again for a command sent after `aclose`, and that socket stays open
until the garbage collector meets it (a ResourceWarning then, like the one that failed a later
test in CI).
Real Redis; the server's CLIENT LIST says which of the test's connections are open.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from bot.redis.client import LuaScript, connect
from tests.redis_kit import URL, redis_prefix


async def _open_named(redis: Redis, name: str, expected: int) -> int:
    """How many connections the server has open under the client name `name`, once it is
    `expected` or after a second (a closed socket reaches the server a moment later)."""
    for _ in range(100):
        clients = await redis.client_list()
        count = sum(1 for client in clients if client.get("name") == name)
        if count == expected:
            break
        await asyncio.sleep(0.01)
    return count


async def _named_client(name: str) -> Redis:
    redis = connect(URL)
    redis.connection_pool.connection_kwargs["client_name"] = name
    return redis


async def test_a_command_in_flight_as_the_client_closes_leaves_no_connection_open() -> None:
    async with redis_prefix() as (observer, _):
        name = f"t-{uuid.uuid4().hex[:8]}"
        redis = await _named_client(name)
        connection = await redis.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        await redis.aclose()  # closes it: then its command connects it again
        await connection.send_command("PING")
        assert await connection.read_response() == "PONG"
        await redis.connection_pool.release(connection)  # as a finishing command does
        assert not connection.is_connected
        assert await _open_named(observer, name, 0) == 0


async def test_a_closed_client_opens_no_connection_for_a_late_command_or_script() -> None:
    async with redis_prefix() as (observer, prefix):
        name = f"t-{uuid.uuid4().hex[:8]}"
        redis = await _named_client(name)
        script = LuaScript(redis, "return ARGV[1]")
        assert await script(keys=[f"{prefix}k"], args=["x"]) == "x"  # keeps its connection
        # 1, or 2 if Redis did not know the script yet (a new server: it failed so here): SCRIPT LOAD
        # went through the pool, whose connection stays open beside the one scripts keep
        assert await _open_named(observer, name, 1) in (1, 2)
        await redis.aclose()
        with pytest.raises(RedisConnectionError, match="closed"):
            await redis.get(f"{prefix}k")  # a task still running at shutdown
        with pytest.raises(RedisConnectionError, match="closed"):
            await script(keys=[f"{prefix}k"], args=["x"])
        assert await _open_named(observer, name, 0) == 0
