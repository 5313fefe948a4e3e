"""The Slack channel end to end: the real slack-bolt app and slack_sdk client against a fake Slack.

Socket Mode through the fake's web socket; HTTP events signed as Slack signs them. What is
asserted is what the fake Slack received and holds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.base import Action
from agent.providers.scripted import Reply, ScriptedProvider
from bot.app import App
from bot.config import ConfigError
from tests.conftest import make_config
from tests.slack_events import (
    BOT_USER,
    SECRET,
    button_press,
    envelope,
    form_body,
    json_body,
    message,
    signed_headers,
    slash_command,
)
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
    logging.getLogger("bot.app").addHandler(handler)
    yield handler.event
    logging.getLogger("bot.app").removeHandler(handler)


async def failed(app: App, stopped: asyncio.Event) -> None:
    async with asyncio.timeout(5):
        await stopped.wait()
    assert app.channel_states.report()["slack"]["state"] == "failed"


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


def user_texts(provider: ScriptedProvider, turn: int) -> list[str]:
    return [str(m.content) for m in provider.requests[turn].messages if m.role == "user"]


async def test_a_channel_mention_is_answered_in_a_thread_once_whatever_slack_sends(
    slack: Start, fake: FakeSlack
) -> None:
    provider = ScriptedProvider([Reply("Sure."), Reply("Still here.")])
    app = await slack(provider)
    said = message(f"<@{BOT_USER}> can you help?", channel="C1")
    mention = said | {"type": "app_mention"}
    del mention["channel_type"]
    # Slack sends a mention twice (message and app_mention), and retries each when unsure.
    await fake.push("events_api", envelope(said))
    await fake.push("events_api", envelope(mention))
    await fake.push("events_api", envelope(said, event_id="EvRetried"), retry=1)
    await answered(app, provider)
    assert fake.thread("C1", said["ts"]) == ["Sure."]
    assert len(fake.ok("chat.postMessage")) == 1
    assert user_texts(provider, 0) == ["can you help?"]  # the mention is not part of the question
    # A reply in that thread continues the conversation without another mention.
    follow = message("and one more thing", channel="C1", thread_ts=said["ts"])
    await fake.push("events_api", envelope(follow))
    await answered(app, provider, 2)
    assert fake.thread("C1", said["ts"]) == ["Sure.", "Still here."]
    assert user_texts(provider, 1) == ["can you help?", "and one more thing"]


async def test_what_is_not_a_new_user_message_for_us_is_not_answered(
    slack: Start, fake: FakeSlack
) -> None:
    provider = ScriptedProvider([Reply("The only answer.")])
    app = await slack(provider)
    ignored = [
        message("chatter in a channel"),  # not for us
        message("in someone else's thread", thread_ts="1699999999.000001"),
        message("a bot", channel="D1", bot_id="B2", subtype="bot_message"),
        message("ourselves", channel="D1", user=BOT_USER, bot_id="BBOT"),
        message("", channel="D1", subtype="message_changed", message={"text": "edited"}),
        message("", channel="D1", subtype="message_deleted", deleted_ts="1.2"),
        message("joined", channel="C1", subtype="channel_join"),
    ]
    for event in ignored:
        await fake.push("events_api", envelope(event))
    await fake.push("events_api", envelope(message("the real one", channel="D1")))
    await answered(app, provider)
    assert [m.text for m in fake.bot_messages()] == ["The only answer."]
    assert len(provider.requests) == 1 and user_texts(provider, 0) == ["the real one"]


async def test_commands_as_dm_words_and_as_slash_commands(slack: Start, fake: FakeSlack) -> None:
    provider = ScriptedProvider([Reply("An answer.")])
    app = await slack(provider)
    await fake.push("events_api", envelope(message("help", channel="D1")))
    await fake.wait_for(lambda: len(fake.bot_messages("D1")) == 1)
    assert "/new" in fake.bot_messages("D1")[0].text
    ack = await fake.push("slash_commands", slash_command("/assistant", "new", channel="D1"))
    assert "envelope_id" in ack
    await fake.wait_for(lambda: len(fake.bot_messages("D1")) == 2)
    assert "new conversation" in fake.bot_messages("D1")[1].text
    # In a channel the answer to a command is for its user alone.
    await fake.push("slash_commands", slash_command("/assistant", "stop", channel="C1"))
    await fake.wait_for(lambda: bool(fake.ok("chat.postEphemeral")))
    [ephemeral] = fake.ok("chat.postEphemeral")
    assert ephemeral.params["user"] == "U1" and ephemeral.params["text"] == "Nothing to stop."
    assert not provider.requests
    assert app.gateway


async def test_a_button_press_arrives_as_an_action_on_its_conversation(
    slack: Start, fake: FakeSlack
) -> None:
    provider = ScriptedProvider([Reply("Pick one."), Reply("You chose yes.")])
    app = await slack(provider)
    said = message(f"<@{BOT_USER}> should I?", channel="C1")
    await fake.push("events_api", envelope(said))
    await answered(app, provider)
    [reply] = fake.bot_messages("C1")
    press = button_press(
        "confirm_yes",
        value="yes",
        label="Yes",
        channel="C1",
        message_ts=reply.ts,
        thread_ts=said["ts"],
    )
    ack = await fake.push("interactive", press)
    assert "envelope_id" in ack
    await answered(app, provider, 2)
    assert user_texts(provider, 1)[-1] == Action("confirm_yes", "yes", "Yes", reply.ts).describe()
    assert fake.thread("C1", said["ts"]) == ["Pick one.", "You chose yes."]


async def post(app: App, body: str, content_type: str, headers: dict[str, str]) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{app.url}/slack/events",
            data=body.encode(),
            headers={"Content-Type": content_type} | headers,
        ) as response:
            return response.status, await response.text()


async def test_http_events_are_verified_before_any_listener_runs(
    slack: Start, fake: FakeSlack
) -> None:
    provider = ScriptedProvider([Reply("Signed and answered.")])
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
    started = time.monotonic()
    status, _ = await post(app, body, kind, signed_headers(body))
    assert status == 200 and time.monotonic() - started < 1  # acknowledged before the turn
    retry = signed_headers(body) | {
        "X-Slack-Retry-Num": "1",
        "X-Slack-Retry-Reason": "http_timeout",
    }
    assert (await post(app, body, kind, retry))[0] == 200
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


async def test_an_assistant_thread_shows_the_status_while_the_bot_works(
    slack: Start, fake: FakeSlack
) -> None:
    provider = ScriptedProvider(
        [Reply(calls=[("get_current_datetime", {})]), Reply("It is late.", delay_s=0.5)]
    )
    app = await slack(provider)
    thread_ts = "1700000001.000001"
    thread = {"user_id": "U1", "channel_id": "D1", "thread_ts": thread_ts, "context": {}}
    started = {"type": "assistant_thread_started", "assistant_thread": thread, "event_ts": "1.1"}
    await fake.push("events_api", envelope(started))
    await fake.wait_for(lambda: bool(fake.ok("assistant.threads.setSuggestedPrompts")))
    said = message("what time is it?", channel="D1", thread_ts=thread_ts)
    await fake.push("events_api", envelope(said))
    await answered(app, provider, 2)
    assert fake.thread("D1", thread_ts) == ["It is late."]
    statuses = [c.params["status"] for c in fake.ok("assistant.threads.setStatus")]
    assert statuses[0] == "is thinking…" and statuses[-1] == ""
    assert "is getting the current date and time…" in statuses
    assert all(c.params["thread_ts"] == thread_ts for c in fake.ok("assistant.threads.setStatus"))
