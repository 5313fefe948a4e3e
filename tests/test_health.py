"""`/healthz` names each channel's state and answers 503 while an enabled channel cannot run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import aiohttp
import pytest

from agent.providers.scripted import ScriptedProvider
from bot.ops.health import ChannelStates
from bot.runtime.app import App
from tests.conftest import make_config
from tests.telegram_fake import FakeBotAPI


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    api = FakeBotAPI()
    await api.start()
    yield api
    await api.close()


async def test_healthz_reports_a_channel_that_cannot_start(
    tmp_path: Path, fake: FakeBotAPI, session: aiohttp.ClientSession
) -> None:
    telegram = {"enabled": True, "token": "999:REVOKED", "api_base": fake.url}
    config = make_config(tmp_path, channels={"telegram": telegram})
    async with App(config, base_dir=tmp_path, provider=ScriptedProvider([])) as app:
        # the second getMe comes after the first one's failure was recorded (and a backoff)
        await fake.wait_for(lambda: [c.method for c in fake.calls].count("getme") >= 2)
        async with session.get(f"{app.url}/healthz") as response:
            assert response.status == 503
            body = await response.json()
    assert body["status"] == "failing"
    failed = body["channels"]["telegram"]
    assert failed["state"] == "failed" and "401 Unauthorized" in failed["reason"]
    assert datetime.fromisoformat(failed["since"]) <= datetime.now().astimezone()
    assert body["channels"]["websocket"]["state"] in ("starting", "running")
    assert all(c.status == 401 for c in fake.calls)


def test_a_channel_is_failed_until_a_run_has_lasted() -> None:
    now = [0.0]
    states = ChannelStates(settle_s=5.0, clock=lambda: now[0])
    states.started("chat")
    assert states.report()["chat"]["state"] == "starting" and not states.any_failed
    states.failed("chat", "refused: http://user:pw@host/x")
    first = states.report()["chat"]
    assert first["state"] == "failed" and first["reason"] == "refused: http://***@host/x"
    now[0] = 10.0
    states.started("chat")  # the retry: failed, since the first failure, until it lasts
    assert states.report()["chat"] == first and states.any_failed
    now[0] = 15.0
    assert states.report()["chat"]["state"] == "running" and not states.any_failed
    states.failed("chat", "crashed")  # after running fine: a new failure
    assert states.report()["chat"]["reason"] == "crashed"
    states.started("chat")
    states.stopped("chat")
    assert states.report()["chat"]["state"] == "stopped"


def test_a_first_run_counts_once_connected_and_a_crash_looping_one_never_does() -> None:
    now, down = [0.0], ["Socket Mode not answered yet"]
    states = ChannelStates(settle_s=5.0, clock=lambda: now[0])
    states.started("slack", lambda: down[0] or None)
    assert states.report()["slack"]["state"] == "starting"
    now[0], down[0] = 0.3, ""  # connected: running at once, no waiting for the settle time
    assert states.report()["slack"]["state"] == "running" and states.down("slack") is None
    assert not states.any_starting
    for _ in range(10):  # it connects each time, and crashes a second later
        now[0] += 1.0
        states.failed("slack", "crashed: KeyError: 'ts'")
        assert states.report()["slack"]["state"] == "failed"
        now[0] += 2.0  # the backoff
        states.started("slack", lambda: down[0] or None)  # up again at once
        report = states.report()["slack"]
        assert report["state"] == "failed" and "KeyError" in report["reason"]
        assert states.down("slack") is not None and states.any_failed
    now[0] += 5.5  # this retry has lasted: the channel runs again
    assert states.report()["slack"]["state"] == "running" and not states.any_failed
