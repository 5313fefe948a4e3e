"""Telegram long polling with two real `bot serve` processes on one Redis: one leads (polls),
and when it is killed (-9: it never lets go) the other takes the lead once the lease lapses and
answers what arrives next, once. The takeover time is printed; it is the benchmark's to
measure, not a test's to assert."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import eventually
from tests.processes import Gateway, gateways, joined_logs, write_config
from tests.redis_kit import URL, prefix
from tests.telegram_fake import TOKEN, FakeBotAPI

__all__ = ["prefix"]
pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]
LEADING = "leading telegram:"  # RedisLeader's line when this process starts to poll
LEASE_S = 2


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    async with FakeBotAPI(interval_s=0.05) as api:
        yield api


def _answered(fake: FakeBotAPI, chat: int) -> bool:
    return any("not an LLM" in text for (c, _), text in fake.messages.items() if c == chat)


async def test_the_polling_leader_killed_is_replaced_and_nothing_is_answered_twice(
    prefix: str, tmp_path: Path, fake: FakeBotAPI
) -> None:
    telegram = {"enabled": True, "token": "${TELEGRAM_BOT_TOKEN}", "api_base": fake.url}
    config = write_config(
        tmp_path,
        redis={"url": URL, "prefix": prefix, "lease_s": LEASE_S},
        channels={"telegram": telegram | {"mode": "polling"}, "websocket": {"enabled": False}},
    )
    async with gateways(2, config, {"TELEGRAM_BOT_TOKEN": TOKEN}) as processes:

        def leaders() -> list[Gateway]:
            return [g for g in processes if g.logged(LEADING) and g.process.returncode is None]

        try:
            await eventually(lambda: len(leaders()) == 1, 60)
            leader = leaders()[0]
            fake.push(fake.message(101, "hello"))
            await eventually(lambda: _answered(fake, 101), 60)

            leader.process.kill()  # SIGKILL: its lease is not let go, only lapses
            await leader.process.wait()
            killed = time.monotonic()
            fake.push(fake.message(102, "anyone there?"))
            await eventually(lambda: _answered(fake, 102), 60)
            takeover_s = time.monotonic() - killed
            (successor,) = leaders()
            assert successor is not leader and successor.logged(LEADING) == 1
        except (AssertionError, TimeoutError):
            raise AssertionError(f"the logs:\n{joined_logs(processes)}") from None
    print(f"polling taken over and answered {takeover_s:.1f} s after kill -9 (lease {LEASE_S} s)")
    for chat in (101, 102):  # one placeholder each, edited into the one answer
        assert len(fake.ok(chat, "sendMessage")) == 1
