"""The gateway with its Slack channel on a fake Slack, for the Slack tests: fixtures and helpers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agent.providers.scripted import ScriptedProvider
from bot.runtime.app import App
from tests.conftest import make_config
from tests.slack_fake import APP_TOKEN, BOT_TOKEN, FakeSlack

Start = Callable[..., Any]


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    slack = FakeSlack()
    await slack.start()
    yield slack
    await slack.close()


@pytest.fixture
async def slack(tmp_path: Path, fake: FakeSlack) -> AsyncIterator[Start]:
    """`app = await slack(provider, **channels.slack)`: the gateway with Slack on the fake."""
    apps: list[App] = []

    async def start(provider: ScriptedProvider, **settings: Any) -> App:
        section = {
            "enabled": True,
            "bot_token": BOT_TOKEN,
            "app_token": APP_TOKEN,
            "api_base": fake.url,
            "edit_interval_s": 0.1,
        } | settings
        config = make_config(tmp_path, channels={"slack": section})
        app = App(config, base_dir=tmp_path, provider=provider)
        await app.__aenter__()
        apps.append(app)
        if section.get("mode", "socket") == "socket":
            await fake.wait_for(lambda: fake.connected > 0)
        return app

    yield start
    for app in apps:
        await app.stop()


class _Stopped(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "channel slack stopped" in record.getMessage():
            self.event.set()


@pytest.fixture
def stopped() -> Iterator[asyncio.Event]:
    """Set when the app's supervisor logs that the Slack channel stopped."""
    handler = _Stopped()
    logging.getLogger("bot.runtime.app").addHandler(handler)
    yield handler.event
    logging.getLogger("bot.runtime.app").removeHandler(handler)


async def failed(app: App, stopped: asyncio.Event) -> None:
    async with asyncio.timeout(5):
        await stopped.wait()
    assert app.channel_states.report()["slack"]["state"] == "failed"


async def answered(app: App, provider: ScriptedProvider, turns: int = 1) -> None:
    await provider.wait_requests(turns)
    await app.gateway.wait_idle()


def user_texts(provider: ScriptedProvider, turn: int) -> list[str]:
    return [str(m.content) for m in provider.requests[turn].messages if m.role == "user"]


async def post(app: App, body: str, content_type: str, headers: dict[str, str]) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{app.url}/slack/events",
            data=body.encode(),
            headers={"Content-Type": content_type} | headers,
        ) as response:
            return response.status, await response.text()
