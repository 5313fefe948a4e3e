"""The socket endpoint: a socket admitted, its hello answered, its frames read and handed on.

This is the inbound half of the web socket channel, one socket at a time: the Origin rule and
connection caps (`Admission`), the hello deadline, the hello (identity, `ready`, the stored
transcript and the replay, in order), and each frame parsed, rate-limited per conversation and
delivered. The channel (`channel.py`) owns it and does the outbound half: publishing frames.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from adapters.base import ChatRef, InboundMessage, QueueOverflow, TryLater
from adapters.history import ConversationHistory
from adapters.hub import EventHub
from adapters.rates import InboundRates
from adapters.uploads import UploadRefused
from adapters.websocket.admission import Admission
from adapters.websocket.connection import Connection
from adapters.websocket.files import WidgetFiles
from adapters.websocket.heartbeat import Heartbeat
from adapters.websocket.protocol import (
    CLOSE_HELLO_TIMEOUT,
    CLOSE_IDENTITY_INVALID,
    Hello,
    ProtocolError,
    Stop,
    UserText,
    inbound_message,
    parse_client_frame,
    resolve_identity,
)
from adapters.websocket.transcript import UserEcho, as_history, falls_short, stored_frames
from content.parts import Part

log = logging.getLogger(__name__)

TRY_LATER_MS = 2000  # a Redis restart takes about a second


class SocketEndpoint:
    """Serves the channel's socket route; `deliver` hands a message to the gateway."""

    def __init__(
        self,
        name: str,
        *,
        admission: Admission,
        hub: EventHub,
        echo: UserEcho,
        history: ConversationHistory | None,
        rates: InboundRates,
        deliver: Callable[[InboundMessage], Awaitable[None]],
        max_frame_bytes: int,
        heartbeat_s: float | None,
        hello_timeout_s: float,
        per_minute: int,
        max_text_chars: int,
        identity_secret: str | None,
        files: WidgetFiles | None = None,
        introduction: Callable[[], Mapping[str, Any]] = dict,
    ) -> None:
        self.name = name
        self._introduction = introduction  # read per hello: a persona edit shows at once
        self._files = files  # uploads and attachments; None: this server takes no files
        self._admission = admission
        self._hub = hub
        self._echo = echo  # the user's messages in the transcript
        self._history = history  # the stored transcript, where the replay buffer falls short
        self._rates = rates
        self._deliver = deliver
        self._max_frame_bytes = max_frame_bytes
        self._heartbeat = Heartbeat(heartbeat_s) if heartbeat_s else None
        self._hello_timeout_s = hello_timeout_s
        self._per_minute = per_minute
        self._max_text_chars = max_text_chars
        self._identity_secret = identity_secret
        self.sockets: set[Connection] = set()

    async def serve(self, request: web.Request) -> web.StreamResponse:
        """The socket route: admitted, it lives until it closes; refused, an HTTP error."""
        address = self._admission.admit(request)  # the Origin rule and the caps, or a refusal
        try:
            return await self._serve_admitted(request, address)
        finally:
            self._admission.closed(address)

    async def _serve_admitted(self, request: web.Request, address: str) -> web.StreamResponse:
        # No permessage-deflate: its zlib state costs ~100 KiB per connection (measured: 113 KiB
        # per idle socket with it, 16 KiB without), and chat frames are small. aiohttp refuses
        # a frame of exactly max_msg_size; the documented limit lets that one through.
        # autoping off: the reader answers pings and notes that pongs came (heartbeat.py)
        ws = web.WebSocketResponse(
            autoping=False, max_msg_size=self._max_frame_bytes + 1, compress=False
        )
        await ws.prepare(request)
        conn = Connection(ws, address, request.transport)
        self.sockets.add(conn)
        conn.deadline = asyncio.get_running_loop().call_later(
            self._hello_timeout_s, self._hello_late, conn
        )
        if self._heartbeat is not None:
            self._heartbeat.add(conn)
        try:
            await self._read_frames(conn)
            await conn.finish()
        finally:
            conn.abort()
            if self._heartbeat is not None:
                self._heartbeat.discard(conn)
            self.sockets.discard(conn)
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
            conn.answered = True  # the client is there (heartbeat.py)
            if msg.type is WSMsgType.PING:
                conn.pong(msg.data)
                continue
            if msg.type is WSMsgType.PONG or conn.closing:
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
            parts = self._parts(conn.identity, frame)
            message = inbound_message(self.name, conn.identity, frame, raw, parts)
            if conn.identity.startswith("v:"):  # a visitor id is the browser's to choose
                message = dataclasses.replace(message, client=f"address:{conn.address}")
            if conn.language is not None:
                message = dataclasses.replace(message, language=conn.language)
            if not isinstance(frame, Stop):
                await self._echo.accepted(conn, message, frame)
            try:
                await self._deliver(message)
            except QueueOverflow as exc:
                await self._echo.refused(conn, message, frame, str(exc))
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

    def _parts(self, identity: str, frame: object) -> tuple[Part, ...]:
        """A message's attachments, each verified as uploaded for this conversation."""
        if not isinstance(frame, UserText) or not frame.attachments:
            return ()
        if self._files is None:
            raise ProtocolError(
                "attachment_invalid", "this server takes no files (no upload in ready)"
            )
        try:
            return tuple(self._files.signer.part(identity, item) for item in frame.attachments)
        except UploadRefused as exc:
            raise ProtocolError("attachment_invalid", str(exc)) from None

    async def _hello(self, conn: Connection, hello: Hello) -> None:
        if conn.identity is not None:
            raise ProtocolError(
                "hello_repeated", "this socket already said hello; open a new one to switch"
            )
        visitor_id = hello.visitor_id or uuid.uuid4().hex
        identity = resolve_identity(hello, visitor_id, self._identity_secret)
        # Set before attach, so that the handler detaches the socket even if attach is cut short.
        conn.identity = identity
        conn.language = hello.language
        if conn.deadline is not None:
            conn.deadline.cancel()
            conn.deadline = None
        # From attach's return on, the hub pushes live frames (seq > the returned seq) to
        # `conn`; they must come after ready, the stored transcript and the replay, so they are
        # held back while the store is read (and there is no other await until the release).
        # A seq of another epoch (this server restarted since the client counted it) says
        # nothing about what it has: it gets every kept frame, marked as history (no seq)
        resume_after = hello.resume_after
        stale = bool(resume_after) and hello.epoch not in (None, self._hub.epoch)
        if stale:
            resume_after = 0
        try:
            attached = await self._hub.attach(identity, conn, resume_after)
        except TryLater as exc:  # the events live in Redis, and it is down: come back later
            log.warning("websocket %s: hello refused: %s", identity, exc)
            conn.send_error(
                "try_later",
                "the server cannot serve this conversation just now; reconnect in a few seconds",
                retry_after_ms=TRY_LATER_MS,
            )
            conn.close(1013, "try again later")
            return
        seq, replay = attached.seq, attached.replay
        ready = {
            "type": "ready",
            "visitor_id": visitor_id,
            "conversation_id": identity,
            "seq": seq,
            "epoch": self._hub.epoch,  # send it back with resume_after
            "max_text_chars": self._max_text_chars,  # to refuse before sending
            **self._introduction(),
        }
        if self._files is not None:
            ready["upload"] = self._files.ready_fields(identity)
        first = [json.dumps(ready)]
        conn.hold()
        try:
            if self._history is not None and falls_short(resume_after, attached):
                chat = ChatRef(self.name, identity)
                render = self._files.attachments if self._files is not None else None
                first += await stored_frames(self._history, chat, identity, replay, render)
            first += [as_history(frame) for frame in replay] if stale else replay
        finally:
            conn.release(first)
        log.debug("websocket %s ready at seq %d, sending %d", identity, seq, len(first) - 1)

    async def close_all(self, app: web.Application) -> None:
        """On shutdown: every socket closed with 1001, so clients reconnect elsewhere."""
        if self._heartbeat is not None:
            self._heartbeat.stop()
        async with asyncio.TaskGroup() as group:
            for conn in list(self.sockets):
                group.create_task(
                    conn.ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")
                )
