"""The Telegram channel end to end: the real aiogram Bot and Dispatcher against a fake Bot API.

Edit intervals are scaled down to 0.2 s (the fake enforces the same interval per chat), except
where the cadence itself is under test in bench/telegram_bench.py.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.base import ChatRef, DeliveryUncertain, OutboundContent
from adapters.telegram import TelegramChannel
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.commands import APP_HELP as HELP  # the app's table
from bot.pipeline.gateway import REFUSAL
from bot.runtime.app import App
from bot.runtime.config import ConfigError
from tests.conftest import make_config
from tests.telegram_fake import BOT, TOKEN, FakeBotAPI

INTERVAL = 0.2
SECRET = "s3cr3t-Token_1"
Start = Callable[..., Any]


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    api = FakeBotAPI(interval_s=INTERVAL)
    await api.start()
    yield api
    await api.close()


@pytest.fixture
async def telegram(tmp_path: Path, fake: FakeBotAPI) -> AsyncIterator[Start]:
    """`app = await telegram(provider, **channels.telegram)`: the gateway with Telegram on the fake."""
    apps: list[App] = []

    async def start(
        provider: ScriptedProvider, server: dict[str, Any] | None = None, **settings: Any
    ) -> App:
        channel = {
            "enabled": True,
            "token": TOKEN,
            "api_base": fake.url,
            "private_edit_interval_s": INTERVAL,
            "group_edit_interval_s": INTERVAL,
        } | settings
        server = server or {"public_url": "https://bot.example.com"}  # webhook mode registers it
        config = make_config(tmp_path, channels={"telegram": channel}, server=server)
        app = App(config, base_dir=tmp_path, provider=provider)
        await app.__aenter__()
        apps.append(app)
        ready = "setwebhook" if channel.get("mode") == "webhook" else "getupdates"
        await fake.wait_for(lambda: any(c.method == ready for c in fake.calls))
        return app

    yield start
    for app in apps:
        await app.stop()


def shown(fake: FakeBotAPI, chat: int) -> list[str]:
    """What the bot's messages in `chat` show now, in the order they were sent."""
    return [fake.messages[(chat, c.message_id)] for c in fake.ok(chat, "sendMessage")]  # type: ignore[index]


async def answered(app: App, provider: ScriptedProvider, turns: int = 1) -> None:
    await provider.wait_requests(turns)
    await app.gateway.wait_idle()


def mention(text: str, username: str = "@test_bot") -> list[dict[str, Any]]:
    return [{"type": "mention", "offset": text.index(username), "length": len(username)}]


