"""The `Accounts` contract, for every implementation: one holder per platform account, a second
refused naming the first, the account free again once its holder stops."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from adapters.accounts import Accounts, AccountTaken, FileAccounts
from bot.redis.accounts import KEY_PREFIX, RedisAccounts
from tests.redis_kit import redis_prefix

# (deployment) -> an Accounts seen by one deployment; two calls with different names are two
# gateways that must not share a bot, whatever the implementation
MakeAccounts = Callable[[str], Accounts]


@pytest.fixture
def key() -> str:
    return f"telegram:{uuid.uuid4().int % 10**9}"


@pytest.fixture(params=["file", "redis"])
async def make(
    request: pytest.FixtureRequest, tmp_path: Path, key: str
) -> AsyncIterator[MakeAccounts]:
    if request.param == "file":
        yield lambda deployment: FileAccounts(tmp_path / "accounts")
        return
    async with redis_prefix() as (redis, prefix):
        try:
            yield lambda deployment: RedisAccounts(
                redis, prefix=f"{prefix}{deployment}:", lease_s=0.6
            )
        finally:
            await redis.delete(KEY_PREFIX + key)


async def test_a_second_gateway_is_refused_naming_the_first(make: MakeAccounts, key: str) -> None:
    async with make("a").hold(key, "Telegram bot @x (id 1)", "main"):
        with pytest.raises(AccountTaken) as taken:
            async with make("b").hold(key, "Telegram bot @x (id 1)", "support"):
                pytest.fail("two gateways hold one bot")
    message = str(taken.value)
    assert message.startswith("Telegram bot @x (id 1) is already run by instance 'main'")
    assert f"pid {os.getpid()}" in message and "(instance 'support'" in message


async def test_other_accounts_are_independent(make: MakeAccounts, key: str) -> None:
    async with make("a").hold(key, "one", "main"), make("b").hold(key + "0", "two", "support"):
        pass


async def test_the_account_is_free_once_its_holder_stops(make: MakeAccounts, key: str) -> None:
    async with make("a").hold(key, "bot", "main"):
        pass
    async with asyncio.timeout(10):  # Redis: the lease lapses; a file lock goes at once
        while True:
            try:
                async with make("b").hold(key, "bot", "support"):
                    return
            except AccountTaken:
                await asyncio.sleep(0.1)


async def test_processes_of_one_deployment_share_the_account(key: str) -> None:
    """Over Redis, processes with the same prefix and instance hold the bot together (they elect
    one poller), and it stays held while any of them does: the lease is extended."""
    async with redis_prefix() as (redis, prefix):
        try:
            one = RedisAccounts(redis, prefix=prefix, lease_s=2.0)
            other = RedisAccounts(redis, prefix=prefix, lease_s=2.0)
            async with one.hold(key, "bot", "main"), other.hold(key, "bot", "main"):
                for _ in range(4):  # past several leases: extended, not lapsed
                    await asyncio.sleep(0.7)
                    with pytest.raises(AccountTaken):
                        async with RedisAccounts(redis, prefix="x:", lease_s=2.0).hold(
                            key, "bot", "main"
                        ):
                            pass
        finally:
            await redis.delete(KEY_PREFIX + key)
