"""The Slack channel end to end: the real slack-bolt app and slack_sdk client against a fake Slack.

Socket Mode through the fake's web socket; HTTP events signed as Slack signs them. What is
asserted is what the fake Slack received and holds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from bot.app import App
from tests.conftest import make_config
from tests.slack_events import BOT_USER, envelope, message
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


async def answered(app: App, provider: ScriptedProvider, turns: int = 1) -> None:
    await provider.wait_requests(turns)
    await app.gateway.wait_idle()


async def test_a_dm_is_answered_in_one_message_filled_in(slack: Start, fake: FakeSlack) -> None:
    provider = ScriptedProvider([Reply("Hello **there**, friend.", chunks=3, delay_s=0.2)])
    app = await slack(provider)
    ack = await fake.push("events_api", envelope(message("hi", channel="D1")))
    assert "envelope_id" in ack
    await answered(app, provider)
    [reply] = fake.bot_messages("D1")
    assert reply.text == "Hello *there*, friend." and reply.thread_ts is None
    assert len(fake.ok("chat.postMessage")) == 1
    assert not fake.ratelimited
    assert BOT_USER
