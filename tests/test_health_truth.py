"""Health that tells the truth: a channel is running when its platform answered, `/healthz`
fails while storage writes fail, and `/livez` answers whatever the dependencies do.

The real aiogram client against the fake Bot API, a real SQLite file locked by another
connection, through the whole app and its HTTP server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from unittest.mock import ANY

import aiohttp
import pytest

from agent.providers.scripted import ScriptedProvider
from bot.ops.health import ChannelStates
from bot.runtime.app import App
from tests.conftest import Running, make_config
from tests.telegram_fake import FakeBotAPI
from tests.test_storage_faults import locked_by_another_process


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    api = FakeBotAPI()
    await api.start()
    yield api
    await api.close()


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, object]]:
    async with session.get(url) as response:
        return response.status, await response.json()


async def _healthz_until(
    session: aiohttp.ClientSession, url: str, status: int
) -> tuple[int, dict[str, object]]:
    """Ask until /healthz says `status`: every answer is immediate, the probe it reports on
    runs on its own (a write waits out the lock's 5 s before it fails)."""
    for _ in range(150):  # a hang guard of some 30 s
        answer = await _get(session, f"{url}/healthz")
        if answer[0] == status:
            return answer
        await asyncio.sleep(0.2)
    raise AssertionError(f"/healthz never answered {status}: {answer}")


async def test_telegram_is_not_ready_until_getme_answers(
    tmp_path: Path, fake: FakeBotAPI, session: aiohttp.ClientSession
) -> None:
    fake.html_error_next["getme"] = 10**6  # a proxy in front of an unreachable Bot API
    telegram = {"enabled": True, "token": fake.token, "api_base": fake.url}
    config = make_config(tmp_path, channels={"telegram": telegram})
    app = App(config, base_dir=tmp_path, provider=ScriptedProvider([]))
    app.channel_states.settle_s = 0.0  # "it ran long enough" is no proof: make it instant
    async with app:
        await fake.wait_for(lambda: [c.method for c in fake.calls].count("getme") >= 2)
        status, ready = await _get(session, f"{app.url}/readyz")
        assert status == 503
        down = ready["down"]
        assert isinstance(down, dict) and "getMe" in down["channel:telegram"]["reason"]
        status, health = await _get(session, f"{app.url}/healthz")
        channels = health["channels"]
        assert isinstance(channels, dict) and channels["telegram"]["state"] == "failed"
        assert status == 503 and channels["websocket"]["state"] == "running"
        assert (await _get(session, f"{app.url}/livez"))[0] == 200

        fake.html_error_next["getme"] = 0  # Telegram answers again
        # the first call after getMe comes once its answer was read
        await fake.wait_for(lambda: any(c.method == "getupdates" for c in fake.calls), 60)
        assert (await _get(session, f"{app.url}/readyz"))[0] == 200
        assert app.channel_states.report()["telegram"]["state"] == "running"


async def test_healthz_fails_while_another_process_holds_the_write_lock(
    running: Running, session: aiohttp.ClientSession
) -> None:
    app = await running()
    assert (await _get(session, f"{app.url}/healthz"))[0] == 200
    with locked_by_another_process(Path(app.config.storage.path), None):
        # a held lock makes writes wait (5 s) before they fail: /healthz answers at once all
        # along, with the newest probe's result; it turns 503 once a write has failed
        status, body = await _healthz_until(session, app.url, 503)
        assert status == 503 and "database is locked" in str(body["storage"])
        assert (await _get(session, f"{app.url}/livez"))[0] == 200
    status, body = await _healthz_until(session, app.url, 200)  # the next probe writes again
    assert "storage" not in body


def test_a_channel_that_can_tell_runs_when_its_platform_answered() -> None:
    now, answered = [0.0], ["getMe failed (TelegramNetworkError)"]
    states = ChannelStates(settle_s=5.0, clock=lambda: now[0])
    states.started("tg", lambda: answered[0] or None)
    assert states.report()["tg"]["state"] == "starting"
    assert states.down("tg") == ("starting: getMe failed (TelegramNetworkError)", ANY)
    now[0] = 100.0  # it has "run" long enough; its platform has never answered
    assert states.report()["tg"]["state"] == "failed" and states.any_failed
    answered[0] = ""
    assert states.report()["tg"] == {"state": "running", "since": ANY}
    assert states.down("tg") is None
    states.failed("tg", "crashed")
    states.started("tg", lambda: "getMe not answered yet")  # the retry: failed until answered
    assert states.report()["tg"]["state"] == "failed"


async def test_channels_are_ready_once_their_platform_answered_not_after_a_while(
    tmp_path: Path, fake: FakeBotAPI, session: aiohttp.ClientSession
) -> None:
    telegram = {"enabled": True, "token": fake.token, "api_base": fake.url}
    config = make_config(tmp_path, channels={"telegram": telegram})
    app = App(config, base_dir=tmp_path, provider=ScriptedProvider([]))
    app.channel_states.settle_s = 3600.0  # "it ran long enough" would never come
    async with app:
        await fake.wait_for(lambda: any(c.method == "getme" for c in fake.calls))
        for _ in range(300):  # a hang guard of some 30 s
            status, body = await _get(session, f"{app.url}/readyz")
            if status == 200:
                break
            await asyncio.sleep(0.1)
        assert (status, body) == (200, {"status": "ready"})
        states = app.channel_states.report()
        assert states["telegram"]["state"] == states["websocket"]["state"] == "running"
