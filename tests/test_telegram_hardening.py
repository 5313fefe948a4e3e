"""Telegram hardening: commands for other bots, polling against a server that answers at once,
best-effort calls that fail, malformed webhook bodies, and a channel that cannot start.

The real aiogram client against tests/telegram_fake.py, through the whole app.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from typing import Any

import aiohttp
import pytest
from aiogram.types import Update

from adapters.base import ChatRef, InboundMessage
from adapters.telegram.normalize import BotIdentity, normalize
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.commands import APP_HELP as HELP  # the app's table
from tests import test_telegram as tg
from tests.telegram_fake import BOT, FakeBotAPI

fake = tg.fake
telegram = tg.telegram
Start = tg.Start
shown = tg.shown
ME = BotIdentity(BOT["id"], BOT["username"])
HELP_TEXT = HELP.replace("**", "")
BOT_COMMAND_HOME = {"type": "bot_command", "offset": 0, "length": 5}
OURS = {"message_id": 9, "date": 0, "chat": {"id": -100, "type": "supergroup"}, "from": BOT}


def command(fake: FakeBotAPI, text: str, reply_to: dict[str, Any] | None) -> dict[str, Any]:
    entities = [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}]
    return fake.push(fake.message(-100, text, entities=entities, reply_to=reply_to))


@pytest.mark.parametrize("group_reply", ["all", "mention"])
async def test_a_command_for_another_bot_is_ignored(
    telegram: Start, fake: FakeBotAPI, group_reply: str
) -> None:
    """With `group_reply: all`, or as a reply to one of our messages: /new, /help and /stop
    addressed to another bot neither run nor reach the model."""
    hold = asyncio.Event()
    provider = ScriptedProvider([Reply("first"), Reply("second"), Reply("third", wait=hold)])
    app = await telegram(provider, group_reply=group_reply)
    reply_to = OURS | {"text": "first"} if group_reply == "mention" else None
    text = "hello @test_bot"
    fake.push(fake.message(-100, text, entities=tg.mention(text)))
    await tg.answered(app, provider)

    command(fake, "/help@other_bot", reply_to)
    command(fake, "/new@other_bot", reply_to)
    command(fake, "/help@test_bot", None)  # ours: it lands after the two above were handled
    await fake.wait_for(lambda: shown(fake, -100) == ["first", HELP_TEXT])
    again = "again @test_bot"
    fake.push(fake.message(-100, again, entities=tg.mention(again)))
    await tg.answered(app, provider, 2)
    history = [m.content for m in provider.requests[1].messages]
    assert text in history  # /new@other_bot did not end the conversation

    more = "more @test_bot"
    fake.push(fake.message(-100, more, entities=tg.mention(more)))
    await provider.wait_requests(3)
    command(fake, "/stop@other_bot", reply_to)
    command(fake, "/help@test_bot", None)
    await fake.wait_for(lambda: shown(fake, -100).count(HELP_TEXT) == 2)
    hold.set()
    await app.gateway.wait_idle()
    assert "third" in shown(fake, -100) and not [t for t in shown(fake, -100) if "Stopped" in t]
    sent = [m.content for r in provider.requests for m in r.messages]
    assert not [c for c in sent if "other_bot" in str(c)]


@pytest.mark.parametrize(
    ("text", "bot_name", "expected"),
    [
        ("/new", None, "new"),
        ("/NEW please", None, "new"),
        ("/new@any", None, "new"),  # web socket, terminal: no other bot to address
        ("/new@Test_Bot", "test_bot", "new"),
        ("/new@other_bot", "test_bot", None),
        ("hello /new", "test_bot", None),
    ],
)
def test_a_command_is_ours_only_when_it_names_no_bot_or_ours(
    text: str, bot_name: str | None, expected: str | None
) -> None:
    message = InboundMessage(ChatRef("x", "1"), "u", text, "e", bot_name=bot_name)
    assert message.command == expected


@pytest.mark.parametrize("chat", [42, -100])
@pytest.mark.parametrize("text", ["/new@other_bot", "/help@Other_Bot please", "/stop@x"])
def test_normalize_drops_a_command_for_another_bot(chat: int, text: str) -> None:
    fake_api = FakeBotAPI()
    reply = OURS | {"chat": {"id": chat, "type": "private" if chat > 0 else "supergroup"}}

    def normalized(text: str) -> object:
        entities = [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}]
        update = fake_api.message(chat, text, entities=entities, reply_to=reply)
        message = Update.model_validate(update).message
        assert message is not None
        return normalize(message, update["update_id"], ME)

    assert normalized(text) is None
    command = text.split("@")[0]  # "/new"
    ours = normalized(f"{command}@Test_Bot")
    assert isinstance(ours, InboundMessage) and ours.command == command[1:]
    # a path: Telegram's bot_command entity ends at "/home", so it names no bot
    path = fake_api.message(chat, "/home/me@host", entities=[BOT_COMMAND_HOME], reply_to=reply)
    message = Update.model_validate(path).message
    assert message is not None and isinstance(normalize(message, 1, ME), InboundMessage)


async def test_polling_pauses_when_an_empty_poll_comes_back_at_once(
    telegram: Start, fake: FakeBotAPI
) -> None:
    fake.poll_answers_at_once = True
    provider = ScriptedProvider([Reply("still answering")])
    app = await telegram(provider)

    def polls() -> list[float]:
        return [c.at for c in fake.calls if c.method == "getupdates"]

    await fake.wait_for(lambda: len(polls()) >= 3)
    gaps = [b - a for a, b in itertools.pairwise(polls())]
    assert min(gaps) >= 0.5, gaps  # unpaused, they came about a millisecond apart
    fake.push(fake.message(42, "hi"))
    await tg.answered(app, provider)
    assert shown(fake, 42) == ["still answering"]


async def test_a_best_effort_call_refused_with_any_api_error_is_logged_once(
    telegram: Start, fake: FakeBotAPI, caplog: pytest.LogCaptureFixture
) -> None:
    fake.refuse = {"setmycommands": (404, "Not Found"), "deletewebhook": (418, "I'm a teapot")}
    provider = ScriptedProvider([Reply("hello")])
    app = await telegram(provider)  # it got as far as polling
    fake.push(fake.message(42, "hi"))
    await tg.answered(app, provider)
    assert shown(fake, 42) == ["hello"]
    assert [c.method for c in fake.calls].count("getme") == 1  # never restarted
    for method in ("setMyCommands", "deleteWebhook"):
        assert len([r for r in caplog.records if f"Telegram {method} failed" in r.message]) == 1


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


async def test_the_webhook_answers_malformed_bodies_with_400_and_no_traceback(
    telegram: Start,
    fake: FakeBotAPI,
    session: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = ScriptedProvider([Reply("hello")])
    app = await telegram(provider, mode="webhook", webhook_secret=tg.SECRET)
    url = f"{app.url}/telegram/webhook"
    headers = {"X-Telegram-Bot-Api-Secret-Token": tg.SECRET, "Content-Type": "application/json"}
    valid = fake.message(42, "hi")
    deep_inside = json.dumps(valid)[:-1] + ', "extra": ' + nested(900) + "}"
    bodies = [
        nested(100_000),
        '{"update_id": ' + nested(100_000) + "}",
        "[1, 2]",
        '"an update"',
        "null",
        '{"update_id": "seven"}',
        '{"update_id": 1, "message": {"chat": 5}}',
        "{not json",
        "\xff\xfe",
    ]
    for body in bodies:
        async with session.post(url, data=body.encode("latin-1"), headers=headers) as r:
            assert r.status == 400, body[:40]
    async with session.post(url, data=deep_inside, headers=headers) as r:
        assert r.status == 200  # deep, but within what JSON parsing takes: a fine update
    await tg.answered(app, provider)
    assert shown(fake, 42)[-1] == "hello"
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert "Traceback" not in caplog.text
