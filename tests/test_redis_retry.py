"""In Redis mode, a retry the gateway invited is answered, once.

A turn that could post no placeholder (the platform refused it) gives the message back: it
releases the claim "so a platform's retry is answered". The Redis queue also remembers each
event it queued for 10 minutes (`q:once:<event>`, so that an enqueue whose reply was lost is
not queued twice); that memory dropped the retry silently, with no answer and no error. Real
app, real Redis, the real aiogram client against a local Bot API, the update posted to the
webhook again as a platform's redelivery would bring it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from tests.conftest import make_config
from tests.redis_kit import URL, prefix
from tests.telegram_fake import TOKEN, FakeBotAPI

__all__ = ["prefix"]

SECRET = "s3cret-webhook"
NO_RIGHTS = (400, "Bad Request: not enough rights to send text messages to the chat")


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    async with FakeBotAPI(interval_s=0.05) as api:
        yield api


async def _deliver(session: aiohttp.ClientSession, app: App, update: dict[str, object]) -> None:
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    async with session.post(f"{app.url}/telegram/webhook", json=update, headers=headers) as r:
        assert r.status == 200
    await app.gateway.wait_idle()


async def test_the_redelivery_of_a_message_no_placeholder_could_be_posted_for_is_answered_once(
    prefix: str, tmp_path: Path, fake: FakeBotAPI, session: aiohttp.ClientSession
) -> None:  # `prefix` first: its keys are deleted after the app stopped
    channel = {"enabled": True, "token": TOKEN, "api_base": fake.url, "mode": "webhook"}
    config = make_config(
        tmp_path,
        redis={"url": URL, "prefix": prefix},
        server={"public_url": "https://bot.example.com"},
        channels={"telegram": channel | {"webhook_secret": SECRET}},
    )
    provider = ScriptedProvider([Reply("answered"), Reply("never asked")])
    async with App(config, base_dir=tmp_path, provider=provider) as app:
        await _redeliver(app, fake, session, provider)


async def _redeliver(
    app: App, fake: FakeBotAPI, session: aiohttp.ClientSession, provider: ScriptedProvider
) -> None:
    await fake.wait_for(lambda: any(c.method == "setwebhook" for c in fake.calls))
    update = fake.message(42, "hello")
    fake.refuse["sendmessage"] = NO_RIGHTS  # the placeholder cannot be posted
    await _deliver(session, app, update)
    assert [c.error for c in fake.to_chat(42, "sendMessage")] == [NO_RIGHTS[1]]
    assert provider.requests == []

    del fake.refuse["sendmessage"]  # the bot may write there again
    await _deliver(session, app, update)  # the platform delivers the update again
    await _deliver(session, app, update)  # and again: this one is a double, dropped
    posted = fake.ok(42, "sendMessage")
    assert len(posted) == 1 and len(provider.requests) == 1
    shown = fake.messages[(42, posted[0].message_id or 0)]
    assert shown == "answered"
