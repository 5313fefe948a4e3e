"""One harness per channel for the contract test: the real channel on its real transport.

A new channel (Slack, Feishu …) joins tests/test_channel_contract.py by adding a subclass of
`ChannelHarness` to `HARNESSES`. Its `start()` builds the real channel against a local fake of
its platform (the vendor's real client over loopback) and sets:

- `channel`, `chat`: the channel and a chat to talk in;
- `reply_to`: the platform's id of a user message in that chat; `replies`: whether the platform
  shows a reply as one (else `Seen.reply_to` stays None);
- `platform_limit` and `platform_length(text)`: the most text the platform takes in one
  message, measured the way the platform measures the text it shows.

and it implements:

- `_view()`: the bot's messages in the chat as the platform holds them now, oldest first, one
  `Seen` each (a deleted message is absent); `wait_until(predicate)`: that view once
  `predicate` holds, waiting on the platform's records, never sleeping;
- `posts()`: how many new messages the platform was asked for (refused or lost ones included);
- `faults`: the `Fault`s the platform really produces, `fail_next(fault)` to have it produce one
  on the next matching call, `armed()` for the scripted ones not produced yet, and `requests()`:
  every send and edit the platform received (needed only when `faults` is not empty);
- `user_away()` if the platform can have the user away (a closed socket): inside it the user
  receives nothing; on leaving it, the user catches up as the platform allows;
- `shows_end`: whether the platform shows that a message is complete (`Seen.ended`).

and, for the file round trip, `blobs` (the store the channel fetches into and sends from),
`declares_size` (whether the platform's event says a file's size),
`user_sends_file(...)`: a user message carrying one file as the channel normalized it,
`uploads()`: the files the platform received from the bot, and `downloads()`: how many files
the bot fetched from the platform.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import re
import shutil
import tempfile
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import aiohttp
from aiogram.types import Message as TelegramMessage
from aiohttp import web

from adapters.base import Channel, ChatRef, InboundMessage
from adapters.feishu import FeishuChannel
from adapters.feishu.normalize import normalize as feishu_normalize
from adapters.feishu.render import json_size
from adapters.slack import SlackChannel
from adapters.slack.normalize import BotIdentity as SlackIdentity
from adapters.slack.normalize import message as slack_message
from adapters.telegram import TelegramChannel
from adapters.telegram.normalize import BotIdentity
from adapters.telegram.normalize import normalize as telegram_normalize
from adapters.terminal import TerminalChannel
from adapters.websocket import WebSocketChannel
from tests.blob_kit import MemoryBlobs, PlainLinks, fetched_attachments, serve_media
from tests.feishu_events import message_event as feishu_event
from tests.feishu_fake import APP_ID, APP_SECRET, BOT_OPEN_ID, MAX_CARD_BYTES, FakeFeishu
from tests.slack_events import BOT_ID, BOT_USER, TEAM
from tests.slack_events import message as slack_event
from tests.slack_fake import BOT_TOKEN, FakeSlack
from tests.telegram_fake import BOT as TELEGRAM_BOT
from tests.telegram_fake import TOKEN, FakeBotAPI


class UploadTooLarge(Exception):
    """A client upload the server refused with 413, before the message could be sent."""


Fault = Literal["rate_limited", "message_gone", "not_modified", "send_timeout", "send_garbled"]
ORIGIN = "http://127.0.0.1:8080"
MEDIA_MESSAGES = frozenset({"image", "file", "audio"})  # Feishu's message types that show a file


@dataclass(frozen=True)
class Seen:
    text: str
    reply_to: str | None = None
    ended: bool | None = None  # None where the platform shows no end (see `shows_end`)


class ChannelHarness(ABC):
    faults: ClassVar[frozenset[Fault]] = frozenset()
    replies: ClassVar[bool] = True
    shows_end: ClassVar[bool] = True
    retry_after: ClassVar[int] = 1  # what a scripted 429 asks for
    declares_size: ClassVar[bool] = True  # a file's event says its size (a download can be spared)
    channel: Channel
    chat: ChatRef
    reply_to: str | None
    platform_limit: int
    blobs: MemoryBlobs

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    def _view(self) -> list[Seen]: ...

    @abstractmethod
    async def wait_until(
        self, predicate: Callable[[list[Seen]], bool], timeout: float = 10.0
    ) -> list[Seen]: ...

    @abstractmethod
    def posts(self) -> int: ...

    async def what_the_user_sees(self) -> list[Seen]:
        """Everything sent so far, as the user holds it now."""
        return self._view()

    def platform_length(self, text: str) -> int:
        return len(text)

    def fail_next(self, fault: Fault) -> None:
        raise ValueError(f"{type(self).__name__} cannot produce {fault!r}; only {self.faults}")

    def armed(self) -> set[Fault]:
        return set()

    def requests(self) -> int:
        """Calls the platform has received: only fault scenarios read it, so a harness that
        declares `faults` must count them; one that declares none never gets here."""
        raise TypeError(f"{type(self).__name__} declares faults but does not count requests()")

    @asynccontextmanager
    async def user_away(self) -> AsyncIterator[None]:
        yield  # a platform that holds messages for the user: away or not, nothing changes

    @abstractmethod
    async def user_sends_file(
        self, data: bytes, name: str, mime_type: str, *, declared_size: int | None = None
    ) -> InboundMessage:
        """A user message with one file, as the channel made it; `declared_size`: what the
        platform's event says the file's size is, where that differs from `len(data)`."""

    voice_type = "audio/ogg"  # what the platform records voice notes in

    @abstractmethod
    async def user_sends_voice(self, data: bytes) -> InboundMessage:
        """A user message that is one voice note (`data`, in `voice_type`), sent the platform's
        own way: Telegram's `voice`, a Slack audio clip, a Feishu `audio` message, the widget's
        or the API's upload of a recording."""

    @abstractmethod
    async def uploads(self) -> list[tuple[str, bytes]]:
        """The files the platform received from the bot, oldest first: (name, bytes)."""

    @abstractmethod
    def downloads(self) -> int:
        """How many files the bot fetched from the platform."""

    async def user_sends_photo(self, data: bytes) -> InboundMessage:
        """A user message with one photo, the platform's way of sending a picture."""
        return await self.user_sends_file(data, "photo.png", "image/png")

    async def user_sends_files(
        self, files: Sequence[tuple[bytes, str, str]]
    ) -> list[InboundMessage]:
        """Several files sent at once (bytes, name, media type), as the channel made them: one
        message where the platform carries several files in one (Slack's `files[]`, the widget's
        attachments, a Feishu post's images), else one message each, as the platform sends them
        (a Telegram album is an update per file)."""
        return [await self.user_sends_file(*file) for file in files]

    async def images_shown(self) -> list[bytes]:
        """The files the bot sent that the platform shows as pictures (a photo, an image
        message, an image attachment), oldest first. Where the platform shows every file by its
        own type (Slack, a terminal's folder), every upload."""
        return [data for _, data in await self.uploads()]


