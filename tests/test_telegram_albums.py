"""An album sent to the bot is one message and one turn, however Telegram spreads its items over
polls or webhook requests, and a gateway stopped while it gathers leaves it to Telegram to send
again (the real aiogram client against the fake Bot API)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import Message
from bot.runtime.app import App
from content.parts import ImagePart
from tests.conftest import make_config
from tests.image_kit import photo
from tests.telegram_fake import TOKEN, FakeBotAPI

CHAT = 42
SECRET = "album-secret"


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    async with FakeBotAPI(interval_s=0) as api:
        yield api


def start(tmp_path: Path, fake: FakeBotAPI, provider: ScriptedProvider, **telegram: Any) -> App:
    channel = {"enabled": True, "token": TOKEN, "api_base": fake.url} | telegram
    config = make_config(
        tmp_path,
        channels={"telegram": channel},
        server={"public_url": "https://bot.example.com"},
    )
    return App(config, base_dir=tmp_path, provider=provider)


def album(
    fake: FakeBotAPI, n: int, caption: str | None = "which is sharpest?"
) -> list[dict[str, Any]]:
    """n photo updates of one album, the caption on the first, as Telegram sends them."""
    updates = []
    for i in range(n):
        data = photo(32 + i, 24)
        file_id = fake.add_file(data, f"photos/file_{i}.jpg")
        size = {"file_id": file_id, "file_unique_id": f"u{i}", "width": 32, "height": 24}
        extra: dict[str, Any] = {"photo": [size | {"file_size": len(data)}]}
        extra["media_group_id"] = "13000000000001"
        if i == 0 and caption:
            extra["caption"] = caption
        updates.append(fake.message(CHAT, None, **extra))
    return updates


def the_one_user_message(provider: ScriptedProvider) -> Message:
    assert len(provider.requests) == 1  # one turn for the album
    return [m for m in provider.requests[0].messages if m.role == "user"][-1]


async def test_an_album_spread_over_two_polls_is_one_turn(tmp_path: Path, fake: FakeBotAPI) -> None:
    provider = ScriptedProvider([Reply("The second.")])
    async with start(tmp_path, fake, provider) as app:
        first, *rest = album(fake, 3)
        fake.push(first)
        # the loop saw it and holds the offset at it while the album gathers
        await fake.wait_for(
            lambda: any(c.params.get("offset") == first["update_id"] for c in fake.calls)
        )
        for update in rest:
            fake.push(update)
        await provider.wait_requests(1)
        await app.gateway.wait_idle()
    user = the_one_user_message(provider)
    assert "which is sharpest?" in user.content
    assert len(user.parts) == 3 and all(isinstance(p, ImagePart) for p in user.parts)
    assert [c.text for c in fake.ok(CHAT, "sendMessage", "editMessageText")][-1] == "The second."
    # once taken, the album's updates are confirmed
    last = max(u["update_id"] for u in [first, *rest])
    assert any((c.params.get("offset") or 0) > last for c in fake.calls)


async def test_a_gateway_stopped_while_an_album_gathers_leaves_it_to_be_sent_again(
    tmp_path: Path, fake: FakeBotAPI
) -> None:
    updates = album(fake, 2)
    idle = ScriptedProvider([])
    async with start(tmp_path, fake, idle, album_wait_s=10):
        for update in updates:
            fake.push(update)
        await fake.wait_for(
            lambda: any(c.params.get("offset") == updates[0]["update_id"] for c in fake.calls)
        )
    assert not idle.requests  # stopped before the album was complete: nothing handed on
    provider = ScriptedProvider([Reply("Both are sharp.")])
    async with start(tmp_path, fake, provider, album_wait_s=0.2) as app:
        await provider.wait_requests(1)
        await app.gateway.wait_idle()
    assert len(the_one_user_message(provider).parts) == 2


async def test_an_albums_webhook_requests_are_answered_once_it_is_one_turn(
    tmp_path: Path, fake: FakeBotAPI
) -> None:
    provider = ScriptedProvider([Reply("Got all three.")])
    telegram = {"mode": "webhook", "webhook_secret": SECRET, "album_wait_s": 3}
    async with start(tmp_path, fake, provider, **telegram) as app:
        await fake.wait_for(lambda: any(c.method == "setwebhook" for c in fake.calls))
        url = f"{app.url}/telegram/webhook"
        headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        async with aiohttp.ClientSession() as session:

            async def post(update: dict[str, Any]) -> int:
                async with session.post(url, json=update, headers=headers) as response:
                    return response.status

            first, *rest = album(fake, 3)
            posted = asyncio.ensure_future(post(first))  # answered once the album is taken
            await asyncio.sleep(0.3)  # Telegram's requests for one album come apart in time
            statuses = [*await asyncio.gather(*(post(u) for u in rest)), await posted]
        assert statuses == [200, 200, 200]
        await provider.wait_requests(1)
        await app.gateway.wait_idle()
    user = the_one_user_message(provider)
    assert len(user.parts) == 3 and "which is sharpest?" in user.content
