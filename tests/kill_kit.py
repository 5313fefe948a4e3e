"""What the kill -9 tests share: a Telegram bot on a fake Bot API and a fake model, real
`bot serve` processes on one SQLite file (and one Redis, with its own key prefix)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from tests.fake_llm import llm_config
from tests.fake_openai import FakeOpenAI
from tests.processes import Gateway, write_config
from tests.telegram_fake import TOKEN, FakeBotAPI

WAIT_S = 90.0  # a `bot serve` start alone has taken 20 s and more on a loaded 2-core machine
SECRET = "kill-test-secret"
# A lease a loaded CI machine does not outlast by itself: with three test workers and two
# `bot serve` starts on two cores, a whole process once stood still 2 s (its lease at 2 s lapsed
# and it took its own turn back). A kill's takeover waits for it: WAIT_S covers that.
LEASE_S = 4
PERSONA = """---
name: default
description: Sells assessments.
tools: [create_payment]
---
You sell assessments.
"""


def env(redis_url: str | None = None) -> dict[str, str]:
    found = {"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_WEBHOOK_SECRET": SECRET}
    return found | ({"REDIS_URL": redis_url} if redis_url else {})


def rows(folder: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(folder / "bot.db") as db:
        return db.execute(sql).fetchall()


def config(
    folder: Path,
    fake: FakeBotAPI,
    model: FakeOpenAI,
    prefix: str | None,
    *,
    lease_s: float = LEASE_S,
) -> Path:
    """A Telegram webhook bot; with `prefix`, several processes share work over Redis
    (`${REDIS_URL}`, so each process can be given its own way to the server)."""
    personas = folder / "personas"
    personas.mkdir(exist_ok=True)
    (personas / "default.md").write_text(PERSONA)
    telegram = {
        "enabled": True,
        "token": "${TELEGRAM_BOT_TOKEN}",
        "api_base": fake.url,
        "mode": "webhook",
        "webhook_secret": "${TELEGRAM_WEBHOOK_SECRET}",
        "private_edit_interval_s": 0.05,
    }
    redis = {"redis": {"url": "${REDIS_URL}", "prefix": prefix, "lease_s": lease_s}}
    return write_config(
        folder,
        **(redis if prefix is not None else {}),
        personas={"dirs": [str(personas)]},
        llm=llm_config("openai", model, max_retries=0, first_token_timeout_s=120),
        tools={
            "payment": {
                "prices": {"ASSESSMENT": {"GENERAL": 100}},
                "provider_url": "https://pay.example/{order_id}",
            }
        },
        # create_payment asks for approval first (bot/approvals/): here it is about the call
        approvals={"exempt": ["create_payment"]},
        channels={"telegram": telegram, "websocket": {"enabled": False}},
        server={"public_url": "https://bot.example.com"},
        log={"level": "DEBUG"},
    )


async def deliver(session: aiohttp.ClientSession, gateway: Gateway, update: Any) -> int:
    """Post the update to the process's webhook; again while it answers 503 (its Telegram
    channel still starting), as Telegram does."""
    url = f"{gateway.url}/telegram/webhook"
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    async with asyncio.timeout(WAIT_S):
        while True:
            async with session.post(url, json=update, headers=headers) as response:
                if response.status != 503:
                    return response.status
            await asyncio.sleep(0.1)


async def until(done: Callable[[], bool], timeout: float = WAIT_S) -> None:
    """Until `done()`: for what only a process's log shows (poll; no event carries it)."""
    async with asyncio.timeout(timeout):
        while not done():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


def our_logs(*processes: Gateway) -> str:
    """Our lines of each process's log (DEBUG of other libraries left out), for a failure."""
    ours = [(n, line) for n, g in enumerate(processes) for line in g.log]
    return "".join(f"[{n}] {line}" for n, line in ours if " DEBUG " not in line or "bot." in line)


@asynccontextmanager
async def fake_servers() -> AsyncIterator[tuple[FakeBotAPI, FakeOpenAI]]:
    fake = FakeBotAPI(interval_s=0.05)
    await fake.start()
    try:
        async with FakeOpenAI() as model:
            yield fake, model
    finally:
        await fake.close()