async def test_long_polling_turn_is_one_message_filled_in_at_the_cadence(
    telegram: Start, fake: FakeBotAPI
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

    sends = fake.ok(42, "sendMessage")
    assert len(sends) == 1
    assert sends[0].params["reply_parameters"]["message_id"] == update["message"]["message_id"]
    texts = [c.text for c in fake.ok(42, "editMessageText")]
    visible = answer.replace("**", "")
    assert "Looking into it…" in texts
    assert any(visible.startswith(t) and t != visible for t in texts if t), texts  # streamed
    assert texts[-1] == visible and shown(fake, 42) == [visible]
    assert fake.to_chat(42, "editMessageText")[-1].params["parse_mode"] == "HTML"
    assert "<b>word0</b>" in fake.to_chat(42, "editMessageText")[-1].params["text"]
    for call in fake.to_chat(42, "sendMessage", "editMessageText"):
        assert call.params["link_preview_options"] == {"is_disabled": True}
    rated = fake.to_chat(42)
    assert all(b.at - a.at >= INTERVAL for a, b in itertools.pairwise(rated))
    assert not fake.rate_limited
    polls = [c for c in fake.calls if c.method == "getupdates"]
    assert "offset" not in polls[0].params
    assert any(c.params.get("offset") == update["update_id"] + 1 for c in polls)
    # buttons, and the stop button of a draft
    kinds = ["callback_query", "message", "stopped_message_generation"]
    assert sorted(polls[0].params["allowed_updates"]) == kinds


async def test_a_429_pauses_the_chat_and_the_final_still_lands(
    telegram: Start, fake: FakeBotAPI
) -> None:
    answer = " ".join(f"word{i}" for i in range(120))
    provider = ScriptedProvider([Reply(answer, chunks=6, delay_s=0.1)])
    app = await telegram(provider)
    fake.push(fake.message(42, "hi"))
    await fake.wait_for(lambda: len(fake.ok(42, "sendMessage")) == 1)
    fake.force_429(42, retry_after=1)
    await answered(app, provider)

    [limited] = fake.rate_limited  # the forced one only: nothing else came during the ban
    later = [c for c in fake.to_chat(42) if c.at > limited.at]
    assert later and all(c.at >= limited.at + 1.0 for c in later)
    assert shown(fake, 42) == [answer]
    assert len(fake.ok(42, "sendMessage")) == 1


async def test_an_edit_to_the_same_text_is_success(telegram: Start, fake: FakeBotAPI) -> None:
    app = await telegram(ScriptedProvider([]))
    channel = app.channels["telegram"]
    chat = ChatRef("telegram", "42")
    handle = await channel.send(chat, OutboundContent("**same**"))
    await channel.edit(handle, OutboundContent("**same**"), final=True)  # shown: no call at all
    assert not fake.to_chat(42, "editMessageText")
    await channel.edit(handle, OutboundContent("same"), final=True)  # no exception
    [edit] = fake.to_chat(42, "editMessageText")
    assert edit.status == 400 and "message is not modified" in (edit.error or "")


async def test_a_final_equal_to_the_note_shown_stops_typing_without_an_edit(
    telegram: Start, fake: FakeBotAPI
) -> None:
    hold = asyncio.Event()
    provider = ScriptedProvider(
        [Reply(calls=[("SendMessage", {"message": "All done."})]), Reply("All done.", wait=hold)]
    )
    app = await telegram(provider)
    fake.push(fake.message(42, "do it"))
    await fake.wait_for(lambda: [c.text for c in fake.ok(42, "editMessageText")] == ["All done."])
    hold.set()
    await answered(app, provider, 2)
    [edit] = fake.to_chat(42, "editMessageText")  # the final changed nothing: not sent again
    await asyncio.sleep(3 * INTERVAL)  # longer than the quiet time after which typing repeats
    assert all(c.at < edit.at for c in fake.ok(42, "sendChatAction"))
    assert shown(fake, 42) == ["All done."]


async def test_an_html_error_page_from_a_proxy_is_a_channel_error(
    telegram: Start, fake: FakeBotAPI
) -> None:
    hold = asyncio.Event()
    provider = ScriptedProvider([Reply("the answer", wait=hold), Reply("still here")])
    app = await telegram(provider)
    fake.html_error_next |= {"sendchataction": 1, "editmessagetext": 1, "getupdates": 1}
    fake.push(fake.message(42, "hi"))  # the poll in flight takes it; the next one draws a 502
    await fake.wait_for(lambda: bool(fake.to_chat(42, "sendChatAction")))  # answered with HTML
    hold.set()
    await answered(app, provider)
    first, *_ = fake.to_chat(42, "editMessageText")
    assert first.status == 502  # the final's first try; it went again and landed
    assert shown(fake, 42) == ["the answer"]
    fake.push(fake.message(42, "and now?"))  # the channel polls on, and still receives
    async with asyncio.timeout(10):
        await answered(app, provider, 2)
    assert [c.status for c in fake.calls if c.method == "getupdates"].count(502) == 1
    assert shown(fake, 42) == ["the answer", "still here"]
    channel = app.channels["telegram"]
    fake.html_error_next["sendmessage"] = 1
    with pytest.raises(DeliveryUncertain, match="not Telegram's JSON"):
        await channel.send(ChatRef("telegram", "42"), OutboundContent("x"), final=True)


async def test_typing_while_nothing_new_shows_and_never_after_the_final(
    telegram: Start, fake: FakeBotAPI
) -> None:
    hold = asyncio.Event()
    provider = ScriptedProvider([Reply("done", wait=hold)])
    app = await telegram(provider)
    fake.push(fake.message(42, "think hard"))
    await fake.wait_for(lambda: bool(fake.ok(42, "sendChatAction")))
    assert fake.ok(42, "sendChatAction")[0].params["action"] == "typing"
    hold.set()
    await answered(app, provider)
    final = fake.ok(42, "editMessageText")[-1]
    await asyncio.sleep(3 * INTERVAL)  # longer than the quiet time after which typing repeats
    assert all(c.at < final.at for c in fake.ok(42, "sendChatAction"))
    assert not fake.rate_limited


async def test_a_9000_character_answer_is_three_messages_in_order(
    telegram: Start, fake: FakeBotAPI
) -> None:
    paragraphs = [f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 12 for i in range(27)]
    answer = "\n\n".join(paragraphs)[:9000].rstrip()
    assert len(answer) == 9000
    provider = ScriptedProvider([Reply(answer)])
    app = await telegram(provider)
    fake.push(fake.message(42, "long please"))
    await answered(app, provider)

    parts = shown(fake, 42)
    assert len(parts) == 3
    assert all(len(p.encode("utf-16-le")) // 2 <= 4096 for p in parts)
    assert " ".join(parts).split() == answer.split()
    sends = fake.ok(42, "sendMessage")
    assert "reply_parameters" in sends[0].params and "reply_parameters" not in sends[1].params
    assert not fake.rate_limited


async def test_length_is_counted_in_utf16_units(telegram: Start, fake: FakeBotAPI) -> None:
    answer = "😀 " * 2500  # 5000 characters, 7500 UTF-16 units: too long for one message
    provider = ScriptedProvider([Reply(answer)])
    app = await telegram(provider)
    fake.push(fake.message(42, "emoji please"))
    await answered(app, provider)
    parts = shown(fake, 42)
    assert len(parts) == 2 and " ".join(parts).split() == answer.split()
    assert all(
        c.status == 200
        for c in fake.to_chat(42, "sendMessage", "editMessageText")
        if c.error is None or "not modified" not in c.error
    )


async def test_in_groups_only_mentions_and_replies_are_answered(
    telegram: Start, fake: FakeBotAPI
) -> None:
    provider = ScriptedProvider([Reply("you called?"), Reply("in the topic")])
    app = await telegram(provider)
    fake.push(fake.message(-100, "just chatting among ourselves"))
    text = "hey @test_bot what's up"
    asked = fake.push(fake.message(-100, text, entities=mention(text)))
    await answered(app, provider)
    assert [r.messages[-1].content for r in provider.requests] == [text]
    [send] = fake.ok(-100, "sendMessage")
    assert send.params["reply_parameters"]["message_id"] == asked["message"]["message_id"]

    ours = {
        "message_id": 9,
        "date": 0,
        "chat": {"id": -100, "type": "supergroup"},
        "from": BOT,
        "text": "you called?",
    }
    fake.push(fake.message(-100, "and in this topic?", thread_id=7, reply_to=ours))
    await answered(app, provider, 2)
    assert provider.requests[1].messages[-1].content == "and in this topic?"
    assert fake.ok(-100, "sendMessage")[-1].params["message_thread_id"] == 7
    assert len(fake.ok(-100, "sendMessage")) == 2


async def test_commands_also_as_cmd_at_botname(telegram: Start, fake: FakeBotAPI) -> None:
    await telegram(ScriptedProvider([]))
    for text in ("/help@other_bot", "/help@test_bot"):  # the first is for another bot
        entities = [{"type": "bot_command", "offset": 0, "length": len(text)}]
        fake.push(fake.message(-100, text, entities=entities))
    fake.push(fake.message(42, "/start"))  # what Telegram sends when someone opens the bot
    help_text = HELP.replace("**", "")
    await fake.wait_for(lambda: shown(fake, 42) == [help_text])
    assert shown(fake, -100) == [help_text]
    menus = [c.params for c in fake.calls if c.method == "setmycommands"]
    assert [(m["commands"][0]["command"], m.get("language_code")) for m in menus] == [
        ("new", None),
        ("new", "de"),
        ("new", "fr"),
        ("new", "zh"),
    ]
    assert menus[1]["commands"][2]["description"] == "was dieser Bot kann"
    # every chat's commands, then what this config offers (schedules are on by default)
    names = ["new", "stop", "help", "usage", "schedule"]
    assert [c["command"] for c in menus[0]["commands"]] == names


async def test_photos_documents_voice_and_unsupported_kinds(
    telegram: Start, fake: FakeBotAPI
) -> None:
    provider = ScriptedProvider([Reply("nice photo")])
    app = await telegram(provider)
    photo = [
        {"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 900},
        {"file_id": "big", "file_unique_id": "b", "width": 900, "height": 900, "file_size": 90000},
    ]
    fake.push(fake.message(42, None, photo=photo, caption="what is this?"))
    await answered(app, provider)
    assert (
        provider.requests[0].messages[-1].content == "what is this?\n[attachment: photo image/jpeg]"
    )

    fake.push(fake.message(77, None, sticker=STICKER))
    await fake.wait_for(lambda: bool(shown(fake, 77)))
    assert shown(fake, 77) == [CANT_READ]
    assert len(provider.requests) == 1


STICKER = {
    "file_id": "st",
    "file_unique_id": "st",
    "type": "regular",
    "width": 512,
    "height": 512,
    "is_animated": False,
    "is_video": False,
}
CANT_READ = (
    "Sorry — I can't read stickers yet. Send me text, a photo, a document or a voice message."
)


async def test_the_unsupported_kind_reply_obeys_access_and_goes_once(
    telegram: Start, fake: FakeBotAPI, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("hello owner")])
    app = await telegram(provider, mode="webhook", webhook_secret=SECRET, allowed_users=["42"])
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    stranger, owner = (
        fake.message(77, None, sticker=STICKER),
        fake.message(42, None, sticker=STICKER),
    )
    for update in (stranger, owner, owner, fake.message(77, "let me in"), fake.message(42, "hi")):
        async with session.post(f"{app.url}/telegram/webhook", json=update, headers=headers) as r:
            assert r.status == 200  # the owner's sticker twice: Telegram redelivers
    await answered(app, provider)
    await fake.wait_for(lambda: shown(fake, 77) == [REFUSAL])
    assert shown(fake, 77) == [REFUSAL]  # a stranger's sticker draws nothing
    assert shown(fake, 42) == [CANT_READ, "hello owner"]


async def test_the_unsupported_kind_reply_leaves_a_running_turn_typing(
    telegram: Start, fake: FakeBotAPI
) -> None:
    hold = asyncio.Event()
    provider = ScriptedProvider([Reply("done", wait=hold)])
    app = await telegram(provider)
    fake.push(fake.message(42, "think hard"))
    await fake.wait_for(lambda: len(fake.ok(42, "sendMessage")) == 1)
    fake.push(fake.message(42, None, sticker=STICKER))
    await fake.wait_for(lambda: len(fake.ok(42, "sendMessage")) == 2)
    reply = fake.ok(42, "sendMessage")[1]
    assert reply.text == CANT_READ
    await fake.wait_for(lambda: any(c.at > reply.at for c in fake.ok(42, "sendChatAction")))
    hold.set()
    await answered(app, provider)
    assert shown(fake, 42) == ["done", CANT_READ]


async def test_a_redelivered_update_is_answered_once(
    telegram: Start, fake: FakeBotAPI, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("once"), Reply("second message")])
    app = await telegram(provider, mode="webhook", webhook_secret=SECRET)
    url = f"{app.url}/telegram/webhook"
    update = fake.message(42, "hello")
    for _ in range(2):
        async with session.post(
            url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": SECRET}
        ) as r:
            assert r.status == 200
    await answered(app, provider)
    async with session.post(
        url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": SECRET}
    ) as r:
        assert r.status == 200
    async with session.post(
        url, json=fake.message(42, "next"), headers={"X-Telegram-Bot-Api-Secret-Token": SECRET}
    ) as r:
        assert r.status == 200
    await answered(app, provider, 2)
    assert [r.messages[-1].content for r in provider.requests] == ["hello", "next"]
    assert shown(fake, 42) == ["once", "second message"]


async def test_webhook_checks_the_secret(
    telegram: Start, fake: FakeBotAPI, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("hello, real user")])
    app = await telegram(
        provider,
        server={"public_url": "https://bot.example.com/"},
        mode="webhook",
        webhook_secret=SECRET,
    )
    assert fake.webhook["url"] == "https://bot.example.com/telegram/webhook"
    assert fake.webhook["secret_token"] == SECRET
    url = f"{app.url}/telegram/webhook"
    for headers in ({"X-Telegram-Bot-Api-Secret-Token": "wrong"}, {}):
        async with session.post(url, json=fake.message(42, "forged"), headers=headers) as r:
            assert r.status == 401
    async with session.post(
        url, json=fake.message(42, "real"), headers={"X-Telegram-Bot-Api-Secret-Token": SECRET}
    ) as r:
        assert r.status == 200
    await answered(app, provider)
    assert [r.messages[-1].content for r in provider.requests] == ["real"]
    assert shown(fake, 42) == ["hello, real user"]


