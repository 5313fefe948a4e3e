"""The Slack channel end to end: the real slack-bolt app and slack_sdk client against a fake Slack.

Events arrive through the fake's Socket Mode web socket; what is asserted is what the fake Slack
received and holds.
"""

from __future__ import annotations

from adapters.base import Action
from agent.providers.scripted import Reply, ScriptedProvider
from tests.slack_app import Start, answered, fake, slack, user_texts
from tests.slack_events import BOT_USER, button_press, envelope, message, slash_command
from tests.slack_fake import FakeSlack

__all__ = ["fake", "slack"]  # fixtures


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
    assert len(fake.ok("chat.postMessage", "chat.startStream")) == 1  # a stream, by default
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
        # Texts as if Slack put them at the top: the subtype alone must keep these out.
        message("edited", channel="D1", subtype="message_changed", message={"text": "edited"}),
        message("gone", channel="D1", subtype="message_deleted", deleted_ts="1.2"),
        message(f"<@{BOT_USER}> joined", channel="C1", subtype="channel_join"),
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


async def test_a_refreshed_socket_mode_connection_keeps_answering(
    slack: Start, fake: FakeSlack
) -> None:
    provider = ScriptedProvider([Reply("First."), Reply("Second.")])
    app = await slack(provider)
    await fake.push("events_api", envelope(message("one", channel="D1")))
    await answered(app, provider)
    await fake.refresh()  # Slack asks every few hours; the SDK opens a new socket
    await fake.wait_for(lambda: fake.sockets_opened == 2)
    await fake.push("events_api", envelope(message("two", channel="D1")))
    await answered(app, provider, 2)
    assert [m.text for m in fake.bot_messages("D1")] == ["First.", "Second."]


async def test_a_dm_thread_that_refuses_a_status_is_not_asked_again(
    slack: Start, fake: FakeSlack
) -> None:
    provider = ScriptedProvider(
        [Reply(calls=[("get_current_datetime", {})]), Reply("It is late.", delay_s=0.5)]
    )
    app = await slack(provider)
    fake.fail_next["assistant.threads.setStatus"] = ["not_allowed"]  # a plain DM thread
    said = message("what time is it?", channel="D1", thread_ts="1700000002.000001")
    await fake.push("events_api", envelope(said))
    await answered(app, provider, 2)
    assert fake.thread("D1", "1700000002.000001") == ["It is late."]
    assert len(fake.called("assistant.threads.setStatus")) == 1


async def test_a_thread_the_bot_answered_is_continued_after_a_restart(
    slack: Start, fake: FakeSlack
) -> None:
    provider = ScriptedProvider([Reply("Sure.")])
    app = await slack(provider)
    said = message(f"<@{BOT_USER}> can you help?", channel="C1")
    await fake.push("events_api", envelope(said))
    await answered(app, provider)
    await app.stop()
    await fake.wait_for(lambda: fake.connected == 0)
    # A new process over the same database: it remembers no thread, but its store knows.
    later = ScriptedProvider([Reply("Still here.")])
    app = await slack(later)
    await fake.push("events_api", envelope(message("not for us", channel="C1", thread_ts="1.5")))
    follow = message("and one more thing", channel="C1", thread_ts=said["ts"])
    await fake.push("events_api", envelope(follow))
    await answered(app, later)
    assert fake.thread("C1", said["ts"]) == ["Sure.", "Still here."]
    assert len(later.requests) == 1
    assert user_texts(later, 0) == ["can you help?", "and one more thing"]


async def test_a_slash_command_after_a_restart_targets_the_users_latest_thread(
    slack: Start, fake: FakeSlack
) -> None:
    provider = ScriptedProvider([Reply("Sure.")])
    app = await slack(provider)
    said = message(f"<@{BOT_USER}> can you help?", channel="C1")
    await fake.push("events_api", envelope(said))
    await answered(app, provider)
    await app.stop()
    await fake.wait_for(lambda: fake.connected == 0)
    # A new process: the thread is the user's latest in C1 by the store, not by its memory.
    later = ScriptedProvider([Reply("Starting afresh.")])
    app = await slack(later)
    await fake.push("slash_commands", slash_command("/assistant", "new", channel="C1"))
    await fake.wait_for(lambda: bool(fake.ok("chat.postEphemeral")))
    [ephemeral] = fake.ok("chat.postEphemeral")
    assert ephemeral.params["thread_ts"] == said["ts"]
    assert "new conversation" in ephemeral.params["text"]
    follow = message("what was I asking?", channel="C1", thread_ts=said["ts"])
    await fake.push("events_api", envelope(follow))
    await answered(app, later)
    assert user_texts(later, 0) == ["what was I asking?"]  # the thread's session was closed
