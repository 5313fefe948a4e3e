"""The web socket channel: the socket endpoint, the demo page and widget, and replies as frames."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from adapters.base import (
    ChannelLimits,
    ChatRef,
    InboundMessage,
    Inbox,
    MessageHandle,
    OutboundContent,
    TryLater,
)
from adapters.history import Claims, ConversationHistory
from adapters.websocket import accept_errors
from adapters.websocket.admission import Admission
from adapters.websocket.connection import Connection
from adapters.websocket.hub import EventHub, MemoryEventHub
from adapters.websocket.limits import InboundRates, LocalInboundRates
from adapters.websocket.protocol import (
    CLOSE_HELLO_TIMEOUT,
    CLOSE_IDENTITY_INVALID,
    Hello,
    ProtocolError,
    Stop,
    inbound_message,
    new_id,
    parse_client_frame,
    resolve_identity,
)
from adapters.websocket.static import add_page_routes
from adapters.websocket.transcript import UserEcho, falls_short, stored_frames

log = logging.getLogger(__name__)

TRY_LATER_MS = 2000  # a Redis restart takes about a second
_LIMITS = ChannelLimits(
    max_text_length=100_000, min_edit_interval_s=0.05, can_edit=True, final_marker=True
)


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
        hub: EventHub | None = None,
        public_url: str | None = None,
        hello_timeout_s: float = 10,
        max_connections: int | None = None,
        max_connections_per_address: int = 64,
        client_address_header: str | None = None,
        history: ConversationHistory | None = None,
        claims: Claims | None = None,
        rates: InboundRates | None = None,
    ) -> None:
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
        # Configured origins, the public URL's, and (checked per socket) the server's own address.
        self._admission = Admission(
            allowed_origins,
            public_url=public_url,
            max_connections=max_connections,
            max_per_address=max_connections_per_address,
            address_header=client_address_header,
        )
        self._max_frame_bytes = max_frame_bytes
        self._heartbeat_s = heartbeat_s or None
        self._hello_timeout_s = hello_timeout_s
        # Per conversation, not per socket: more sockets must not buy a visitor more messages;
        # nor more processes (a networked `rates` counts every process's).
        self._per_minute = rate_limit_per_minute
        self._rates: InboundRates = rates if rates is not None else LocalInboundRates()
        self._max_text_chars = max_text_chars
        self._identity_secret = identity_secret or None
        # replay_events sizes the default in-process hub; a given hub brings its own.
        self._hub = hub if hub is not None else MemoryEventHub(replay_events=replay_events)
        self._echo = UserEcho(self._hub, claims=claims)  # the user's messages in the transcript
        self._history = history  # the stored transcript, where the replay buffer falls short
        self._sockets: set[Connection] = set()
        self._inbox: Inbox | None = None
        self._inbox_ready = asyncio.Event()

    @property
    def connections(self) -> int:
        return len(self._sockets)

    def health(self) -> dict[str, int]:
        return {"connections": len(self._sockets)}

    def install(self, app: web.Application) -> None:
        """Add the socket, the demo page and the widget's files to `app`."""
        accept_errors.install()  # this app's accept loop runs out of descriptors first
        add_page_routes(app, socket_path=self._path)
        app.router.add_get(self._path, self._serve_socket)
        app.on_shutdown.append(self._close_all)

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
        message_id = new_id("m_")
        await self._hub.publish(
            chat.chat_id,
            "message.created",
            {"message_id": message_id, "reply_to": reply_to, "text": content.text},
        )
        if final:
            await self._complete(chat.chat_id, message_id, content)
        return MessageHandle(chat=chat, message_id=message_id)

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
        await self._hub.publish(
            identity,
            "message.completed",
            {"message_id": message_id, "text": content.text, "display": display},
        )

    async def _serve_socket(self, request: web.Request) -> web.StreamResponse:
        address = self._admission.admit(request)  # the Origin rule and the caps, or a refusal
        try:
            return await self._serve_admitted(request, address)
        finally:
            self._admission.closed(address)

    async def _serve_admitted(self, request: web.Request, address: str) -> web.StreamResponse:
        # No permessage-deflate: its zlib state costs ~100 KiB per connection (measured: 113 KiB
        # per idle socket with it, 16 KiB without), and chat frames are small. aiohttp refuses
        # a frame of exactly max_msg_size; the documented limit lets that one through.
        ws = web.WebSocketResponse(
            heartbeat=self._heartbeat_s, max_msg_size=self._max_frame_bytes + 1, compress=False
        )
        await ws.prepare(request)
        conn = Connection(ws, address)
        self._sockets.add(conn)
        conn.deadline = asyncio.get_running_loop().call_later(
            self._hello_timeout_s, self._hello_late, conn
        )
        try:
            await self._read_frames(conn)
            await conn.finish()
        finally:
            conn.abort()
            self._sockets.discard(conn)
            if conn.identity is not None:
                await self._hub.detach(conn.identity, conn)
        return ws

    def _hello_late(self, conn: Connection) -> None:
        # A socket that never says hello would hold a descriptor forever.
        if conn.identity is None:
            log.debug(
                "websocket from %s closed: no hello in %.0f s", conn.address, self._hello_timeout_s
            )
            conn.close(CLOSE_HELLO_TIMEOUT, "hello_timeout")

    async def _read_frames(self, conn: Connection) -> None:
        async for msg in conn.ws:
            if conn.closing:
                continue
            if msg.type is WSMsgType.TEXT:
                await self._handle_text(conn, msg.data)
            elif msg.type is WSMsgType.BINARY:
                conn.send_error("binary_not_supported", "send JSON text frames, not binary ones")
            elif msg.type is WSMsgType.ERROR:
                log.debug("websocket %s closed: %r", conn.identity, conn.ws.exception())

    async def _handle_text(self, conn: Connection, data: str) -> None:
        try:
            frame, raw = parse_client_frame(data, max_text_chars=self._max_text_chars)
            if isinstance(frame, Hello):
                await self._hello(conn, frame)
                return
            if conn.identity is None:
                raise ProtocolError(
                    "hello_required", 'send {"type": "hello"} first and wait for ready'
                )
            wait_s = await self._rates.take(f"websocket:{conn.identity}", self._per_minute)
            if wait_s > 0:
                conn.send_error(
                    "rate_limited",
                    f"more than {self._per_minute} messages a minute in this conversation "
                    f"(all its sockets together): messages are dropped for {math.ceil(wait_s)} s "
                    "without another error; resend them after that",
                    quiet_s=wait_s,
                )
                return
            message = inbound_message(self.name, conn.identity, frame, raw)
            if conn.identity.startswith("v:"):  # a visitor id is the browser's to choose
                message = dataclasses.replace(message, client=f"address:{conn.address}")
            if not isinstance(frame, Stop):
                await self._echo.accepted(conn, message, frame)
            await self._deliver(message)
        except TryLater as exc:
            log.warning("websocket %s: message not taken: %s", conn.identity, exc)
            conn.send_error(
                "try_later",
                "the server cannot take messages just now; nothing was kept: send it again in a"
                " few seconds with the same client_message_id",
                retry_after_ms=TRY_LATER_MS,
            )
        except ProtocolError as exc:
            conn.send_error(exc.code, exc.message)
            if exc.code == "identity_invalid":
                conn.close(CLOSE_IDENTITY_INVALID, "identity_invalid")
        except Exception:
            log.exception("websocket %s: handling a frame failed", conn.identity)
            conn.send_error("internal_error", "the server failed on this frame; it is logged")

    async def _hello(self, conn: Connection, hello: Hello) -> None:
        if conn.identity is not None:
            raise ProtocolError(
                "hello_repeated", "this socket already said hello; open a new one to switch"
            )
        visitor_id = hello.visitor_id or uuid.uuid4().hex
        identity = resolve_identity(hello, visitor_id, self._identity_secret)
        # Set before attach, so that the handler detaches the socket even if attach is cut short.
        conn.identity = identity
        if conn.deadline is not None:
            conn.deadline.cancel()
            conn.deadline = None
        # From attach's return on, the hub pushes live frames (seq > the returned seq) to
        # `conn`; they must come after ready, the stored transcript and the replay, so they are
        # held back while the store is read (and there is no other await until the release).
        try:
            seq, replay = await self._hub.attach(identity, conn, hello.resume_after)
        except TryLater as exc:  # the events live in Redis, and it is down: come back later
            log.warning("websocket %s: hello refused: %s", identity, exc)
            conn.send_error(
                "try_later",
                "the server cannot serve this conversation just now; reconnect in a few seconds",
                retry_after_ms=TRY_LATER_MS,
            )
            conn.close(1013, "try again later")
            return
        first = [
            json.dumps(
                {
                    "type": "ready",
                    "visitor_id": visitor_id,
                    "conversation_id": identity,
                    "seq": seq,
                    "max_text_chars": self._max_text_chars,  # to refuse before sending
                }
            )
        ]
        conn.hold()
        try:
            if self._history is not None and falls_short(hello.resume_after, seq, replay):
                chat = ChatRef(self.name, identity)
                first += await stored_frames(self._history, chat, identity, replay)
            first += replay
        finally:
            conn.release(first)
        log.debug("websocket %s ready at seq %d, sending %d", identity, seq, len(first) - 1)

    async def _deliver(self, message: InboundMessage) -> None:
        # A socket may open before the app starts `run`; its first message waits for it.
        inbox = self._inbox
        while inbox is None:
            await self._inbox_ready.wait()
            inbox = self._inbox
        await inbox(message)

    async def _close_all(self, app: web.Application) -> None:
        async with asyncio.TaskGroup() as group:
            for conn in list(self._sockets):
                group.create_task(
                    conn.ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")
                )
