"""Slack's agent messaging experience (`agent_view: true`): a DM thread per message, agent
sessions, and their stop button, end to end on the fake Slack with the real bolt app.
"""

from __future__ import annotations

import asyncio

from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.turn import STOPPED
from tests.slack_app import Start, answered, fake, slack, user_texts
from tests.slack_events import envelope, message, new_ts, slash_command
from tests.slack_fake import FakeSlack

__all__ = ["fake", "slack"]  # fixtures


async def test_each_top_level_dm_is_a_conversation_answered_in_its_thread(
    slack: Start, fake: FakeSlack
) -> None:
    provider = ScriptedProvider([Reply("One."), Reply("Two."), Reply("One, again.")])
    app = await slack(provider, agent_view=True)
    first, second = message("first topic", channel="D1"), message("second topic", channel="D1")
    await fake.push("events_api", envelope(first))
    await answered(app, provider)
    await fake.push("events_api", envelope(second))
    await answered(app, provider, 2)
    reply = message("more on the first", channel="D1", thread_ts=first["ts"])
    await fake.push("events_api", envelope(reply))
    await answered(app, provider, 3)
    assert fake.thread("D1", first["ts"]) == ["One.", "One, again."]
    assert fake.thread("D1", second["ts"]) == ["Two."]
    assert user_texts(provider, 1) == ["second topic"]  # a new conversation, its own history
    assert user_texts(provider, 2) == ["first topic", "more on the first"]
    assert fake.bot_messages("D1")[0].streamed  # in a thread: a stream (while one is free)
    # each thread an agent session: processing while the bot works, active after
    sessions = [
        (c.params["thread_ts"], c.params["status"]) for c in fake.ok("agents.sessions.setStatus")
    ]
    assert sessions[:2] == [(first["ts"], "processing"), (first["ts"], "active")]
    assert (second["ts"], "active") in sessions
    assert not fake.called("assistant.threads.setStatus")  # the same place: one writer


async def test_the_sessions_stop_button_stops_the_turn_in_its_thread(
    slack: Start, fake: FakeSlack
) -> None:
    long = " ".join(f"word{i}" for i in range(200))
    provider = ScriptedProvider([Reply(long, chunks=100, delay_s=0.05)])
    app = await slack(provider, agent_view=True)
    said = message("tell me everything", channel="D1")
    await fake.push("events_api", envelope(said))
    await fake.wait_for(lambda: bool(fake.ok("chat.appendStream")))
    # Slack ends the thread's streams, then tells the app who pressed stop where
    stopped = fake.stop_streams("D1", said["ts"])
    event = {
        "type": "agent_session_stopped",
        "channel": "D1",
        "user": "U1",
        "thread_ts": said["ts"],
        "streaming_message_ts": stopped,
        "event_ts": new_ts(),
    }
    await fake.push("events_api", envelope(event))
    await fake.wait_for(lambda: any(STOPPED in t for t in fake.thread("D1", said["ts"])))
    await app.gateway.wait_idle()
    [shown] = fake.thread("D1", said["ts"])  # one message: the answer so far, then the mark
    assert shown.startswith("word0 word1") and shown.endswith(STOPPED) and long not in shown
    # Slack ended the stream itself: the stopped final is an update, no Tier 2 stop spent on it
    assert not fake.called("chat.stopStream")
    assert fake.ok("agents.sessions.setStatus")[-1].params["status"] == "active"


async def test_without_agent_sessions_the_assistant_status_line_is_shown(
    slack: Start, fake: FakeSlack
) -> None:
    provider = ScriptedProvider([Reply("Done.", delay_s=0.3)])
    app = await slack(provider, agent_view=True)
    fake.fail_next["agents.sessions.setStatus"] = ["not_allowed_token_type"]  # not an agent
    said = message("hello", channel="D1")
    await fake.push("events_api", envelope(said))
    await answered(app, provider)
    assert fake.thread("D1", said["ts"]) == ["Done."]
    assert len(fake.called("agents.sessions.setStatus")) == 1  # not asked again in the thread
    statuses = [c.params["status"] for c in fake.ok("assistant.threads.setStatus")]
    assert statuses[0] == "is thinking…" and statuses[-1] == ""


async def test_a_slash_command_in_a_dm_targets_the_users_latest_thread(
    slack: Start, fake: FakeSlack
) -> None:
    release = asyncio.Event()
    provider = ScriptedProvider([Reply("Slow answer.", wait=release), Reply("Next.")])
    app = await slack(provider, agent_view=True)
    said = message("a long question", channel="D1")
    await fake.push("events_api", envelope(said))
    await provider.wait_requests(1)
    await fake.push("slash_commands", slash_command("/assistant", "stop", channel="D1"))
    await fake.wait_for(lambda: any(STOPPED in t for t in fake.thread("D1", said["ts"])))
    release.set()
    await app.gateway.wait_idle()
    assert [STOPPED in t for t in fake.thread("D1", said["ts"])] == [True]
