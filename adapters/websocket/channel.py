"""The web socket channel: the socket endpoint, the demo page and widget, and replies as frames.

The channel is the outbound half (a reply published as frames to every socket of its
conversation, through the hub) and the wiring; a socket's own life, from admission to its last
frame, is `endpoint.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

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
from adapters.history import Claims, ConversationHistory
from adapters.hub import EventHub, MemoryEventHub
from adapters.rates import InboundRates, LocalInboundRates
from adapters.uploads import UploadSigner
from adapters.websocket import accept_errors
from adapters.websocket.admission import Admission
from adapters.websocket.endpoint import SocketEndpoint
from adapters.websocket.files import WidgetFiles
from adapters.websocket.protocol import new_id, now_stamp
from adapters.websocket.static import add_page_routes
from adapters.websocket.transcript import UserEcho
from content.blobs import BlobStore
from content.parts import MediaPart

_LIMITS = ChannelLimits(
    max_text_length=100_000,
    min_edit_interval_s=0.05,
    can_edit=True,
    final_marker=True,
    parts_inline=True,
    refuses_in_protocol=True,
)
# A conversation quiet this long, no answer open, keeps no replay frames in memory (its tabs,
# open or not, resume from the stored transcript): adapters/hub/local.py.
REPLAY_IDLE_S = 120.0


class WebSocketChannel:
    """Browsers (the widget) and third-party clients; the protocol is docs/websocket-protocol.md."""

    name = "websocket"

    def __init__(
        self,
        *,
        path: str = "/ws",
        allowed_origins: Sequence[str],
        max_frame_bytes: int = 65536,
        heartbeat_s: float = 20,
        rate_limit_per_minute: int = 30,
        max_text_chars: int = 8000,
        identity_secret: str | None = None,
        replay_events: int = 200,
        replay_idle_s: float = REPLAY_IDLE_S,
        hub: EventHub | None = None,
        public_url: str | None = None,
        hello_timeout_s: float = 10,
        max_connections: int | None = None,
        max_connections_per_address: int = 64,
        client_address_header: str | None = None,
        history: ConversationHistory | None = None,
        claims: Claims | None = None,
        gateway_claims: Claims | None = None,
        rates: InboundRates | None = None,
        blobs: BlobStore | None = None,
        links: BlobLinks | None = None,
        uploads: UploadSigner | None = None,
        introduction: Callable[[], Mapping[str, Any]] = dict,
    ) -> None:
        """With `blobs` and `links`, clients may upload files and attach them, and parts go out
        as signed links; `uploads` signs upload tokens (give every process the same secret).
        `introduction`: the fields `ready` adds for an empty conversation (bot name, welcome)."""
        if not path.startswith("/"):
            raise ValueError(f"websocket path {path!r} must start with '/', e.g. '/ws'")
        for name, value in (
            ("max_frame_bytes", max_frame_bytes),
            ("rate_limit_per_minute", rate_limit_per_minute),
            ("max_text_chars", max_text_chars),
        ):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        if replay_events < 0:
            raise ValueError(f"replay_events must be 0 (no replay) or more, not {replay_events}")
        if hello_timeout_s <= 0:
            raise ValueError(f"hello_timeout_s must be more than 0, not {hello_timeout_s}")
        self._path = path
        # replay_events sizes the default in-process hub; a given hub brings its own.
        self._hub = (
            hub
            if hub is not None
            else MemoryEventHub(replay_events=replay_events, replay_idle_s=replay_idle_s)
        )
        # Configured origins, the public URL's, and (checked per socket) the server's own address.
        admission = Admission(
            allowed_origins,
            public_url=public_url,
            max_connections=max_connections,
            max_per_address=max_connections_per_address,
            address_header=client_address_header,
        )
        rates = rates if rates is not None else LocalInboundRates()
        self.files = (
            WidgetFiles(
                blobs,
                links,
                uploads or UploadSigner(),
                admission,
                path=path,
                public_url=public_url,
                rates=rates,
                per_minute=rate_limit_per_minute,
            )
            if blobs is not None and links is not None
            else None
        )
        self._endpoint = SocketEndpoint(
            self.name,
            admission=admission,
            hub=self._hub,
            echo=UserEcho(
                self._hub,
                claims=claims,
                gateway_claims=gateway_claims,
                render=self.files.attachments if self.files else None,
            ),
            history=history,
            introduction=introduction,
            # Per conversation, not per socket: more sockets must not buy a visitor more
            # messages; nor more processes (a networked `rates` counts every process's).
            rates=rates,
            per_minute=rate_limit_per_minute,
            deliver=self._deliver,
            max_frame_bytes=max_frame_bytes,
            heartbeat_s=heartbeat_s or None,
            hello_timeout_s=hello_timeout_s,
            max_text_chars=max_text_chars,
            identity_secret=identity_secret or None,
            files=self.files,
        )
        self._inbox: Inbox | None = None
        self._inbox_ready = asyncio.Event()

    @property
    def connections(self) -> int:
        return len(self._endpoint.sockets)

    def platform_down(self) -> str | None:
        return None  # no platform: the clients come to the gateway's own web server

    def health(self) -> dict[str, int]:
        return {"connections": len(self._endpoint.sockets)}

    def install(self, app: web.Application) -> None:
        """Add the socket, the demo page and the widget's files to `app`."""
        accept_errors.install()  # this app's accept loop runs out of descriptors first
        add_page_routes(app, socket_path=self._path)
        app.router.add_get(self._path, self._endpoint.serve)
        if self.files is not None:
            self.files.install(app)
        app.on_shutdown.append(self._endpoint.close_all)

    async def run(self, inbox: Inbox) -> None:
        """Hand inbound messages to `inbox` until cancelled; the sockets live in the web app."""
        self._inbox = inbox
        self._inbox_ready.set()
        try:
            await asyncio.get_running_loop().create_future()
        finally:
            self._inbox = None
            self._inbox_ready.clear()

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
            await self._complete(chat.chat_id, handle.message_id, content)
        return handle

    def reserve(self, chat: ChatRef, reply_to: str | None) -> MessageHandle:
        return MessageHandle(chat=chat, message_id=new_id("m_"), data={"reply_to": reply_to})

    async def post(self, handle: MessageHandle, content: OutboundContent) -> None:
        fields = {
            "message_id": handle.message_id,
            "reply_to": handle.data.get("reply_to"),
            "text": content.text,
            "at": now_stamp(),
        }
        await self._hub.publish(handle.chat.chat_id, "message.created", fields)

    async def edit(
        self, handle: MessageHandle, content: OutboundContent, *, final: bool = False
    ) -> None:
        if final:
            await self._complete(handle.chat.chat_id, handle.message_id, content)
        else:
            await self._hub.publish(
                handle.chat.chat_id,
                "message.updated",
                {"message_id": handle.message_id, "text": content.text},
            )

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
        if self.files is None:
            raise ChannelError("the web socket channel has no blob links to send files with")
        return await self.send(
            chat, OutboundContent(caption or "", parts=(part,)), reply_to=reply_to, final=True
        )

    async def emit_event(self, chat: ChatRef, type: str, fields: Mapping[str, Any]) -> None:
        await self._hub.publish(chat.chat_id, type, fields)

    async def dropped(self, messages: Sequence[InboundMessage], reason: str) -> None:
        """A `/stop` dropped these from the queue: each gets its `message.dropped` (replayed
        like any frame), so the client shows it as not sent rather than waiting for an answer."""
        for message in messages:
            if message.chat.channel != self.name or message.message_id is None:
                continue  # a background result or a resume entry is no one's message
            await self._hub.publish(
                message.chat.chat_id,
                "message.dropped",
                {"message_id": message.message_id, "reason": reason},
            )

    async def _complete(self, identity: str, message_id: str, content: OutboundContent) -> None:
        display = [dict(hint) for hint in content.display]
        fields: dict[str, Any] = {"message_id": message_id, "text": content.text}
        fields["display"] = display
        if content.stopped:  # the text kept, its last paragraph the mark: shown as stopped
            fields["stopped"] = True
        fields["at"] = now_stamp()
        if content.parts and self.files is not None:
            fields["attachments"] = self.files.attachments(content.parts)
        await self._hub.publish(identity, "message.completed", fields)

    async def _deliver(self, message: InboundMessage) -> None:
        # A socket may open before the app starts `run`; its first message waits for it.
        inbox = self._inbox
        while inbox is None:
            await self._inbox_ready.wait()
            inbox = self._inbox
        await inbox(message)
