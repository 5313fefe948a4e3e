"""Answers that must reach the user when the placeholder's send or the final edit goes wrong.

No platform redelivers a message whose turn gave up (Telegram's polling and webhook never do),
so an unconfirmed placeholder is answered with one new message, and a final edit refused again
and again is posted as a new message, once; a new message of unknown fate is never resent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.base import ChannelLimits, ChatRef, DeliveryUncertain, InboundMessage
from adapters.telegram import TelegramChannel
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.delivery import FINAL_ATTEMPTS, PLACEHOLDER, Delivery
from bot.runtime.app import App
from tests.channel_harness import TelegramHarness
from tests.conftest import make_config
from tests.fakes import RecordingChannel
from tests.telegram_fake import TOKEN, FakeBotAPI

CHAT = ChatRef("fake", "c1")
LIMITS = ChannelLimits(max_text_length=1000, min_edit_interval_s=0.01)
ANSWER = "Here is your answer."


async def _app(tmp_path: Path, provider: ScriptedProvider, channel: object) -> App:
    app = App(
        make_config(tmp_path),
        base_dir=tmp_path,
        provider=provider,
        channels=[channel],  # type: ignore[list-item]
        web_server=False,
    )
    await app.__aenter__()
    return app


async def test_an_unconfirmed_placeholder_is_answered_with_one_new_message(
    tmp_path: Path,
) -> None:
    channel = RecordingChannel(LIMITS)
    channel.uncertain_sends_next = 1  # the placeholder lands, but its answer is lost
    provider = ScriptedProvider([Reply(ANSWER)])
    app = await _app(tmp_path, provider, channel)
    try:
        message = InboundMessage(CHAT, "u1", "hello?", "e1", "msg-1")
        await app.gateway.handle(message)
        await app.gateway.wait_idle()
    finally:
        await app.stop()
    assert len(provider.requests) == 1  # the model ran
    assert [(c.kind, c.text, c.final) for c in channel.calls] == [
        ("send", PLACEHOLDER, False),  # never a second placeholder, never an edit of it
        ("send", ANSWER, True),
    ]


async def test_a_final_edit_refused_again_and_again_is_posted_as_a_new_message() -> None:
    channel = RecordingChannel(LIMITS)
    delivery = Delivery(channel, CHAT)
    delivery.final_retry_pause_s = 0.001
    await delivery.start()
    channel.refuse_edits_next = FINAL_ATTEMPTS
    await delivery.finish(ANSWER)
    assert channel.refused == [ANSWER] * FINAL_ATTEMPTS
    assert [(c.kind, c.message_id, c.text) for c in channel.calls] == [
        ("send", "m1", PLACEHOLDER),
        ("send", "m2", ANSWER),
    ]


async def test_a_final_edit_that_lands_on_a_retry_stays_one_message() -> None:
    channel = RecordingChannel(LIMITS)
    delivery = Delivery(channel, CHAT)
    delivery.final_retry_pause_s = 0.001
    await delivery.start()
    channel.refuse_edits_next = FINAL_ATTEMPTS - 1
    await delivery.finish(ANSWER)
    assert [(c.kind, c.message_id, c.text) for c in channel.calls] == [
        ("send", "m1", PLACEHOLDER),
        ("edit", "m1", ANSWER),
    ]


async def test_the_new_message_instead_of_a_refused_edit_is_never_resent() -> None:
    channel = RecordingChannel(LIMITS)
    delivery = Delivery(channel, CHAT)
    delivery.final_retry_pause_s = 0.001
    await delivery.start()
    channel.refuse_edits_next = FINAL_ATTEMPTS
    channel.uncertain_sends_next = 1
    with pytest.raises(DeliveryUncertain):
        await delivery.finish(ANSWER)
    assert [c.kind for c in channel.calls] == ["send", "send"]  # placeholder, one new message


# -- through the real aiogram client against the fake Bot API --------------------------------


@pytest.fixture
async def harness() -> AsyncIterator[TelegramHarness]:
    made = TelegramHarness()
    await made.start()
    try:
        yield made
    finally:
        await made.close()


async def test_telegram_refused_final_edits_become_one_new_message(
    harness: TelegramHarness,
) -> None:
    delivery = Delivery(harness.channel, harness.chat, reply_to=harness.reply_to)
    delivery.final_retry_pause_s = 0.001
    await delivery.start()
    harness.fake.html_error_next["editmessagetext"] = FINAL_ATTEMPTS  # a proxy's 502 page
    await delivery.finish(ANSWER)
    seen = [s.text for s in await harness.what_the_user_sees()]
    assert seen == [PLACEHOLDER, ANSWER] and harness.posts() == 2
    assert len(harness.fake.to_chat(TelegramHarness.CHAT_ID, "editMessageText")) == FINAL_ATTEMPTS


async def test_telegram_unconfirmed_placeholder_gets_the_answer_as_a_new_message(
    tmp_path: Path,
) -> None:
    fake = FakeBotAPI(interval_s=0)
    await fake.start()
    channel = TelegramChannel(
        token=TOKEN,
        api_base=fake.url,
        private_edit_interval_s=0.01,
        group_edit_interval_s=0.01,
        request_timeout_s=1.0,  # the placeholder's lost answer ends after this long
    )
    provider = ScriptedProvider([Reply(ANSWER)])
    app = await _app(tmp_path, provider, channel)
    chat = TelegramHarness.CHAT_ID
    try:
        fake.hang_answer_next["sendmessage"] = 1  # the placeholder lands; no answer comes
        fake.push(fake.message(chat, "hello?"))  # polled by the real channel
        await fake.wait_for(lambda: len(fake.ok(chat, "sendMessage")) == 2)
        await app.gateway.wait_idle()
    finally:
        await app.stop()
        await fake.close()
    sent = [fake.messages[(chat, c.message_id or 0)] for c in fake.ok(chat, "sendMessage")]
    assert sent == [PLACEHOLDER, ANSWER]
    assert not fake.to_chat(chat, "editMessageText")
    assert len(provider.requests) == 1
