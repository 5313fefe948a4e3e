"""Native Slack streams: an answer is one message, streamed, whatever the turn does on the way.

The real slack_sdk client (SlackChannel) against the fake Slack, which speaks the stream methods'
wire format and enforces their rules and rate tiers; `Delivery` drives the channel as a turn does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import ChatRef, OutboundContent
from adapters.slack import SlackChannel
from adapters.slack.throttle import StreamRates
from bot.pipeline.delivery import Delivery
from tests.slack_app import fake
from tests.slack_fake import BOT_TOKEN, MAX_TEXT_BYTES, FakeSlack
from tools.display import button, card
from tools.events import (
    AgentFinished,
    AgentStarted,
    AnswerDelta,
    AnswerReset,
    Final,
    Interim,
    ToolFinished,
    ToolStarted,
    TurnEvent,
)

THREAD = "1699999999.000100"
CHAT = ChatRef("slack", "C1", THREAD, team_id="T1")
USER = "U1"
__all__ = ["fake"]  # fixtures


@pytest.fixture
async def channel(fake: FakeSlack) -> AsyncIterator[SlackChannel]:
    made = SlackChannel(
        bot_token=BOT_TOKEN, api_base=fake.url, request_timeout_s=2, edit_interval_s=0.05
    )
    yield made
    await made.aclose()


async def play(channel: SlackChannel, events: list[TurnEvent], chat: ChatRef = CHAT) -> None:
    """A turn's events through a delivery, each after the previous preview had its chance."""
    delivery = Delivery(channel, chat, reply_to=chat.thread_id, recipient=USER)
    await delivery.start()
    for event in events:
        await delivery.on_event(event)
        await asyncio.sleep(0.08)


def streamed_text(fake: FakeSlack) -> str:
    [message] = fake.bot_messages()
    return "".join(c["text"] for c in message.chunks if c["type"] == "markdown_text")