class WebSocketHarness(ChannelHarness):
    """The channel on a real aiohttp server, a real aiohttp client as the user's browser."""

    def __init__(self) -> None:
        self.blobs = MemoryBlobs()
        self.channel = self.ws_channel = WebSocketChannel(
            allowed_origins=[ORIGIN], blobs=self.blobs, links=PlainLinks()
        )
        self.frames: list[dict[str, Any]] = []
        self._ready: dict[str, Any] = {}
        self._sent_files = itertools.count(1)
        self._barriers = itertools.count()
        self._last_seq = 0

    async def start(self) -> None:
        app = web.Application()
        self.ws_channel.install(app)
        serve_media(app, self.blobs)
        self._runner = web.AppRunner(app, shutdown_timeout=1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._base = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        self._url = f"{self._base}/ws"
        self._session = aiohttp.ClientSession()
        self._inbound: asyncio.Queue[InboundMessage] = asyncio.Queue()
        self._run = asyncio.create_task(self.channel.run(self._inbound.put))
        await self._connect(resume_after=None)
        await self._ws.send_json({"type": "message", "text": "hello", "client_message_id": "c1"})
        async with asyncio.timeout(5):
            said = await self._inbound.get()
        self.chat, self.reply_to = said.chat, said.message_id
        self.platform_limit = self.channel.limits_for(self.chat).max_text_length  # none of its own

    async def close(self) -> None:
        self._run.cancel()
        with suppress(asyncio.CancelledError):
            await self._run
        await self._ws.close()
        await self._session.close()
        await self._runner.cleanup()

    async def _connect(self, resume_after: int | None) -> None:
        self._ws = await self._session.ws_connect(self._url, origin=ORIGIN)
        hello = {"type": "hello", "visitor_id": "contract-visitor", "resume_after": resume_after}
        await self._ws.send_json({k: v for k, v in hello.items() if v is not None})
        while (frame := await self._receive())["type"] != "ready":
            pass
        self._ready = frame

    async def _receive(self) -> dict[str, Any]:
        async with asyncio.timeout(10):
            message = await self._ws.receive()
        assert message.type is aiohttp.WSMsgType.TEXT, (message.type, message.data)
        frame: dict[str, Any] = json.loads(message.data)
        assert frame["type"] != "error", frame  # the channel refused what the harness sent
        if frame["type"] != "ready":
            # A replay skips updates a later frame superseded, but never repeats one.
            assert frame["seq"] > self._last_seq, (frame, self._last_seq)
            self._last_seq = frame["seq"]
        if frame["type"].startswith("message."):
            self.frames.append(frame)
        return frame

    async def what_the_user_sees(self) -> list[Seen]:
        # Frames sent are not yet frames received: a marker frame behind them says when they are.
        marker = {"n": next(self._barriers)}
        await self.ws_channel.emit_event(self.chat, "contract.barrier", marker)
        while True:
            frame = await self._receive()
            if frame["type"] == "contract.barrier" and frame["n"] == marker["n"]:
                return self._view()

    async def wait_until(
        self, predicate: Callable[[list[Seen]], bool], timeout: float = 10.0
    ) -> list[Seen]:
        async with asyncio.timeout(timeout):
            while not predicate(view := self._view()):
                await self._receive()
        return view

    def _view(self) -> list[Seen]:
        shown: dict[str, Seen] = {}
        for frame in self.frames:
            kind, message_id = frame["type"], frame["message_id"]
            if kind == "message.created":
                shown[message_id] = Seen(frame["text"], frame["reply_to"], ended=False)
            elif kind in ("message.updated", "message.completed"):
                before = shown[message_id]
                ended = before.ended or kind == "message.completed"
                shown[message_id] = Seen(frame["text"], before.reply_to, ended)
        return list(shown.values())

    def posts(self) -> int:
        return sum(frame["type"] == "message.created" for frame in self.frames)

    @asynccontextmanager
    async def user_away(self) -> AsyncIterator[None]:
        await self.what_the_user_sees()
        await self._ws.close()
        yield
        await self._connect(resume_after=self._last_seq)  # the replay follows `ready`

    async def user_sends_file(
        self, data: bytes, name: str, mime_type: str, *, declared_size: int | None = None
    ) -> InboundMessage:
        """The widget's way: the upload route with `ready`'s token, then a `message`."""
        upload = self._ready["upload"]
        form = aiohttp.FormData()
        form.add_field("file", data, filename=name, content_type=mime_type)
        headers = {"Authorization": f"Bearer {upload['token']}", "Origin": ORIGIN}
        url = self._base + upload["url"]
        async with self._session.post(url, data=form, headers=headers) as response:
            if response.status == 413:
                raise UploadTooLarge(await response.text())
            assert response.status == 201, await response.text()
            attachment = (await response.json())["attachment"]
        return await self._send_attachments([attachment])

    async def _upload(self, data: bytes, name: str, mime_type: str) -> dict[str, Any]:
        upload = self._ready["upload"]
        form = aiohttp.FormData()
        form.add_field("file", data, filename=name, content_type=mime_type)
        headers = {"Authorization": f"Bearer {upload['token']}", "Origin": ORIGIN}
        async with self._session.post(self._base + upload["url"], data=form, headers=headers) as r:
            assert r.status == 201, await r.text()
            attachment: dict[str, Any] = (await r.json())["attachment"]
            return attachment

    async def _send_attachments(self, attachments: list[dict[str, Any]]) -> InboundMessage:
        cmid = f"file-{next(self._sent_files)}"
        frame = {"type": "message", "attachments": attachments, "client_message_id": cmid}
        await self._ws.send_json(frame)
        async with asyncio.timeout(5):
            return await self._inbound.get()

    async def user_sends_files(
        self, files: Sequence[tuple[bytes, str, str]]
    ) -> list[InboundMessage]:
        attachments = [await self._upload(*file) for file in files]
        return [await self._send_attachments(attachments)]

    async def images_shown(self) -> list[bytes]:
        await self.what_the_user_sees()
        images = [
            {
                **frame,
                "attachments": [a for a in frame.get("attachments", []) if a["type"] == "image"],
            }
            for frame in self.frames
        ]
        return [data for _, data in await fetched_attachments(self._session, self._base, images)]

    voice_type = "audio/webm"  # what a browser's MediaRecorder makes (the widget's mic)

    async def user_sends_voice(self, data: bytes) -> InboundMessage:
        return await self.user_sends_file(data, "recording.webm", self.voice_type)

    async def uploads(self) -> list[tuple[str, bytes]]:
        await self.what_the_user_sees()
        return await fetched_attachments(self._session, self._base, self.frames)

    def downloads(self) -> int:
        return 0  # the client uploads; nothing is fetched from a platform


class TelegramHarness(ChannelHarness):
    """The real aiogram client against the fake Bot API on a loopback socket.

    The channel's receiving side is not run: sending needs none of it, and its "typing…" status
    would take the chat's call slot at moments of its own, so a scenario's edit could meet a
    (legitimate) `RateLimited` by chance. Edit intervals are 0 for the same reason.
    """

    faults = frozenset(
        {"rate_limited", "message_gone", "not_modified", "send_timeout", "send_garbled"}
    )
    shows_end = False  # a message looks the same before and after its final edit
    CHAT_ID = 42
    TIMEOUT_S = 1.0  # a send the fake never answers fails after this long

    def __init__(self) -> None:
        self.fake = FakeBotAPI(interval_s=0)
        self.blobs = MemoryBlobs()
        self._429s_at_arming: int | None = None

    async def start(self) -> None:
        await self.fake.start()
        self.channel = self.telegram = TelegramChannel(
            token=TOKEN,
            api_base=self.fake.url,
            private_edit_interval_s=0,
            group_edit_interval_s=0,
            request_timeout_s=self.TIMEOUT_S,
        )
        self.chat = ChatRef(self.channel.name, str(self.CHAT_ID))
        said = self.fake.message(self.CHAT_ID, "hello")["message"]
        self.reply_to = str(said["message_id"])
        self.platform_limit = 4096

    async def close(self) -> None:
        await self.telegram.aclose()
        await self.fake.close()

    def _view(self) -> list[Seen]:
        seen = []
        for call in self.fake.ok(self.CHAT_ID, "sendMessage"):
            text = self.fake.messages.get((self.CHAT_ID, call.message_id or 0))
            reply = call.params.get("reply_parameters", {}).get("message_id")
            if text is not None:
                seen.append(Seen(text, None if reply is None else str(reply)))
        return seen

    async def wait_until(
        self, predicate: Callable[[list[Seen]], bool], timeout: float = 10.0
    ) -> list[Seen]:
        await self.fake.wait_for(lambda: predicate(self._view()), timeout)
        return self._view()

    def posts(self) -> int:
        return len(self.fake.to_chat(self.CHAT_ID, "sendMessage"))

    def requests(self) -> int:
        return len(self.fake.to_chat(self.CHAT_ID, "sendMessage", "editMessageText"))

    def platform_length(self, text: str) -> int:
        return len(text.encode("utf-16-le")) // 2

    async def user_sends_file(
        self, data: bytes, name: str, mime_type: str, *, declared_size: int | None = None
    ) -> InboundMessage:
        file_id = self.fake.add_file(data, f"documents/{name}")
        document = {
            "file_id": file_id,
            "file_unique_id": file_id,
            "file_name": name,
            "mime_type": mime_type,
            "file_size": len(data) if declared_size is None else declared_size,
        }
        update = self.fake.message(self.CHAT_ID, None, document=document, caption="a file")
        message = TelegramMessage.model_validate(update["message"])
        me = BotIdentity(TELEGRAM_BOT["id"], TELEGRAM_BOT["username"])
        made = telegram_normalize(message, update["update_id"], me)
        assert isinstance(made, InboundMessage), made
        return made

    async def user_sends_photo(self, data: bytes) -> InboundMessage:
        file_id = self.fake.add_file(data, "photos/file_1.jpg")
        sizes = [
            {"file_id": file_id, "file_unique_id": file_id, "width": 8, "height": 8}
            | {"file_size": len(data)}
        ]
        update = self.fake.message(self.CHAT_ID, None, photo=sizes, caption="a photo")
        message = TelegramMessage.model_validate(update["message"])
        me = BotIdentity(TELEGRAM_BOT["id"], TELEGRAM_BOT["username"])
        made = telegram_normalize(message, update["update_id"], me)
        assert isinstance(made, InboundMessage), made
        return made

    async def user_sends_voice(self, data: bytes) -> InboundMessage:
        file_id = self.fake.add_file(data, "voice/file_7.oga")
        voice = {"file_id": file_id, "file_unique_id": file_id, "duration": 2}
        voice |= {"mime_type": self.voice_type, "file_size": len(data)}
        update = self.fake.message(self.CHAT_ID, None, voice=voice)
        message = TelegramMessage.model_validate(update["message"])
        me = BotIdentity(TELEGRAM_BOT["id"], TELEGRAM_BOT["username"])
        made = telegram_normalize(message, update["update_id"], me)
        assert isinstance(made, InboundMessage), made
        return made

    async def images_shown(self) -> list[bytes]:
        return [
            u.data
            for u in self.fake.uploads
            if u.chat_id == self.CHAT_ID and u.method == "sendphoto"
        ]

    async def uploads(self) -> list[tuple[str, bytes]]:
        return [(u.name, u.data) for u in self.fake.uploads if u.chat_id == self.CHAT_ID]

    def downloads(self) -> int:
        return len(self.fake.downloads)

    def fail_next(self, fault: Fault) -> None:
        fake = self.fake
        match fault:
            case "rate_limited":
                fake.force_429(self.CHAT_ID, self.retry_after)
                self._429s_at_arming = len(fake.rate_limited)
            case "message_gone":
                fake.gone_next += 1
            case "not_modified":
                fake.not_modified_next += 1
            case "send_timeout":
                fake.hang_answer_next["sendmessage"] = 1
            case "send_garbled":
                fake.garble_answer_next["sendmessage"] = 1

    def armed(self) -> set[Fault]:
        fake, drawn_429 = self.fake, self._429s_at_arming
        left: dict[Fault, object] = {
            "rate_limited": drawn_429 is not None and len(fake.rate_limited) == drawn_429,
            "message_gone": fake.gone_next,
            "not_modified": fake.not_modified_next,
            "send_timeout": fake.hang_answer_next.get("sendmessage"),
            "send_garbled": fake.garble_answer_next.get("sendmessage"),
        }
        return {fault for fault, pending in left.items() if pending}


class SlackHarness(ChannelHarness):
    """The real slack_sdk client against the fake Slack, answering in a thread of a channel.

    As for Telegram, the receiving side is not run, and the workspace budget is set far above
    the scenarios' pace (the fake's limits too), so an edit never meets a `RateLimited` by chance.
    """

    faults = frozenset({"rate_limited", "message_gone", "send_timeout", "send_garbled"})
    shows_end = False  # a message looks the same before and after its final update
    CHANNEL = "C1"
    THREAD = "1699999999.000100"  # the user's message the bot was mentioned in
    TIMEOUT_S = 1.0

    def __init__(self) -> None:
        self.fake = FakeSlack(updates_per_minute=60_000, posts_per_second=1000, post_burst=100)
        self.blobs = MemoryBlobs()

    async def start(self) -> None:
        await self.fake.start()
        self.channel = self.slack = SlackChannel(
            bot_token=BOT_TOKEN,
            api_base=self.fake.url,
            updates_per_minute=30_000,
            edit_interval_s=0,
            request_timeout_s=self.TIMEOUT_S,
        )
        self.chat = ChatRef(self.channel.name, self.CHANNEL, self.THREAD, team_id="T1")
        self.reply_to = self.THREAD
        self.platform_limit = 4000  # bytes of text

    async def close(self) -> None:
        await self.slack.aclose()
        await self.fake.close()

    def _view(self) -> list[Seen]:
        return [Seen(m.text, m.thread_ts) for m in self.fake.bot_messages(self.CHANNEL)]

    async def wait_until(
        self, predicate: Callable[[list[Seen]], bool], timeout: float = 10.0
    ) -> list[Seen]:
        await self.fake.wait_for(lambda: predicate(self._view()), timeout)
        return self._view()

    def posts(self) -> int:
        return len(self.fake.called("chat.postMessage"))

    def requests(self) -> int:
        return len(self.fake.called("chat.postMessage", "chat.update"))

    def platform_length(self, text: str) -> int:
        return len(text.encode())

    async def user_sends_file(
        self, data: bytes, name: str, mime_type: str, *, declared_size: int | None = None
    ) -> InboundMessage:
        shared = self.fake.add_file(data, name, mime_type)
        if declared_size is not None:
            shared["size"] = declared_size
        event = slack_event("a file", thread_ts=self.THREAD, subtype="file_share", files=[shared])
        me = SlackIdentity(BOT_USER, BOT_ID, TEAM)
        made = slack_message(event, TEAM, me, lambda channel, thread: True)
        assert made is not None
        return made

    async def user_sends_files(
        self, files: Sequence[tuple[bytes, str, str]]
    ) -> list[InboundMessage]:
        shared = [self.fake.add_file(*file) for file in files]
        event = slack_event("files", thread_ts=self.THREAD, subtype="file_share", files=shared)
        me = SlackIdentity(BOT_USER, BOT_ID, TEAM)
        made = slack_message(event, TEAM, me, lambda channel, thread: True)
        assert made is not None
        return [made]

    voice_type = "audio/webm"  # a clip recorded in Slack's composer

    async def user_sends_voice(self, data: bytes) -> InboundMessage:
        clip = self.fake.add_file(data, "audio_message.webm", self.voice_type)
        clip |= {"subtype": "slack_audio", "filetype": "webm"}
        event = slack_event("", thread_ts=self.THREAD, subtype="file_share", files=[clip])
        me = SlackIdentity(BOT_USER, BOT_ID, TEAM)
        made = slack_message(event, TEAM, me, lambda channel, thread: True)
        assert made is not None
        return made

    async def uploads(self) -> list[tuple[str, bytes]]:
        return [
            (u.name, u.data)
            for u in self.fake.uploads
            if u.channel == self.CHANNEL and u.thread_ts == self.THREAD
        ]

    def downloads(self) -> int:
        return len(self.fake.downloads)

    def fail_next(self, fault: Fault) -> None:
        fake = self.fake
        match fault:
            case "rate_limited":
                fake.limit_next["chat.*"] = self.retry_after
            case "message_gone":
                fake.gone_next += 1
            case "send_timeout":
                fake.hang_next["chat.postMessage"] = 1
            case "send_garbled":
                fake.garble_next["chat.postMessage"] = 1
            case _:
                super().fail_next(fault)

    def armed(self) -> set[Fault]:
        fake = self.fake
        left: dict[Fault, object] = {
            "rate_limited": fake.limit_next.get("chat.*"),
            "message_gone": fake.gone_next,
            "send_timeout": fake.hang_next.get("chat.postMessage"),
            "send_garbled": fake.garble_next.get("chat.postMessage"),
        }
        return {fault for fault, pending in left.items() if pending}


class FeishuHarness(ChannelHarness):
    """The real lark-oapi client against the fake Open API; answers are CardKit streaming cards.

    A message's text is its card's answer element (card markdown, as the platform holds it);
    a card has ended when its streaming mode is off. Receiving is not run (sending needs none
    of it); card updates are spaced only by CardKit's 10 a second per card, and sends to the
    chat by Feishu's 5 a second (the fake holds them to both).
    """

    faults = frozenset({"rate_limited", "send_timeout", "send_garbled"})
    declares_size = False
    STREAMING: Literal["card", "text"] = "card"
    CHAT_ID = "oc_contract"
    TIMEOUT_S = 1.0

    def __init__(self) -> None:
        self.fake = FakeFeishu()
        self.blobs = MemoryBlobs()
        self._429s_at_arming: int | None = None

    async def start(self) -> None:
        await self.fake.start()
        self.channel = FeishuChannel(
            app_id=APP_ID,
            app_secret=APP_SECRET,
            domain=self.fake.url,
            streaming=self.STREAMING,
            card_update_interval_s=0,
            text_edit_interval_s=0,
            request_timeout_s=self.TIMEOUT_S,
        )
        self.chat = ChatRef(self.channel.name, self.CHAT_ID)
        self.reply_to = self.fake.user_message(self.CHAT_ID, "hello")
        self.platform_limit = MAX_CARD_BYTES - 300  # the card's own JSON takes the rest

    async def close(self) -> None:
        await self.fake.close()

    def _view(self) -> list[Seen]:
        fake = self.fake
        return [
            Seen(fake.text_of(m), m.parent_id or None, ended=not fake.streaming(m))
            for m in fake.bot_messages(self.CHAT_ID)
            if m.msg_type not in MEDIA_MESSAGES  # files: `uploads()`, not text
        ]

    async def wait_until(
        self, predicate: Callable[[list[Seen]], bool], timeout: float = 10.0
    ) -> list[Seen]:
        await self.fake.wait_for(lambda: predicate(self._view()), timeout)
        return self._view()

    def posts(self) -> int:
        return len(self.fake.of("message"))

    def requests(self) -> int:
        return len(self.fake.of("message", "edit", "patch", "content", "settings", "card_update"))

    def platform_length(self, text: str) -> int:
        return json_size(text)

    async def user_sends_file(
        self, data: bytes, name: str, mime_type: str, *, declared_size: int | None = None
    ) -> InboundMessage:
        # Feishu's events declare no size: the download's length is all there is, and a wrong
        # declared size is played as a download that says none
        self.fake.chunked = declared_size is not None
        message_id = self.fake.user_file(self.CHAT_ID, data, name)
        content = {"file_key": f"file_{message_id}", "file_name": name}
        event = feishu_event(
            chat_id=self.CHAT_ID, message_id=message_id, kind="file", content=content
        )
        made = feishu_normalize(event, BOT_OPEN_ID)
        assert isinstance(made, InboundMessage), made
        return made

    async def user_sends_photo(self, data: bytes) -> InboundMessage:
        message_id = self.fake.user_file(self.CHAT_ID, data, "photo.png", kind="image")
        content = {"image_key": f"img_{message_id}"}
        event = feishu_event(
            chat_id=self.CHAT_ID, message_id=message_id, kind="image", content=content
        )
        made = feishu_normalize(event, BOT_OPEN_ID)
        assert isinstance(made, InboundMessage), made
        return made

    async def user_sends_voice(self, data: bytes) -> InboundMessage:
        """An `audio` message: its content names the file and its length, not a name or type."""
        message_id = self.fake.user_file(self.CHAT_ID, data, "", kind="audio")
        content = {"file_key": f"file_{message_id}", "duration": 2000}
        event = feishu_event(
            chat_id=self.CHAT_ID, message_id=message_id, kind="audio", content=content
        )
        made = feishu_normalize(event, BOT_OPEN_ID)
        assert isinstance(made, InboundMessage), made
        return made

    async def user_sends_files(
        self, files: Sequence[tuple[bytes, str, str]]
    ) -> list[InboundMessage]:
        """Images: one post that shows them all (a file cannot go in a post: one message each)."""
        if not all(mime.startswith("image/") for _, _, mime in files):
            return await super().user_sends_files(files)
        message_id = self.fake.user_file(self.CHAT_ID, files[0][0], files[0][1], kind="image")
        keys = [f"img_{message_id}"]
        for number, (data, name, _) in enumerate(files[1:], 1):
            keys.append(f"img_{message_id}_{number}")
            self.fake.resources[(message_id, keys[-1])] = (name, data)
        rows = [[{"tag": "text", "text": "these"}]] + [
            [{"tag": "img", "image_key": key}] for key in keys
        ]
        event = feishu_event(
            chat_id=self.CHAT_ID,
            message_id=message_id,
            kind="post",
            content={"title": "", "content": rows},
        )
        made = feishu_normalize(event, BOT_OPEN_ID)
        assert isinstance(made, InboundMessage), made
        return [made]

    async def images_shown(self) -> list[bytes]:
        shown = []
        for message in self.fake.bot_messages(self.CHAT_ID):
            if message.msg_type == "image":
                shown.append(self.fake.uploaded[json.loads(message.content)["image_key"]][1])
        return shown

    async def uploads(self) -> list[tuple[str, bytes]]:
        return self.fake.uploads(self.CHAT_ID)

    def downloads(self) -> int:
        return len(self.fake.downloads)

    def fail_next(self, fault: Fault) -> None:
        fake = self.fake
        match fault:
            case "rate_limited":
                fake.retry_after = self.retry_after
                fake.force_429["any"] += 1
            case "send_timeout":
                fake.hang_next["message"] += 1
            case "send_garbled":
                fake.garble_next["message"] += 1
            case "message_gone" if "message_gone" in self.faults:
                fake.gone_next += 1
            case _:
                super().fail_next(fault)

    def armed(self) -> set[Fault]:
        left: dict[Fault, object] = {
            "message_gone": self.fake.gone_next,
            "rate_limited": self.fake.force_429["any"],
            "send_timeout": self.fake.hang_next["message"],
            "send_garbled": self.fake.garble_next["message"],
        }
        return {fault for fault, pending in left.items() if pending}


class FeishuTextHarness(FeishuHarness):
    """The text fallback (`streaming: text`): `post` messages edited with `PUT`, which Feishu
    allows 20 times a message; a recalled message is gone. Nothing shows that a message ended."""

    faults = frozenset({"rate_limited", "send_timeout", "send_garbled", "message_gone"})
    STREAMING = "text"
    shows_end = False

    def _view(self) -> list[Seen]:
        fake = self.fake
        return [
            Seen(fake.text_of(m), m.parent_id or None)
            for m in fake.bot_messages(self.CHAT_ID)
            if m.msg_type not in MEDIA_MESSAGES
        ]


class Screen(io.StringIO):
    """A terminal window: it says it is one, so the channel redraws a replaced line in place."""

    CONTROL = re.compile(r"(\r|\n|\x1b\[K)")

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        written = super().write(text)
        self.changed.set()
        return written

    def lines(self) -> list[str]:
        """The lines on screen: carriage return and erase-to-end-of-line applied."""
        lines, column = [""], 0
        for token in self.CONTROL.split(self.getvalue()):
            if token == "\n":
                lines.append("")
                column = 0
            elif token == "\r":
                column = 0
            elif token == "\x1b[K":
                lines[-1] = lines[-1][:column]
            elif token:
                line = lines[-1]
                lines[-1] = line[:column] + token + line[column + len(token) :]
                column += len(token)
        return lines


class TerminalHarness(ChannelHarness):
    """The channel writing to a screen; a message is the text after `bot> ` up to the next one."""

    replies = False
    PROMPT = "bot> "

    def __init__(self) -> None:
        self.screen = Screen()
        self.blobs = MemoryBlobs()
        self._folder = Path(tempfile.mkdtemp(prefix="terminal-harness-"))

    async def start(self) -> None:
        self.channel = self.terminal = TerminalChannel(
            stdin=io.StringIO(), stdout=self.screen, files_dir=self._folder / "received"
        )
        self.chat = self.channel.chat
        self.reply_to = uuid.uuid4().hex  # what the channel gives a typed line
        self.platform_limit = self.channel.limits_for(self.chat).max_text_length  # a screen: none

    async def close(self) -> None:
        self.screen.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    async def user_sends_file(
        self, data: bytes, name: str, mime_type: str, *, declared_size: int | None = None
    ) -> InboundMessage:
        """`/file PATH` typed at the prompt (the size is the file's own: it cannot lie)."""
        path = self._folder / "sent" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        return self.terminal.typed(f"/file {path}")

    async def user_sends_voice(self, data: bytes) -> InboundMessage:
        return await self.user_sends_file(data, "memo.ogg", self.voice_type)

    async def uploads(self) -> list[tuple[str, bytes]]:
        received = self._folder / "received"
        files = sorted(received.iterdir()) if received.exists() else []
        return [(file.name, file.read_bytes()) for file in files]

    def downloads(self) -> int:
        return self.terminal.files_read

    def _view(self) -> list[Seen]:
        *lines, cursor_line = self.screen.lines()
        if cursor_line:  # the last message is still open: the cursor stands at its end
            lines.append(cursor_line)
        messages: list[list[str]] = []
        for line in lines:
            if line.startswith(self.PROMPT):
                messages.append([line.removeprefix(self.PROMPT)])
            elif messages:
                messages[-1].append(line)
        return [
            Seen("\n".join(body), ended=not cursor_line or index < len(messages) - 1)
            for index, body in enumerate(messages)
        ]

    async def wait_until(
        self, predicate: Callable[[list[Seen]], bool], timeout: float = 10.0
    ) -> list[Seen]:
        async with asyncio.timeout(timeout):
            while not predicate(view := self._view()):
                self.screen.changed.clear()
                await self.screen.changed.wait()
        return view

    def posts(self) -> int:
        return len(self._view())


def _api() -> ChannelHarness:
    from tests.api_harness import ApiHarness  # it builds on this module

    return ApiHarness()


HARNESSES: dict[str, Callable[[], ChannelHarness]] = {
    "api": _api,
    "websocket": WebSocketHarness,
    "telegram": TelegramHarness,
    "slack": SlackHarness,
    "feishu": FeishuHarness,
    "feishu_text": FeishuTextHarness,
    "terminal": TerminalHarness,
}
