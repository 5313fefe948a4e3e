"""`LuaScript`: EVALSHA, and the script loaded when Redis does not know it (yet, or any more)."""

from __future__ import annotations

import uuid

from bot.redis.client import LuaScript, connect
from tests.redis_kit import URL, redis_prefix


async def test_a_script_redis_does_not_know_is_loaded_and_run() -> None:
    async with redis_prefix() as (_, prefix):
        redis = connect(URL)
        try:
            # a source no Redis has seen: the first EVALSHA fails with NOSCRIPT
            script = LuaScript(redis, f"-- {uuid.uuid4().hex}\nreturn {{KEYS[1], ARGV[1], #ARGV}}")
            assert await redis.script_exists(script.sha) == [False]
            assert await script(keys=[f"{prefix}k"], args=["a", 2]) == [f"{prefix}k", "a", 2]
            assert await redis.script_exists(script.sha) == [True]
            assert await script(keys=[f"{prefix}k"], args=[1.5]) == [f"{prefix}k", "1.5", 1]
        finally:
            await redis.aclose()