def test_webhook_mode_refuses_to_start_without_a_secret(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        make_config(
            tmp_path, channels={"telegram": {"enabled": True, "token": TOKEN, "mode": "webhook"}}
        )
    assert "channels.telegram.webhook_secret: required in webhook mode" in str(caught.value)
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="webhook_secret is required"):
        TelegramChannel(token=TOKEN, mode="webhook")


async def test_allowlists_of_users_and_chats(telegram: Start, fake: FakeBotAPI) -> None:
    provider = ScriptedProvider([Reply("hi owner"), Reply("hi group")])
    app = await telegram(provider, allowed_users=["42"], allowed_chats=["-100"])
    fake.push(fake.message(77, "let me in"))
    await fake.wait_for(lambda: shown(fake, 77) == [REFUSAL])
    fake.push(fake.message(42, "it's me"))
    await answered(app, provider)
    text = "@test_bot hello"
    fake.push(fake.message(-100, text, user_id=77, entities=mention(text)))
    await answered(app, provider, 2)
    assert shown(fake, 42) == ["hi owner"] and shown(fake, -100) == ["hi group"]


async def test_html_telegram_cannot_parse_goes_again_as_plain_text(
    telegram: Start, fake: FakeBotAPI
) -> None:
    app = await telegram(ScriptedProvider([]))
    fake.fail_parse_next = 1
    started = time.monotonic()
    await app.channels["telegram"].send(
        ChatRef("telegram", "42"), OutboundContent("**bold** <b>"), final=True
    )
    failed, sent = fake.to_chat(42, "sendMessage")
    assert failed.status == 400 and failed.params["parse_mode"] == "HTML"
    assert sent.status == 200 and "parse_mode" not in sent.params and sent.text == "bold <b>"
    assert sent.at - started < 1.0
