"""The sessions API channel for the channel contract: a real server, the user an SSE follower."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import aiohttp
from aiohttp import web

from adapters.api.channel import ApiChannel
from adapters.api.keys import KeyRing, hash_key
from adapters.base import InboundMessage
from tests.api_kit import KEY_A, Event, read_events
from tests.blob_kit import MemoryBlobs, PlainLinks, fetched_attachments, serve_media
from tests.channel_harness import ChannelHarness, Seen, UploadTooLarge


class ApiHarness(ChannelHarness):
    """The user follows `GET …/events`; the first message is posted with `POST …/messages`."""

    def __init__(self) -> None:
        self.blobs = MemoryBlobs()
        self.channel = self.api_channel = ApiChannel(
            keys=KeyRing([("a", hash_key(KEY_A))]), blobs=self.blobs, links=PlainLinks()
        )
        self.frames: list[dict[str, Any]] = []
        self._posting: list[asyncio.Task[None]] = []
        self._sent_files = itertools.count(1)
        self._barriers = itertools.count()
        self._last_seq = 0

    async def start(self) -> None:
        app = web.Application()
        self.api_channel.install(app)
        serve_media(app, self.blobs)
        self._runner = web.AppRunner(app, shutdown_timeout=1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._origin = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        base = f"{self._origin}/api/v1"
        self._http = aiohttp.ClientSession(headers={"Authorization": f"Bearer {KEY_A}"})
        async with self._http.post(f"{base}/sessions") as created:
            self._session_url = f"{base}/sessions/{(await created.json())['id']}"
        self._inbound: asyncio.Queue[InboundMessage] = asyncio.Queue()
        self._run = asyncio.create_task(self.channel.run(self._inbound.put))
        await self._follow(None)
        body = {"text": "hello", "client_message_id": "c1"}
        # its stream stays open until the harness closes: the answer is read from the follower
        self._asking = asyncio.create_task(self._post(body))
        async with asyncio.timeout(5):
            said = await self._inbound.get()
        self.chat, self.reply_to = said.chat, said.message_id
        self.platform_limit = self.channel.limits_for(self.chat).max_text_length

    async def _post(self, body: dict[str, Any]) -> None:
        async with self._http.post(f"{self._session_url}/messages", json=body) as response:
            assert response.status == 200, await response.text()
            await response.read()

    async def _follow(self, after: int | None) -> None:
        headers = {} if after is None else {"Last-Event-ID": str(after)}
        self._response = await self._http.get(f"{self._session_url}/events", headers=headers)
        assert self._response.status == 200, await self._response.text()
        self._events = read_events(self._response)

    async def close(self) -> None:
        for task in (self._run, self._asking, *self._posting):
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
        self._response.close()
        await self._http.close()
        await self._runner.cleanup()

    async def _receive(self) -> dict[str, Any]:
        async with asyncio.timeout(10):
            item: Event | None = None
            while item is None:  # comments are keepalives
                item = await anext(self._events)
        frame = item.data
        assert item.id == frame["seq"] > self._last_seq, (frame, self._last_seq)
        self._last_seq = frame["seq"]
        if frame["type"].startswith("message."):
            self.frames.append(frame)
        return frame

    async def what_the_user_sees(self) -> list[Seen]:
        marker = {"n": next(self._barriers)}
        await self.api_channel.emit_event(self.chat, "contract.barrier", marker)
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
            else:
                before = shown[message_id]
                ended = before.ended or kind == "message.completed"
                shown[message_id] = Seen(frame["text"], before.reply_to, ended)
        return list(shown.values())

    def posts(self) -> int:
        return sum(frame["type"] == "message.created" for frame in self.frames)

    @asynccontextmanager
    async def user_away(self) -> AsyncIterator[None]:
        await self.what_the_user_sees()
        self._response.close()
        yield
        await self._follow(self._last_seq)

    async def user_sends_file(
        self, data: bytes, name: str, mime_type: str, *, declared_size: int | None = None
    ) -> InboundMessage:
        """`POST …/files`, then a message with the attachment the upload answered."""
        form = aiohttp.FormData()
        form.add_field("file", data, filename=name, content_type=mime_type)
        async with self._http.post(f"{self._session_url}/files", data=form) as response:
            if response.status == 413:
                raise UploadTooLarge(await response.text())
            assert response.status == 201, await response.text()
            attachment = (await response.json())["attachment"]
        body = {"attachments": [attachment], "client_message_id": f"f{next(self._sent_files)}"}
        self._posting.append(asyncio.create_task(self._post(body)))
        async with asyncio.timeout(5):
            return await self._inbound.get()

    async def user_sends_voice(self, data: bytes) -> InboundMessage:
        return await self.user_sends_file(data, "voice-memo.ogg", self.voice_type)

    async def uploads(self) -> list[tuple[str, bytes]]:
        await self.what_the_user_sees()
        return await fetched_attachments(self._http, self._origin, self.frames)

    def downloads(self) -> int:
        return 0  # the client uploads; nothing is fetched from a platform
