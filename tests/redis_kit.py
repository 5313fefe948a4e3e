"""The real Redis for tests: a fresh key prefix per use, its keys deleted afterwards.

Tests use the server at `TEST_REDIS_URL` (default redis://127.0.0.1:6379/0) and skip, saying
why, only when no server answers there.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.redis.accounts import KEY_PREFIX as ACCOUNT_KEYS
from bot.redis.client import connect

URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


async def skip_without_redis(url: str = URL) -> None:
    probe = connect(url)
    try:
        await probe.ping()
    except (RedisError, OSError) as exc:
        pytest.skip(f"no Redis answers at {url} ({type(exc).__name__}); start redis-server")
    finally:
        await probe.aclose()


async def delete_prefix(redis: Redis, prefix: str) -> None:
    """Every key under `prefix`, and the bot accounts its processes held: those keys are outside
    any prefix by design (bot/redis/accounts.py), and a process a test killed leaves its lease
    for up to 15 s, which would keep the next test's gateways (the same fake bot id, another
    prefix) off the platform meanwhile."""
    keys = [key async for key in redis.scan_iter(match=f"{prefix}*", count=1000)]
    async for key in redis.scan_iter(match=f"{ACCOUNT_KEYS}*", count=1000):
        held = await redis.get(key)
        if held is not None and json.loads(held).get("identity", "").startswith(prefix):
            keys.append(key)
    if keys:
        await redis.delete(*keys)


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    """A key prefix of this test's own on the shared Redis, its keys deleted afterwards."""
    async with redis_prefix() as (_, name):
        yield name


@asynccontextmanager
async def redis_prefix(url: str = URL) -> AsyncIterator[tuple[Redis, str]]:
    """A client and a key prefix no other test uses; every key under it is deleted at the end."""
    await skip_without_redis(url)
    redis = connect(url)
    prefix = f"test:{uuid.uuid4().hex[:12]}:"
    try:
        yield redis, prefix
    finally:
        try:
            await delete_prefix(redis, prefix)
        finally:  # a failed clean-up must not leave the client's sockets open too
            await redis.aclose()


async def until_queued(prefix: str, url: str = URL, timeout: float = 60.0) -> None:
    """Until a message waits in a conversation's list (recorded state, so polled): it was
    queued, behind a turn another process is running."""
    redis = connect(url)
    try:
        async with asyncio.timeout(timeout):
            while True:
                keys = [key async for key in redis.scan_iter(match=f"{prefix}q:*:in")]
                if keys and any([await redis.llen(key) for key in keys]):
                    return
                await asyncio.sleep(0.05)
    finally:
        await redis.aclose()
