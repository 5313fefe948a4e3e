"""Stopping the gateway mid-answer in Slack: the placeholder says so, and nothing is left open."""

from __future__ import annotations

from adapters.slack import SlackChannel
from adapters.slack.render import to_mrkdwn
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.turn import INTERRUPTED
from tests.slack_app import Start, fake, slack
from tests.slack_events import envelope, message
from tests.slack_fake import FakeSlack

__all__ = ["fake", "slack"]  # fixtures


async def test_a_stop_mid_answer_ends_the_placeholder_and_closes_the_connections(
    slack: Start, fake: FakeSlack
) -> None:
    provider = ScriptedProvider([Reply("A slow answer.", delay_s=30)])
    app = await slack(provider)
    channel = app.channels["slack"]
    assert isinstance(channel, SlackChannel)
    await fake.push("events_api", envelope(message("hi", channel="D1")))
    await fake.wait_for(lambda: len(fake.bot_messages("D1")) == 1)
    await provider.wait_requests(1)
    await app.stop()
    [reply] = fake.bot_messages("D1")
    assert reply.text == to_mrkdwn(INTERRUPTED)  # ended, not left "Thinking…"
    session = channel.client.session
    assert session is None or session.closed
