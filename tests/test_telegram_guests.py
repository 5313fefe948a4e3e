"""Guest mode: a summon in a chat the bot is not in is answered once, as text, through
answerGuestQuery, within its time box; the real aiogram client against the fake Bot API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from adapters.base import InboundMessage, OutboundContent
from adapters.telegram import TelegramChannel
from agent.providers.scripted import Reply, ScriptedProvider
from tests import test_telegram as tg
from tests.telegram_fake import TOKEN, FakeBotAPI

telegram = tg.telegram


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    api = FakeBotAPI(interval_s=tg.INTERVAL, drafts=True)
    await api.start()
    yield api
    await api.close()


async def test_a_guest_summon_is_answered_once_through_answer_guest_query(
    telegram: tg.Start, fake: FakeBotAPI
) -> None:
    provider = ScriptedProvider([Reply("It is **4**.", chunks=2)])
    app = await telegram(provider, guest_mode=True)
    fake.guest_window_s = 10.0
    summon = fake.push(fake.guest(-77, "@test_bot what is 2+2?"))
    query = summon["guest_message"]["guest_query_id"]
    await tg.answered(app, provider)

    assert fake.guest_answers == {query: "It is 4."}
    [call] = [c for c in fake.calls if c.method == "answerguestquery"]
    assert call.params["result"]["input_message_content"]["parse_mode"] == "HTML"
    assert "<b>4</b>" in call.params["result"]["input_message_content"]["message_text"]
    assert not fake.to_chat(-77)  # nothing sent into a chat the bot is not in
    assert provider.requests[0].messages[-1].content == "@test_bot what is 2+2?"
    polls = [c for c in fake.calls if c.method == "getupdates"]
    assert "guest_message" in polls[0].params["allowed_updates"]


async def test_a_summon_not_answered_in_its_time_box_points_to_a_private_chat(
    fake: FakeBotAPI,
) -> None:
    fake.guest_window_s = 5.0
    channel = TelegramChannel(token=TOKEN, api_base=fake.url, guest_mode=True, guest_answer_s=0.3)
    received: list[InboundMessage] = []

    async def inbox(message: InboundMessage) -> None:
        received.append(message)

    running = asyncio.create_task(channel.run(inbox))
    try:
        summon = fake.push(fake.guest(-77, "@test_bot plan my year", user_id=5))
        query = summon["guest_message"]["guest_query_id"]
        await fake.wait_for(lambda: query in fake.guest_answers)
        assert "https://t.me/test_bot" in fake.guest_answers[query]
        [message] = received
        assert message.chat.chat_id == f"guest:{query}" and message.user_id == "5"
        assert not channel.limits_for(message.chat).can_edit  # only the final goes there
        await channel.send(message.chat, OutboundContent("the late answer"), final=True)
        assert [c.method for c in fake.calls].count("answerguestquery") == 1  # dropped
    finally:
        running.cancel()
        await asyncio.wait([running])
        await channel.aclose()