async def test_a_turn_with_specialists_and_tools_is_one_streamed_message(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    answer = "Lisbon is sunny on Friday, **22 °C**.\n\nFlights from 89 EUR; the hotel has rooms."
    words = [answer[i : i + 7] for i in range(0, len(answer), 7)]
    events: list[TurnEvent] = [
        AgentStarted("t1", "research", "weather", "Researcher", "the weather in Lisbon"),
        AgentStarted("t2", "travel", "flights", "Travel agent", "flights to Lisbon"),
        ToolStarted("c1", "get_weather", "Checking the weather"),
        ToolStarted("c2", "search_flights", "Searching flights"),
        ToolFinished("c1", "get_weather", "Checking the weather"),
        AgentFinished("t1", "research", "weather", "completed", "Researcher", "the weather"),
        ToolFinished("c2", "search_flights", "Searching flights", ok=False),
        ToolStarted("c3", "book_hotel", "Looking for hotels"),
        ToolFinished("c3", "book_hotel", "Looking for hotels"),
        AgentFinished("t2", "travel", "flights", "completed", "Travel agent", "flights"),
        *[AnswerDelta(piece) for piece in words],
        Final(answer),
    ]
    await play(channel, events)
    [message] = fake.bot_messages()
    assert message.streamed and not message.streaming and message.thread_ts == THREAD
    assert message.text == answer == streamed_text(fake)
    assert len(fake.ok("chat.startStream")) == 1 and len(fake.ok("chat.stopStream")) == 1
    assert not fake.called("chat.postMessage", "chat.update")
    assert len(fake.ok("chat.appendStream")) >= 2  # the answer came in more than one piece
    [start] = fake.ok("chat.startStream")
    assert start.params["recipient_user_id"] == USER and start.params["recipient_team_id"] == "T1"
    statuses = {task_id: task["status"] for task_id, task in message.tasks.items()}
    assert statuses == {
        "t1": "complete",
        "t2": "complete",
        "c1": "complete",
        "c2": "error",
        "c3": "complete",
    }
    assert message.tasks["t2"]["title"] == "Travel agent — flights to Lisbon"
    # the steps went out while they ran, as tasks in progress, later marked
    seen = [c["status"] for c in message.chunks if c["type"] == "task_update"]
    assert "in_progress" in seen and seen.index("in_progress") < seen.index("complete")
    # no append starts with whitespace, and the stop was the last call
    texts = [c["text"] for c in message.chunks if c["type"] == "markdown_text"]
    assert all(not t[0].isspace() for t in texts)
    assert fake.calls[-1].method == "chat.stopStream"


async def test_a_restarted_answer_ends_the_stream_and_the_same_message_is_updated(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    events: list[TurnEvent] = [
        AnswerDelta("Let me look that up "),
        AnswerDelta("for you. "),
        AnswerReset(),  # that was the preamble to a tool call
        ToolStarted("c1", "get_current_datetime", "Checking the time"),
        ToolFinished("c1", "get_current_datetime", "Checking the time"),
        AnswerDelta("It is "),
        AnswerDelta("late."),
        Final("It is late."),
    ]
    await play(channel, events)
    [message] = fake.bot_messages()
    assert message.streamed and message.text == "It is late."
    assert "Let me look" in streamed_text(fake)  # it had reached the user's screen
    stop, update = fake.ok("chat.stopStream")[0], fake.ok("chat.update")[-1]
    assert fake.calls.index(stop) < fake.calls.index(update)
    assert update.params["blocks"] == [
        {"type": "section", "text": {"type": "mrkdwn", "text": "It is late."}}
    ]  # the stream's text and cards replaced, not kept beside the answer
    assert not fake.called("chat.postMessage") and not [c for c in fake.calls if c.error]


async def test_a_note_is_the_plans_title_never_text_that_has_to_go(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    events: list[TurnEvent] = [
        Interim("I am checking the flights, one moment."),
        ToolStarted("c1", "search_flights", "Searching flights"),
        ToolFinished("c1", "search_flights", "Searching flights"),
        AnswerDelta("Flights from 89 EUR. "),
        Final("Flights from 89 EUR. Shall I book one?"),
    ]
    await play(channel, events)
    [message] = fake.bot_messages()
    assert message.plan == "I am checking the flights, one moment."
    assert message.text == "Flights from 89 EUR. Shall I book one?"
    assert not fake.called("chat.update", "chat.postMessage")
    assert "Thinking" not in str(message.chunks)  # the placeholder is Slack's loading state


async def test_display_hints_are_the_stops_blocks_and_mentions_never_ping(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    hint = card("Order 42", {"Amount": "12 USD"}, buttons=[button("Pay", "pay_42", value="42")])
    answer = "Here it is, <!channel> and <@U2>: "
    await play(channel, [AnswerDelta(answer), Final(answer + "your order.", (hint,))])
    [message] = fake.bot_messages()
    assert "<!channel>" not in message.text and "<@U2>" not in message.text
    assert message.text.replace("\u2060", "") == answer + "your order."
    [stop] = fake.ok("chat.stopStream")
    assert [b["type"] for b in stop.params["blocks"]] == ["header", "section", "actions"]


async def test_a_stream_slack_ended_finishes_in_the_same_message_by_update(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    delivery = Delivery(channel, CHAT, reply_to=THREAD, recipient=USER)
    await delivery.start()
    await delivery.on_event(AnswerDelta("The first half, "))
    await fake.wait_for(lambda: bool(fake.ok("chat.appendStream")))
    assert fake.stop_streams("C1", THREAD)  # the user pressed stop, or five minutes went by
    await delivery.on_event(AnswerDelta("then the second half."))
    await delivery.on_event(Final("The first half, then the second half."))
    [message] = fake.bot_messages()
    assert message.text == "The first half, then the second half."
    assert fake.ok("chat.update") and not fake.called("chat.postMessage")


async def test_where_a_stream_cannot_serve_the_answer_is_posted_and_updated(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    # no thread in a DM; no recipient in a channel: neither can be a stream
    await play(channel, [Final("In the DM.")], ChatRef("slack", "D1", None, team_id="T1"))
    delivery = Delivery(channel, CHAT, reply_to=THREAD)  # no recipient
    await delivery.start()
    await delivery.on_event(Final("In the channel."))
    assert not fake.called("chat.startStream")
    assert sorted(m.text for m in fake.bot_messages()) == ["In the DM.", "In the channel."]


async def test_update_mode_posts_and_updates_as_before(fake: FakeSlack) -> None:
    channel = SlackChannel(
        bot_token=BOT_TOKEN, api_base=fake.url, edit_interval_s=0.05, streaming="update"
    )
    try:
        await play(channel, [AnswerDelta("Hello "), AnswerDelta("there."), Final("Hello there.")])
    finally:
        await channel.aclose()
    assert [m.text for m in fake.bot_messages()] == ["Hello there."]
    assert not fake.called("chat.startStream", "chat.appendStream", "chat.stopStream")
    assert len(fake.ok("chat.postMessage")) == 1 and fake.ok("chat.update")
    assert channel.health()["slack"]["streaming"] == "update"


async def test_a_hundred_answers_at_once_in_one_workspace_draw_no_ratelimited() -> None:
    """Slack's stream tiers as they are (Tier 2 starts and stops, Tier 4 appends); chat.update
    scaled up (600 a minute) so the answers that find no stream free end within the test."""
    fake = FakeSlack(updates_per_minute=600, update_burst=5, posts_per_second=1, post_burst=10)
    await fake.start()
    channel = SlackChannel(
        bot_token=BOT_TOKEN,
        api_base=fake.url,
        updates_per_minute=540,
        edit_interval_s=0.3,
        stream_rates=StreamRates(),
    )
    words = [f"word{i} " for i in range(30)]

    async def answer(number: int) -> None:
        chat = ChatRef("slack", f"C{number % 20}", f"1700000000.{number:06d}", team_id="T1")
        delivery = Delivery(channel, chat, reply_to=chat.thread_id, recipient=USER)
        await delivery.start()
        for word in words:
            await delivery.on_event(AnswerDelta(word))
            await asyncio.sleep(0.05)
        await delivery.on_event(Final("".join(words) + f"({number})"))

    try:
        async with asyncio.timeout(90):
            await asyncio.gather(*(answer(n) for n in range(100)))
    finally:
        await channel.aclose()
        await fake.close()
    assert not fake.ratelimited
    assert {m.text for m in fake.bot_messages()} == {"".join(words) + f"({n})" for n in range(100)}
    assert len(fake.bot_messages()) == 100  # one message an answer
    streamed = [m for m in fake.bot_messages() if m.streamed]
    assert streamed and not any(m.streaming for m in streamed)  # some streamed, all stopped


async def test_a_preview_without_live_parts_streams_its_text(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    handle = await channel.send(CHAT, OutboundContent("Thinking…"), recipient=USER)
    await channel.edit(handle, OutboundContent("Partial answer "))
    await channel.edit(handle, OutboundContent("Partial answer and the whole."), final=True)
    [message] = fake.bot_messages()
    assert message.text == "Partial answer and the whole." and not fake.called("chat.update")


async def test_an_answer_too_long_for_one_message_streams_then_continues_in_the_thread(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    answer = "\n\n".join(f"第{i}段：" + "漢字かな交じり文です。" * 40 for i in range(6))
    pieces = [answer[i : i + 400] for i in range(0, len(answer), 400)]
    await play(channel, [*[AnswerDelta(p) for p in pieces], Final(answer)])
    shown = [m.text for m in fake.bot_messages()]
    assert len(shown) >= 2 and "".join(shown).replace("\n", "") == answer.replace("\n", "")
    assert all(len(text.encode()) <= MAX_TEXT_BYTES for text in shown)
    assert len(fake.ok("chat.startStream")) == 1  # the parts after the first are posted
    assert not [c for c in fake.calls if c.error] and not any(
        m.streaming for m in fake.bot_messages()
    )


async def test_the_fake_holds_the_real_client_to_the_stream_rules(fake: FakeSlack) -> None:
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.url)
    client.retry_handlers.clear()

    async def refusal(call: Awaitable[Any]) -> str:
        with pytest.raises(SlackApiError) as caught:
            await call
        return str(caught.value.response["error"])

    no_thread = client.api_call("chat.startStream", json={"channel": "D1"})
    assert await refusal(no_thread) == "invalid_arguments"
    in_channel = client.chat_startStream(channel="C1", thread_ts=THREAD)
    assert await refusal(in_channel) == "missing_recipient_user_id"
    started = await client.chat_startStream(
        channel="C1", thread_ts=THREAD, recipient_user_id=USER, recipient_team_id="T1"
    )
    ts = str(started["ts"])
    too_long = client.chat_appendStream(channel="C1", ts=ts, markdown_text="x" * 12_001)
    assert await refusal(too_long) == "msg_too_long"
    bad_task = [{"type": "task_update", "id": "1", "title": "t", "status": "done"}]
    assert await refusal(client.chat_appendStream(channel="C1", ts=ts, chunks=bad_task)) == (
        "invalid_chunks"
    )
    await client.chat_appendStream(channel="C1", ts=ts, markdown_text="one ")
    await client.chat_appendStream(channel="C1", ts=ts, markdown_text="two")
    busy = client.chat_update(channel="C1", ts=ts, text="over it")
    assert await refusal(busy) == "streaming_state_conflict"
    await client.chat_stopStream(channel="C1", ts=ts)
    late = client.chat_appendStream(channel="C1", ts=ts, markdown_text=" three")
    assert await refusal(late) == "message_not_in_streaming_state"
    assert [m.text for m in fake.bot_messages()] == ["one two"]
    # Tier 2: a burst of starts, then 429 ratelimited with a Retry-After
    for _ in range(5):
        try:
            await client.chat_startStream(channel="D1", thread_ts=THREAD)
        except SlackApiError as exc:
            assert exc.response.status_code == 429 and exc.response["error"] == "ratelimited"
            assert int(exc.response.headers["Retry-After"]) >= 1
            break
    else:
        raise AssertionError("the fake never rate-limited chat.startStream")


async def test_a_refused_append_stops_the_stream_and_the_final_is_an_update(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    fake.fail_next["chat.appendStream"] = ["internal_error"]
    await play(channel, [AnswerDelta("First words "), AnswerDelta("and more. "), Final("Done.")])
    [message] = fake.bot_messages()
    assert message.text == "Done." and not message.streaming
    assert fake.ok("chat.stopStream") and fake.ok("chat.update")
    assert [c.error for c in fake.calls if c.error] == ["internal_error"]  # nothing else refused


async def test_a_stop_whose_answer_was_lost_still_ends_in_the_final(
    fake: FakeSlack, channel: SlackChannel
) -> None:
    fake.garble_next["chat.stopStream"] = 1  # carried out; a proxy's page instead of the answer
    await play(channel, [AnswerDelta("All of "), Final("All of it.")])
    [message] = fake.bot_messages()
    assert message.text == "All of it." and not message.streaming
    assert len(fake.bot_messages()) == 1 and not fake.called("chat.postMessage")
