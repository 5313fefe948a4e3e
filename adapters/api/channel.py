"""The sessions API channel: replies become session events (the web socket's frames) and records."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from adapters.api.base import PREFIX, ApiSettings, hub_key
from adapters.api.errors import middleware
from adapters.api.handlers import SessionsApi
from adapters.api.keys import KeyRing
from adapters.api.records import ApiMessage, MemorySessionRecords, SessionRecords
from adapters.api.slots import StreamSlots
from adapters.api.sse import SseSubscriber
from adapters.base import (
    BlobLinks,
    ChannelError,
    ChannelLimits,
    ChatRef,
    InboundMessage,
    Inbox,
    MessageHandle,
    OutboundContent,
)
from adapters.hub import EventHub, MemoryEventHub
from adapters.rates import InboundRates, LocalInboundRates
from adapters.uploads import UploadSigner, rendered
from adapters.websocket.protocol import new_id
from content.blobs import BlobStore
from content.parts import MediaPart, Part

log = logging.getLogger(__name__)

_LIMITS = ChannelLimits(
    max_text_length=100_000,
    min_edit_interval_s=0.05,
    can_edit=True,
    final_marker=True,
    parts_inline=True,
    refuses_in_protocol=True,
)


class ApiChannel:
    """Sites and apps with their own UI, and servers: REST + SSE under /api/v1 (see the README)."""

    name = "api"

    def __init__(
        self,
        *,
        keys: KeyRing,
        settings: ApiSettings | None = None,
        records: SessionRecords | None = None,
        hub: EventHub | None = None,
        replay_events: int = 200,
        rates: InboundRates | None = None,
        blobs: BlobStore | None = None,
        links: BlobLinks | None = None,
        uploads: UploadSigner | None = None,
        public_url: str | None = None,
    ) -> None:
        """With `blobs` and `links`, sessions may upload files (`POST …/files`) and attach them,
        and parts go out as signed links (absolute under `public_url`)."""
        self.keys = keys
        self.blobs = blobs if links is not None else None
        self.links = links
        self.uploads = uploads or UploadSigner()
        self._base_url = public_url or ""
        self.settings = settings or ApiSettings()
        self.records: SessionRecords = records if records is not None else MemorySessionRecords()
        self.hub: EventHub = hub if hub is not None else MemoryEventHub(replay_events=replay_events)
        # Messages per session a minute, counted by every process if `rates` is networked.
        self.rates: InboundRates = rates if rates is not None else LocalInboundRates()
        self._inbox: Inbox | None = None
        self._inbox_ready = asyncio.Event()
        self.streams: set[SseSubscriber] = set()  # open event streams, ended at shutdown
        self.slots = StreamSlots(self.settings.max_streams_per_key, self.settings.max_streams)

    def platform_down(self) -> str | None:
        return None  # no platform: the clients come to the gateway's own web server

    def health(self) -> dict[str, int]:
        return {"api_streams": len(self.streams)}

    def install(self, app: web.Application) -> None:
        app.middlewares.append(middleware(PREFIX))
        SessionsApi(self).add_routes(app.router)
        app.on_shutdown.append(self._end_streams)

    async def run(self, inbox: Inbox) -> None:
        """Hand inbound messages to `inbox` until cancelled; requests arrive through the web app."""
        self._inbox = inbox
        self._inbox_ready.set()
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            self._inbox = None
            self._inbox_ready.clear()

    async def deliver(self, message: InboundMessage) -> None:
        """To the gateway; a request that came before the app started `run` waits for it."""
        inbox = self._inbox
        while inbox is None:
            await self._inbox_ready.wait()
            inbox = self._inbox
        await inbox(message)

    def limits_for(self, chat: ChatRef) -> ChannelLimits:
        return _LIMITS

    async def send(
        self,
        chat: ChatRef,
        content: OutboundContent,
        *,
        reply_to: str | None = None,
        final: bool = False,
        recipient: str | None = None,
    ) -> MessageHandle:
        handle = self.reserve(chat, reply_to)
        await self.post(handle, content)
        if final:
            await self._complete(handle, content)
        return handle

    def reserve(self, chat: ChatRef, reply_to: str | None) -> MessageHandle:
        return MessageHandle(chat=chat, message_id=new_id("m_"), data={"reply_to": reply_to})

    async def post(self, handle: MessageHandle, content: OutboundContent) -> None:
        chat, reply_to = handle.chat, handle.data.get("reply_to")
        fields = {"message_id": handle.message_id, "reply_to": reply_to, "text": content.text}
        await self.hub.publish(hub_key(chat.chat_id), "message.created", fields)
        pending = ApiMessage(
            chat.chat_id, handle.message_id, "assistant", content.text, "pending", reply_to
        )
        await self._record(pending)

    async def edit(
        self, handle: MessageHandle, content: OutboundContent, *, final: bool = False
    ) -> None:
        if final:
            await self._complete(handle, content)
        else:
            fields = {"message_id": handle.message_id, "text": content.text}
            await self.hub.publish(hub_key(handle.chat.chat_id), "message.updated", fields)

    async def send_part(
        self,
        chat: ChatRef,
        part: MediaPart,
        blobs: BlobStore,
        *,
        caption: str | None = None,
        reply_to: str | None = None,
    ) -> MessageHandle:
        """A message of its own: the caption as its text, the part as a signed link."""
        if self.links is None:
            raise ChannelError("the sessions API has no blob links to send files with")
        return await self.send(
            chat, OutboundContent(caption or "", parts=(part,)), reply_to=reply_to, final=True
        )

    def attachments(self, parts: Sequence[Part]) -> list[dict[str, Any]]:
        """Parts as events and the history show them, with signed links made now (none
        without links)."""
        return [] if self.links is None else rendered(parts, self.links, self._base_url)

    async def emit_event(self, chat: ChatRef, type: str, fields: Mapping[str, Any]) -> None:
        await self.hub.publish(hub_key(chat.chat_id), type, fields)

    async def _complete(self, handle: MessageHandle, content: OutboundContent) -> None:
        display = [dict(hint) for hint in content.display]
        fields: dict[str, Any] = {"message_id": handle.message_id, "text": content.text}
        fields["display"] = display
        if content.stopped:  # the text kept, its last paragraph the mark: shown as stopped
            fields["stopped"] = True
        if content.parts and self.links is not None:
            fields["attachments"] = self.attachments(content.parts)
        # Recorded first: a client that sees the completion and then reads the history finds it.
        done = ApiMessage(
            handle.chat.chat_id,
            handle.message_id,
            "assistant",
            content.text,
            "stopped" if content.stopped else "completed",
            display=content.display,
            parts=content.parts,  # the history shows them, with links made when it is read
        )
        await self._record(done)
        await self.hub.publish(hub_key(handle.chat.chat_id), "message.completed", fields)

    async def _record(self, message: ApiMessage) -> None:
        # The live answer matters more than its copy in the history: a failed write is logged.
        try:
            await self.records.add_api_message(message)
        except Exception:
            log.exception(
                "api session %s: recording message %s failed",
                message.session_id,
                message.message_id,
            )

    async def _end_streams(self, app: web.Application) -> None:
        for subscriber in list(self.streams):
            subscriber.end()
