"""Feishu events in: the real lark-oapi long-connection client against the fake's protobuf frames,
and HTTP callbacks on our own route (signed, encrypted, token-checked, replay-proof)."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from adapters.base import InboundMessage, OutboundContent
from adapters.feishu import FeishuChannel
from adapters.feishu.longconn import LongConnection
from adapters.feishu.normalize import UNSUPPORTED
from bot.pipeline.dedup import StoreDedup
from bot.storage import SqliteStore
from content.texts import t
from tests.feishu_events import (
    ENCRYPT_KEY,
    TOKEN,
    action_event,
    encrypt,
    mention,
    message_event,
    signed,
)
from tests.feishu_fake import APP_ID, APP_SECRET, FakeFeishu

Inbox = Callable[[InboundMessage], Awaitable[None]]


@pytest.fixture
async def fake() -> AsyncIterator[FakeFeishu]:
    server = FakeFeishu()
    await server.start()
    yield server
    await server.close()


@asynccontextmanager
async def running(
    channel: FeishuChannel, inbox: Inbox | None = None
) -> AsyncIterator[asyncio.Queue[InboundMessage]]:
    got: asyncio.Queue[InboundMessage] = asyncio.Queue()
    task = asyncio.create_task(channel.run(inbox or got.put))
    try:
        yield got
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


def channel_on(fake: FakeFeishu, **settings: Any) -> FeishuChannel:
    return FeishuChannel(app_id=APP_ID, app_secret=APP_SECRET, domain=fake.url, **settings)


async def next_message(queue: asyncio.Queue[InboundMessage]) -> InboundMessage:
    async with asyncio.timeout(20):  # generous: the machine may be busy
        return await queue.get()


# --- long connection --------------------------------------------------------------------------


async def test_the_long_connection_acks_at_once_and_hands_the_message_over(
    fake: FakeFeishu,
) -> None:
    release = asyncio.Event()
    got: list[InboundMessage] = []

    async def slow_inbox(message: InboundMessage) -> None:
        got.append(message)
        await release.wait()  # the gateway is busy: the ack must not wait for it

    async with running(channel_on(fake), slow_inbox):
        await fake.ws.wait_connected()
        frame = await fake.ws.push(message_event("hello there", message_id="om_1"))
        assert await fake.ws.wait_ack(frame) == {"code": 200}
        await fake.wait_for(lambda: bool(got))
        release.set()
    [message] = got
    assert (message.text, message.message_id, message.user_id) == ("hello there", "om_1", "ou_user")
    assert message.event_id == "feishu:om_1" and message.mentioned and not message.is_group
    assert message.chat.key == "feishu:oc_p2p"


async def test_a_redelivered_event_reaches_the_gateway_with_the_same_claim(
    fake: FakeFeishu,
) -> None:
    async with running(channel_on(fake)) as got:
        await fake.ws.wait_connected()
        event = message_event("once", message_id="om_7", event_id="ev_7")
        for frame in [await fake.ws.push(event), await fake.ws.push(event)]:
            await fake.ws.wait_ack(frame)
        # a retry with a new event id (another route) still names the same message
        await fake.ws.push(message_event("once", message_id="om_7", event_id="ev_8"))
        first, second = await next_message(got), await next_message(got)
    assert first.event_id == second.event_id == "feishu:om_7"  # the gateway claims it once
    assert got.empty()


async def test_groups_need_the_bots_mention_which_is_stripped(fake: FakeFeishu) -> None:
    async with running(channel_on(fake)) as got:
        await fake.ws.wait_connected()
        mentions = [mention("@_user_1"), mention("@_user_2", "ou_ann", "Ann")]
        await fake.ws.push(
            message_event("@_user_1 ask @_user_2 please", chat_type="group", mentions=mentions)
        )
        addressed = await next_message(got)
        other = [mention("@_user_1", "ou_ann", "Ann")]
        await fake.ws.push(message_event("@_user_1 hi", chat_type="group", mentions=other))
        chatter = await next_message(got)
        await fake.ws.push(message_event("in a topic", chat_type="group", thread_id="omt_1"))
        threaded = await next_message(got)
    assert addressed.text == "ask @Ann please" and addressed.mentioned and addressed.is_group
    assert chatter.text == "@Ann hi" and not chatter.mentioned
    assert threaded.chat.thread_id == "omt_1" and threaded.chat.key == "feishu:oc_p2p:omt_1"


async def test_post_messages_are_read_and_other_kinds_get_one_honest_reply(
    fake: FakeFeishu,
) -> None:
    post = {
        "title": "Report",
        "content": [
            [{"tag": "text", "text": "see "}, {"tag": "a", "text": "this", "href": "https://x.io"}],
            [{"tag": "text", "text": "thanks"}],
        ],
    }
    async with running(channel_on(fake)) as got:
        await fake.ws.wait_connected()
        await fake.ws.push(message_event(kind="post", content=post))
        rich = await next_message(got)
        image = message_event(kind="sticker", content={"file_key": "stk_1"}, message_id="om_img")
        await fake.ws.push(image)
        await fake.ws.push(image)  # redelivered: answered once
        await fake.wait_for(lambda: len(fake.of("message")) == 1)
        await asyncio.sleep(0.3)
    assert rich.text == "Report\nsee [this](https://x.io)\nthanks"
    [reply] = fake.of("message")
    assert reply.path.endswith("/om_img/reply")
    said = t("en", UNSUPPORTED, what="stickers")
    assert said in fake.text_of(fake.bot_messages("oc_p2p")[0])
    assert got.empty()


async def test_an_unsupported_message_redelivered_after_a_restart_is_declined_once(
    fake: FakeFeishu, tmp_path: Path
) -> None:
    image = message_event(kind="sticker", content={"file_key": "stk_1"}, message_id="om_img2")
    async with SqliteStore(tmp_path / "bot.db") as store:
        for _process in range(2):  # the second process gets Feishu's redelivery
            channel = channel_on(fake, claims=StoreDedup(store, ttl_s=3600))
            async with running(channel):
                await fake.ws.wait_connected()
                await fake.ws.wait_ack(await fake.ws.push(image))
                await fake.wait_for(lambda: len(fake.of("message")) >= 1)
                await asyncio.sleep(0.3)
            await fake.wait_for(lambda: not fake.ws.sockets, 5)
    assert len(fake.of("message")) == 1


async def test_a_button_press_comes_back_as_an_action_on_its_conversation(
    fake: FakeFeishu,
) -> None:
    value = {
        "action_id": "confirm",
        "value": "yes",
        "label": "Yes",
        "thread": "omt_9",
        "group": "1",
    }
    async with running(channel_on(fake)) as got:
        await fake.ws.wait_connected()
        await fake.ws.push(action_event(value, chat_id="oc_g", message_id="om_card"))
        pressed = await next_message(got)
    assert pressed.action is not None and pressed.text == ""
    assert (pressed.action.action_id, pressed.action.value, pressed.action.label) == (
        "confirm",
        "yes",
        "Yes",
    )
    assert pressed.chat.key == "feishu:oc_g:omt_9" and pressed.is_group and pressed.mentioned
    assert pressed.event_id.startswith("feishu:event:ev_")


async def test_a_wrong_app_secret_is_logged_once_and_stops_only_the_channel(
    fake: FakeFeishu, caplog: pytest.LogCaptureFixture
) -> None:
    fake.secret = "the-real-secret"
    channel = channel_on(fake)
    with caplog.at_level(logging.ERROR):
        async with asyncio.timeout(10):
            await channel.run(asyncio.Queue[InboundMessage]().put)  # returns: nothing to retry
            await channel.run(asyncio.Queue[InboundMessage]().put)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "FEISHU_APP_SECRET" in errors[0].getMessage()
    assert "the-real-secret" not in caplog.text and APP_SECRET not in caplog.text
    assert channel.health()["feishu"]["stopped"]
    assert fake.ws.bootstraps == 0 and not fake.of("message")


async def test_stopping_ends_the_client_thread(fake: FakeFeishu) -> None:
    async with running(channel_on(fake)):
        await fake.ws.wait_connected()
        assert any(t.name == "feishu-long-connection" for t in threading.enumerate())
    started = time.monotonic()
    while any(t.name == "feishu-long-connection" for t in threading.enumerate()):
        assert time.monotonic() - started < 5, "the long-connection thread outlived the channel"
        await asyncio.sleep(0.05)
    await fake.wait_for(lambda: not fake.ws.sockets, 5)


async def test_an_event_the_stopping_channel_cannot_take_is_not_acknowledged(
    fake: FakeFeishu,
) -> None:
    taken: list[dict[str, Any]] = []

    async def stopping(payload: dict[str, Any]) -> bool:
        return False  # what the ingress answers once its task group is gone

    async def running_feed(payload: dict[str, Any]) -> bool:
        taken.append(payload)
        return True

    for feed, code in ((stopping, 500), (running_feed, 200)):
        connection = LongConnection(app_id=APP_ID, app_secret=APP_SECRET, base_url=fake.url)
        task = asyncio.create_task(connection.run(feed))
        try:
            await fake.ws.wait_connected()
            frame = await fake.ws.push(message_event("hello", message_id=f"om_{code}"))
            # 500: Feishu delivers the event again (to this process later, or another one)
            assert (await fake.ws.wait_ack(frame))["code"] == code
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
            await fake.wait_for(lambda: not fake.ws.sockets, 5)
    assert [p["event"]["message"]["message_id"] for p in taken] == ["om_200"]


# --- HTTP callbacks ---------------------------------------------------------------------------


@asynccontextmanager
async def webhook(fake: FakeFeishu) -> AsyncIterator[tuple[str, asyncio.Queue[InboundMessage]]]:
    channel = channel_on(fake, mode="webhook", encrypt_key=ENCRYPT_KEY, verification_token=TOKEN)
    app = web.Application()
    channel.install(app)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/feishu/events"
    try:
        async with running(channel) as got:
            await fake.wait_for(lambda: bool(fake.of("bot")))
            await asyncio.sleep(0.05)
            yield url, got
    finally:
        await runner.cleanup()


async def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body, headers=headers) as r,
    ):
        return r.status, await r.json()


async def test_a_signed_encrypted_event_is_taken_and_acknowledged(fake: FakeFeishu) -> None:
    async with webhook(fake) as (url, got):
        status, _ = await post(url, *signed(message_event("via http", message_id="om_h")))
        message = await next_message(got)
    assert status == 200 and message.text == "via http"


async def test_url_verification_is_answered_with_its_challenge(fake: FakeFeishu) -> None:
    challenge = {"challenge": "ch-123", "token": TOKEN, "type": "url_verification"}
    body = json.dumps({"encrypt": encrypt(json.dumps(challenge).encode(), ENCRYPT_KEY)})
    async with webhook(fake) as (url, _):
        started = time.monotonic()
        status, answer = await post(url, body.encode(), {"Content-Type": "application/json"})
        took = time.monotonic() - started
        forged = {**challenge, "token": "guess"}
        body = json.dumps({"encrypt": encrypt(json.dumps(forged).encode(), ENCRYPT_KEY)})
        refused, _ = await post(url, body.encode(), {"Content-Type": "application/json"})
    assert (status, answer) == (200, {"challenge": "ch-123"}) and took < 1.0
    assert refused == 401


def forged_cases() -> list[tuple[str, Callable[[], tuple[bytes, dict[str, str]]]]]:
    def tampered() -> tuple[bytes, dict[str, str]]:
        body, headers = signed(message_event("x"))
        return body.replace(b'"}', b'A"}'), headers

    def wrong_key() -> tuple[bytes, dict[str, str]]:
        return signed(message_event("x"), key="not-the-key")

    def stale() -> tuple[bytes, dict[str, str]]:
        return signed(message_event("x"), timestamp=time.time() - 3600)

    def unsigned() -> tuple[bytes, dict[str, str]]:
        body, headers = signed(message_event("x"))
        return body, {"Content-Type": "application/json"}

    def wrong_token() -> tuple[bytes, dict[str, str]]:
        event = message_event("x")
        event["header"]["token"] = "guess"
        return signed(event)

    def plaintext() -> tuple[bytes, dict[str, str]]:
        body = json.dumps(message_event("x")).encode()
        stamp, nonce = str(int(time.time())), "n1"
        import hashlib

        digest = hashlib.sha256((stamp + nonce + ENCRYPT_KEY).encode() + body).hexdigest()
        headers = {"X-Lark-Request-Timestamp": stamp, "X-Lark-Request-Nonce": nonce}
        return body, headers | {"X-Lark-Signature": digest}

    return [
        ("tampered", tampered),
        ("wrong_key", wrong_key),
        ("stale", stale),
        ("unsigned", unsigned),
        ("wrong_token", wrong_token),
        ("plaintext", plaintext),
    ]


@pytest.mark.parametrize(("case", "make"), forged_cases(), ids=[c for c, _ in forged_cases()])
async def test_a_forged_request_is_refused_before_anything_runs(
    fake: FakeFeishu, case: str, make: Callable[[], tuple[bytes, dict[str, str]]]
) -> None:
    async with webhook(fake) as (url, got):
        status, _ = await post(url, *make())
        await asyncio.sleep(0.2)
    assert status == 401 and got.empty(), case


async def test_a_replayed_request_is_refused(fake: FakeFeishu) -> None:
    async with webhook(fake) as (url, got):
        request = signed(message_event("once", message_id="om_r"))
        first, _ = await post(url, *request)
        again, _ = await post(url, *request)
        await next_message(got)
        await asyncio.sleep(0.2)
    assert (first, again) == (200, 401) and got.empty()


async def test_a_request_refused_while_starting_is_taken_when_delivered_again(
    fake: FakeFeishu,
) -> None:
    channel = channel_on(fake, mode="webhook", encrypt_key=ENCRYPT_KEY, verification_token=TOKEN)
    app = web.Application()
    channel.install(app)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/feishu/events"
    try:
        request = signed(message_event("early", message_id="om_early"))
        early, _ = await post(url, *request)  # the route is up, the channel not yet running
        async with running(channel) as got:
            await fake.wait_for(lambda: bool(fake.of("bot")))
            await asyncio.sleep(0.05)
            again, _ = await post(url, *request)  # Feishu's retry of the very same request
            message = await next_message(got)
    finally:
        await runner.cleanup()
    assert (early, again) == (503, 200) and message.message_id == "om_early"


async def test_messages_of_ours_in_a_thread_stay_in_it(fake: FakeFeishu) -> None:
    channel = channel_on(fake)
    async with running(channel) as got:
        await fake.ws.wait_connected()
        await fake.ws.push(
            message_event("in a topic", chat_id="oc_g", message_id="om_t1", thread_id="omt_1")
        )
        message = await next_message(got)
        # a continuation, or a background result: sent without a message to reply to
        await channel.send(message.chat, OutboundContent("more"), final=True)
    [call] = fake.of("message")
    assert call.path == "/open-apis/im/v1/messages/om_t1/reply"
    assert call.body["reply_in_thread"] is True
