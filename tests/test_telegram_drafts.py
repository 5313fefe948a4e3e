"""Live drafts in private chats: the real aiogram client against a fake Bot API that has
`sendMessageDraft` and enforces its rules. A turn streams in one draft and ends in one message;
groups keep one message edited; a server or chat refusing drafts falls back to edits."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from adapters.base import ChatRef, InboundMessage
from adapters.telegram import TelegramChannel
from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import ModelRequest
from bot.pipeline.delivery import Delivery
from tests import test_telegram as tg
from tests.telegram_fake import TOKEN, FakeBotAPI
from tools.events import AnswerDelta, ToolStarted

INTERVAL = tg.INTERVAL
telegram = tg.telegram
shown, answered, mention = tg.shown, tg.answered, tg.mention


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    api = FakeBotAPI(interval_s=INTERVAL, drafts=True)
    await api.start()
    yield api
    await api.close()


def drafts(fake: FakeBotAPI, chat: int) -> list[Any]:
    return fake.ok(chat, "sendMessageDraft")


async def test_a_private_chat_streams_one_draft_and_ends_in_one_message(
    telegram: tg.Start, fake: FakeBotAPI
) -> None:
    answer = " ".join(f"**word{i}**" if i % 50 == 0 else f"word{i}" for i in range(200))
    provider = ScriptedProvider(
        [
            Reply(calls=[("SendMessage", {"message": "Looking into it…"})]),
            Reply(answer, chunks=5, delay_s=0.3),
        ]
    )
    app = await telegram(provider)
    update = fake.push(fake.message(42, "tell me a story"))
    await answered(app, provider, 2)

    visible = answer.replace("**", "")
    [message] = fake.ok(42, "sendMessage")  # the answer, once
    assert message.text == visible and shown(fake, 42) == [visible]
    assert message.params["reply_parameters"]["message_id"] == update["message"]["message_id"]
    assert "<b>word0</b>" in message.params["text"] and message.params["parse_mode"] == "HTML"
    shows = drafts(fake, 42)
    assert shows and all(c.at < message.at for c in shows)  # every draft before the message
    assert {c.params["draft_id"] for c in shows} == {shows[0].params["draft_id"]} != {0}
    assert all(c.params["can_stop"] is True for c in shows)
    texts = [c.text for c in shows]
    assert texts[0] == "Thinking…" and "Looking into it…" in texts
    assert any(visible.startswith(t) and t != visible for t in texts if t), texts  # streamed
    assert all(c.params["parse_mode"] == "HTML" for c in shows)
    assert not fake.to_chat(42, "editMessageText")
    assert not fake.drafts  # the message took the draft's place: none is left
    rated = fake.to_chat(42)
    assert all(b.at - a.at >= INTERVAL for a, b in itertools.pairwise(rated))
    assert not fake.rate_limited


def _dispatch(description: str, persona: str) -> dict[str, Any]:
    prompt = f"Please do the {description} now and report back what you found in the end."
    return {"description": description, "subagent_type": persona, "prompt": prompt}


def work(release: asyncio.Event) -> Callable[[ModelRequest], Reply]:
    """Two specialists at once, each calling the clock, and the coordinator's own call to it:
    three tool calls. The specialists answer once `release` is set, then the coordinator."""

    def reply(request: ModelRequest) -> Reply:
        done = request.messages[-1].role == "tool"
        if "research specialist" in request.system:
            if done:
                return Reply("Found it.", wait=release)
            return Reply(calls=[("get_current_datetime", {})])
        if "planning specialist" in request.system:
            if done:
                return Reply("Planned it.", wait=release)
            return Reply(calls=[("get_current_datetime", {})])
        if done:
            return Reply("Here is the plan, researched and priced.", chunks=4, delay_s=0.1)
        return Reply(
            calls=[
                ("AgentTool", _dispatch("research task", "specialist-research")),
                ("AgentTool", _dispatch("planning task", "specialist-planner")),
                ("get_current_datetime", {}),
            ]
        )

    return reply


@pytest.mark.parametrize("chat", [42, -42], ids=["private", "group"])
async def test_two_specialists_and_three_tool_calls_end_in_one_message(
    telegram: tg.Start, fake: FakeBotAPI, chat: int
) -> None:
    release = asyncio.Event()
    provider = ScriptedProvider(work(release))
    app = await telegram(provider)
    text = "@test_bot plan my trip"
    fake.push(fake.message(chat, text, entities=mention(text)))
    method = "sendMessageDraft" if chat > 0 else "editMessageText"

    def working(who: str) -> bool:
        return any(who in (c.text or "") for c in fake.ok(chat, method))

    await fake.wait_for(lambda: working("Researcher") and working("Planner"))
    release.set()
    await answered(app, provider, 6)

    final = "Here is the plan, researched and priced."
    [message] = fake.ok(chat, "sendMessage")
    assert shown(fake, chat) == [final]
    results = {(m.tool_call_id, m.name) for r in provider.requests for m in r.messages}
    names = [name for _, name in results if name]
    assert sorted(names) == ["AgentTool"] * 2 + ["get_current_datetime"] * 3
    edits = fake.ok(chat, "editMessageText")
    if chat > 0:  # drafts before the one message, no edits
        shows = drafts(fake, chat)
        assert not edits and shows and all(c.at < message.at for c in shows)
        assert not fake.drafts
    else:  # a group: that one message is the placeholder, edited into the answer
        assert not fake.to_chat(chat, "sendMessageDraft")
        assert message.text == "Thinking…" and edits[-1].text == final
    assert not fake.rate_limited


@pytest.mark.parametrize(
    ("status", "refusal", "everywhere"),
    [
        (400, "Bad Request: TEXTDRAFT_PEER_INVALID", False),
        (404, "Not Found: method not found", True),  # a server from before drafts
    ],
)
async def test_a_refused_draft_falls_back_to_edits_and_is_remembered(
    telegram: tg.Start,
    fake: FakeBotAPI,
    caplog: pytest.LogCaptureFixture,
    status: int,
    refusal: str,
    everywhere: bool,
) -> None:
    fake.refuse["sendmessagedraft"] = (status, refusal)
    provider = ScriptedProvider([Reply("one", chunks=2, delay_s=0.3), Reply("two"), Reply("3")])
    app = await telegram(provider)
    fake.push(fake.message(42, "first"))
    await answered(app, provider, 1)
    assert shown(fake, 42) == ["one"]  # a placeholder message, edited into the answer
    assert fake.ok(42, "editMessageText")[-1].text == "one"
    fake.push(fake.message(42, "second"))
    await answered(app, provider, 2)
    assert len(fake.to_chat(42, "sendMessageDraft")) == 1  # not asked again in this chat
    assert shown(fake, 42) == ["one", "two"]
    fake.push(fake.message(43, "elsewhere"))
    await answered(app, provider, 3)
    assert len(fake.to_chat(43, "sendMessageDraft")) == (0 if everywhere else 1)
    assert shown(fake, 43) == ["3"]
    refusals = [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and "refused a draft" in r.getMessage()
    ]
    assert len(refusals) == (1 if everywhere else 2)  # once per chat, or once for the server


async def test_a_draft_to_a_group_is_refused_by_the_fake_like_telegram(fake: FakeBotAPI) -> None:
    from aiogram import Bot
    from aiogram.client.session.aiohttp import AiohttpSession
    from aiogram.client.telegram import TelegramAPIServer
    from aiogram.exceptions import TelegramBadRequest

    from tests.telegram_fake import TOKEN

    bot = Bot(TOKEN, session=AiohttpSession(api=TelegramAPIServer.from_base(fake.url)))
    try:
        with pytest.raises(TelegramBadRequest, match="TEXTDRAFT_PEER_INVALID"):
            await bot.send_message_draft(chat_id=-42, draft_id=7, text="hi")
        with pytest.raises(TelegramBadRequest, match="non-zero"):
            await bot.send_message_draft(chat_id=42, draft_id=0, text="hi")
        with pytest.raises(TelegramBadRequest, match="too long"):
            await bot.send_message_draft(chat_id=42, draft_id=7, text="x" * 4097)
        await asyncio.sleep(INTERVAL)
        assert await bot.send_message_draft(chat_id=42, draft_id=7, text="", can_stop=True)
        assert fake.drafts == {(42, 0, 7): ""}  # empty: the app shows "Thinking…"
    finally:
        await bot.session.close()


def _holding() -> ScriptedProvider:
    """A note, then an answer that would take a minute: the turn is at work until stopped."""
    return ScriptedProvider(
        [
            Reply(calls=[("SendMessage", {"message": "Looking into it…"})]),
            Reply("an answer nobody waits for", delay_s=60),
        ]
    )


async def test_the_drafts_stop_button_stops_the_turn_and_leaves_one_message(
    telegram: tg.Start, fake: FakeBotAPI
) -> None:
    provider = _holding()
    app = await telegram(provider)
    fake.push(fake.message(42, "take your time"))
    await fake.wait_for(lambda: any(c.text == "Looking into it…" for c in drafts(fake, 42)))
    await provider.wait_requests(2)
    draft_id = drafts(fake, 42)[0].params["draft_id"]
    fake.push(fake.stop_press(42, draft_id))
    await fake.wait_for(lambda: bool(fake.ok(42, "sendMessage")))
    await app.gateway.wait_idle()

    [message] = fake.ok(42, "sendMessage")
    assert message.text == "Looking into it…\n\n⏹ Stopped."  # what showed stays, marked
    assert not fake.drafts
    assert len(provider.requests) == 2  # the held answer was cancelled, nothing asked after
    # a press that comes after the answer is too late: no "nothing to stop" message
    fake.push(fake.stop_press(42, draft_id))
    fake.push(fake.message(42, "/help"))  # a mark that the press before it was handled
    await fake.wait_for(lambda: len(fake.ok(42, "sendMessage")) == 2)
    await app.gateway.wait_idle()
    assert "/stop" in (fake.ok(42, "sendMessage")[1].text or "")  # the help, and only it


async def test_a_stop_press_through_the_webhook_in_a_private_topic(
    telegram: tg.Start, fake: FakeBotAPI, session: aiohttp.ClientSession
) -> None:
    provider = _holding()
    app = await telegram(provider, mode="webhook", webhook_secret=tg.SECRET)
    assert "stopped_message_generation" in fake.webhook["allowed_updates"]
    url, headers = f"{app.url}/telegram/webhook", {"X-Telegram-Bot-Api-Secret-Token": tg.SECRET}
    async with session.post(url, json=fake.message(42, "hi", thread_id=7), headers=headers) as r:
        assert r.status == 200
    await fake.wait_for(lambda: any(c.text == "Looking into it…" for c in drafts(fake, 42)))
    await provider.wait_requests(2)
    shows = drafts(fake, 42)
    assert {c.params["message_thread_id"] for c in shows} == {7}  # the topic's own draft
    press = fake.stop_press(42, shows[0].params["draft_id"], thread_id=7)
    async with session.post(url, json=press, headers=headers) as r:
        assert r.status == 200
    await fake.wait_for(lambda: bool(fake.ok(42, "sendMessage")))
    await app.gateway.wait_idle()
    [message] = fake.ok(42, "sendMessage")
    assert message.params["message_thread_id"] == 7 and (message.text or "").endswith("⏹ Stopped.")
    # a press of a draft this process does not know (another's) is a /stop, claimed once
    other = fake.stop_press(42, 99, thread_id=7)
    for _ in range(2):  # Telegram delivering it again
        async with session.post(url, json=other, headers=headers) as r:
            assert r.status == 200
        await app.gateway.wait_idle()
    _, nothing = fake.ok(42, "sendMessage")
    assert nothing.params["message_thread_id"] == 7 and "stop" in (nothing.text or "").lower()


async def test_a_drafts_final_of_unknown_fate_is_never_posted_twice(
    telegram: tg.Start, fake: FakeBotAPI
) -> None:
    provider = ScriptedProvider([Reply("the answer", chunks=2, delay_s=0.3)])
    app = await telegram(provider)
    fake.garble_answer_next["sendmessage"] = 1  # it lands; its answer is a proxy's error page
    fake.push(fake.message(42, "hi"))
    await answered(app, provider)
    assert shown(fake, 42) == ["the answer"]
    assert len(fake.to_chat(42, "sendMessage")) == 1  # not retried: it may be (it is) there


async def test_a_long_preview_takes_two_drafts_kept_alive_and_the_final_one_message(
    fake: FakeBotAPI,
) -> None:
    """Past 4096 the preview continues in a second draft; drafts a quiet turn leaves unchanged
    are sent again before the app drops them; a final that fits one message is one message, and
    the second draft needs no closing: the message takes both drafts' place."""
    channel = TelegramChannel(
        token=TOKEN, api_base=fake.url, private_edit_interval_s=INTERVAL, draft_refresh_s=0.3
    )
    running = asyncio.create_task(channel.run(_ignore))
    try:
        await fake.wait_for(lambda: any(c.method == "getupdates" for c in fake.calls))
        delivery = Delivery(channel, ChatRef("telegram", "42"), reply_to="7")
        await delivery.start()
        answer = "word " * 815  # 4075 characters: the running tool's line does not fit beside
        await delivery.on_event(AnswerDelta(answer))
        await delivery.on_event(ToolStarted("c1", "get_current_datetime", "Checking the time"))

        def ids() -> list[int]:
            return [c.params["draft_id"] for c in drafts(fake, 42)]

        await fake.wait_for(lambda: len(set(ids())) == 2)

        def refreshed() -> bool:  # a draft sent again as it was
            last: dict[int, str | None] = {}
            for call in drafts(fake, 42):
                draft = call.params["draft_id"]
                if last.get(draft) == call.text:
                    return True
                last[draft] = call.text
            return False

        await fake.wait_for(refreshed)
        await delivery.finish(answer)
        [message] = fake.ok(42, "sendMessage")
        assert message.text == answer.strip() and message.params["reply_parameters"] == {
            "message_id": 7,
            "allow_sending_without_reply": True,
        }
        assert not fake.drafts and not fake.to_chat(42, "editMessageText")
        assert not fake.rate_limited
    finally:
        running.cancel()
        await asyncio.wait([running])
        await channel.aclose()


async def _ignore(message: InboundMessage) -> None:
    return None
