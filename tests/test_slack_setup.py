"""Setting Slack up and keeping it safe: signed HTTP events, bad config, a revoked token.

The real slack-bolt app and slack_sdk client against the fake Slack, through the whole gateway.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.config import ConfigError
from tests.conftest import make_config
from tests.slack_app import Start, answered, failed, fake, post, slack, stopped
from tests.slack_events import (
    SECRET,
    envelope,
    form_body,
    json_body,
    message,
    signed_headers,
    slash_command,
)
from tests.slack_fake import APP_TOKEN, BOT_TOKEN, FakeSlack

__all__ = ["fake", "slack", "stopped"]  # fixtures


async def test_http_events_are_verified_before_any_listener_runs(
    slack: Start, fake: FakeSlack
) -> None:
    hold = asyncio.Event()  # the turn's answer waits for it
    provider = ScriptedProvider([Reply("Signed and answered.", wait=hold)])
    app = await slack(provider, mode="http", signing_secret=SECRET, app_token="")
    body, kind = json_body(envelope(message("hi", channel="D1")))
    forged = signed_headers(body, secret="not-the-secret")
    replayed = signed_headers(body, at=time.time() - 301)  # a capture from six minutes ago
    for headers in ({}, forged, replayed):
        status, _ = await post(app, body, kind, headers)
        assert status == 401
    challenge, _ = json_body({"type": "url_verification", "challenge": "c-123", "token": "t"})
    assert await post(app, challenge, kind, signed_headers(challenge)) == (
        200,
        '{"challenge": "c-123"}',
    )
    assert not provider.requests and not fake.bot_messages()
    async with asyncio.timeout(30):  # a hang guard: an ack that waited for the turn never came
        status, _ = await post(app, body, kind, signed_headers(body))
    assert status == 200  # acknowledged while the turn waits: before it, not after
    retry = signed_headers(body) | {
        "X-Slack-Retry-Num": "1",
        "X-Slack-Retry-Reason": "http_timeout",
    }
    assert (await post(app, body, kind, retry))[0] == 200
    hold.set()
    await answered(app, provider)
    assert [m.text for m in fake.bot_messages()] == ["Signed and answered."]
    # Slash commands and button presses come the same way, signed.
    command, form = form_body(slash_command("/assistant", "help", channel="D1"))
    assert (await post(app, command, form, signed_headers(command)))[0] == 200
    await fake.wait_for(lambda: len(fake.bot_messages()) == 2)
    assert (await post(app, command, form, {}))[0] == 401


def test_http_mode_without_a_signing_secret_is_refused_at_start(tmp_path: Path) -> None:
    section = {"enabled": True, "mode": "http", "bot_token": BOT_TOKEN}
    with pytest.raises(ConfigError, match=r"channels\.slack\.signing_secret: .*required in http"):
        make_config(tmp_path, channels={"slack": section})


@pytest.mark.parametrize(
    ("section", "key", "says"),
    [
        ({"bot_token": "xoxp-user-token", "app_token": APP_TOKEN}, "bot_token", "xoxb-"),
        ({"bot_token": "", "app_token": APP_TOKEN}, "bot_token", "empty"),
        ({"bot_token": BOT_TOKEN, "app_token": "xoxb-wrong"}, "app_token", "xapp-"),
        ({"bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "mode": "rtm"}, "mode", "socket"),
    ],
)
def test_a_bad_slack_setting_names_its_key(
    tmp_path: Path, section: dict[str, str], key: str, says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        make_config(tmp_path, channels={"slack": {"enabled": True} | section})
    message = str(caught.value)
    assert f"channels.slack.{key}: " in message and says in message and "\n" not in message
    assert "xoxp-user-token" not in message  # a secret never echoes


async def test_a_revoked_token_stops_the_channel_not_the_process(
    slack: Start, fake: FakeSlack, caplog: pytest.LogCaptureFixture, stopped: asyncio.Event
) -> None:
    provider = ScriptedProvider([Reply("Before."), Reply("never")])
    app = await slack(provider)
    await fake.push("events_api", envelope(message("hi", channel="D1")))
    await answered(app, provider)
    fake.revoke()
    await fake.push("events_api", envelope({"type": "tokens_revoked", "tokens": {"bot": ["UBOT"]}}))
    await fake.wait_for(lambda: fake.connected == 0)
    await failed(app, stopped)
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{app.url}/healthz") as response:
            health = await response.json()
    assert response.status == 503 and health["channels"]["slack"]["state"] == "failed"
    assert health["slack"]["connected"] is False and health["slack"]["posts"] == 1
    assert "revoked" in health["channels"]["slack"]["reason"]
    lines = [r for r in caplog.records if "channel slack stopped" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelname == "ERROR"
    assert app.channels["websocket"] is not None and app._supervisor is not None
    assert not app._supervisor.done()  # the gateway and its other channels go on


async def test_a_token_refused_at_start_is_one_line_and_no_retries(
    slack: Start, fake: FakeSlack, caplog: pytest.LogCaptureFixture, stopped: asyncio.Event
) -> None:
    fake.revoke()
    app = await slack(ScriptedProvider([]), mode="http", signing_secret=SECRET)
    await failed(app, stopped)
    await asyncio.sleep(1.5)  # the supervisor would have restarted a failed channel by now
    assert len(fake.called("auth.test")) == 1
    assert app.channel_states.report()["slack"]["state"] == "failed"
    lines = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(lines) == 1 and "token_revoked" in lines[0] and BOT_TOKEN not in lines[0]
    # An event now would be acknowledged and lost: Slack is told to deliver it again.
    body, kind = json_body(envelope(message("hi", channel="D1")))
    assert (await post(app, body, kind, signed_headers(body)))[0] == 503


async def test_a_token_refused_mid_answer_stops_the_channel(
    slack: Start, fake: FakeSlack, caplog: pytest.LogCaptureFixture, stopped: asyncio.Event
) -> None:
    provider = ScriptedProvider([Reply("never shown")])
    app = await slack(provider)
    fake.revoke()
    await fake.push("events_api", envelope(message("hi", channel="D1")))
    await fake.wait_for(lambda: fake.connected == 0)
    await failed(app, stopped)
    lines = [r.getMessage() for r in caplog.records if "channel slack stopped" in r.getMessage()]
    assert len(lines) == 1 and "token_revoked" in lines[0]
    assert not fake.bot_messages() and not provider.requests


async def test_slack_unreachable_at_start_is_retried_without_a_traceback(
    slack: Start, caplog: pytest.LogCaptureFixture, stopped: asyncio.Event
) -> None:
    app = await slack(
        ScriptedProvider([]), mode="http", signing_secret=SECRET, api_base="http://127.0.0.1:9/api/"
    )
    await failed(app, stopped)
    [line] = [r for r in caplog.records if "channel slack stopped" in r.getMessage()]
    assert (
        "Slack unreachable for auth.test" in line.getMessage()
        and "retrying in" in line.getMessage()
    )
    assert line.exc_info is None
