"""One open web socket: its ordered outbound queue, who it speaks for, its hello deadline.

Publishing never awaits a socket. Frames go into the socket's own queue and a writer task sends
them, for three reasons: a send may wait for the transport to drain, and two publishes awaiting
sends directly could then reach two tabs in different orders; a slow tab must not hold up the
gateway or the other tabs; and the queue is bounded, so a client that stops reading is closed
with 1013 instead of growing without limit (it reconnects and resumes from the replay buffer).
The writer task exists only while frames are queued: an idle connection costs no task, and a ping
or pong with nothing queued before it is written at once (`_control`), without one.
A burst of bad frames gets one error per code, not one per frame (while one is queued, or for
`quiet_s` after it): the socket's own error replies must not be what fills its queue and closes a
healthy socket with 1013.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Final

from aiohttp import web

log = logging.getLogger(__name__)

MAX_PENDING_FRAMES: Final = 256


@dataclass(frozen=True, slots=True)
class _Close:
    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class _Control:
    """A ping or a pong queued among the frames."""

    pong: bool
    payload: bytes


_PING: Final = _Control(False, b"")
# RFC 6455 §5.2: FIN set, then the opcode; a server's frames are not masked, and a control
# frame's payload is at most 125 bytes (aiohttp's reader refuses longer ones from clients)
_OPCODE_PING: Final = 0x9
_OPCODE_PONG: Final = 0xA


class Connection:
    """A socket of the channel; `identity` is set by its hello."""

    __slots__ = (
        "_dead",
        "_errors",
        "_granted",
        "_held",
        "_pending",
        "_quiet",
        "_transport",
        "_writer",
        "address",
        "answered",
        "beat",
        "closing",
        "deadline",
        "due",
        "identity",
        "language",
        "ws",
    )

    def __init__(
        self,
        ws: web.WebSocketResponse,
        address: str,
        transport: asyncio.Transport | None = None,
    ) -> None:
        self.ws = ws
        # the request's: a ping or pong with nothing queued is written to it directly
        self._transport = transport
        self.address = address
        self.identity: str | None = None
        self.language: str | None = None  # the hello's: every message of the socket carries it
        self.deadline: asyncio.TimerHandle | None = None  # closes the socket if hello is late
        # its pings (heartbeat.py): something came since the last; every how many ticks; when
        self.answered = True
        self.beat = self.due = 0
        self.closing = False  # a close is queued: ignore whatever the client still sends
        self._pending: list[str | _Control | _Close] = []
        self._held: list[str] | None = None  # live frames kept back while the replay is read
        self._granted = 0  # queued frames a hello asked for: not counted against the cap
        self._errors: set[str] = set()  # codes of the error frames queued and not yet sent
        self._quiet: dict[str, float] | None = None  # code → until when it is not sent again
        self._writer: asyncio.Task[None] | None = None
        self._dead = False

    def push(self, frame: str) -> bool:
        """Queue an encoded frame; False once the socket can take no more."""
        if self._dead:
            return False
        if self.closing:
            return True  # the handler detaches it once the close has gone out
        if self._held is not None:
            self._held.append(frame)
            return True
        if len(self._pending) - self._granted >= MAX_PENDING_FRAMES:
            log.info(
                "websocket %s fell %d frames behind; closing it", self.identity, MAX_PENDING_FRAMES
            )
            self._pending.clear()
            self._errors.clear()
            self.close(1013, "too slow: reconnect with resume_after")
            return False
        self._enqueue(frame)
        return True

    def ping(self) -> bool:
        """Queue a ping; False once the socket is closing or gone."""
        if self._dead or self.closing:
            return False
        if not self._control(_OPCODE_PING, b""):
            self._enqueue(_PING)
        return True

    def pong(self, payload: bytes) -> None:
        """Answer the client's ping, after the frames queued before it."""
        if not self._dead and not self.closing and not self._control(_OPCODE_PONG, payload):
            self._enqueue(_Control(True, payload))

    def _control(self, opcode: int, payload: bytes) -> bool:
        """Write a control frame now if nothing is queued before it; False where it must be
        queued. Idle sockets are pinged all the time (5,000 at 20 s: 250 a second), and a
        writer task for each ping, its coroutine and aiohttp's frame writer cost more than the
        write itself: 2,000 idle sockets pinged every 2 s cost the gateway 53-54 ms of CPU a
        second through the writer, 34-36 written here (one process, uvloop)."""
        transport = self._transport
        if self._writer is not None or transport is None or transport.is_closing():
            return False
        if self.ws.closed:  # aiohttp sent its close frame: nothing may follow it
            return False
        transport.write(bytes((0x80 | opcode, len(payload))) + payload)
        return True

    def hold(self) -> None:
        """Keep pushed frames back until `release`: the hub's live frames, while what must go
        before them (ready, the stored transcript, the replay) is being read."""
        self._held = []

    def release(self, first: list[str]) -> None:
        """Queue `first`, then the frames held back, in order. Until the writer takes them they
        do not count against MAX_PENDING_FRAMES: they are what a hello asked for (a replay
        buffer and a stored transcript can be more than that together), not a slow reader."""
        held, self._held = self._held or [], None
        if self._dead or self.closing:
            return
        self._granted = len(first) + len(held)
        for frame in first + held:
            self._enqueue(frame)

    def send_error(
        self, code: str, message: str, *, quiet_s: float = 0, **fields: str | int
    ) -> None:
        """A connection-scoped error: this socket only, no seq, never replayed.

        Dropped while an error of the same code is still queued, or for `quiet_s` after one was:
        a burst gets one answer.
        """
        now = time.monotonic()
        if code in self._errors or (self._quiet is not None and self._quiet.get(code, 0) > now):
            return
        self._errors.add(code)
        if quiet_s > 0:
            self._quiet = {**(self._quiet or {}), code: now + quiet_s}
        self.push(json.dumps({"type": "error", "code": code, "message": message, **fields}))

    def close(self, code: int, reason: str) -> None:
        """Close after the frames already queued have gone out."""
        if not self.closing and not self._dead:
            self.closing = True
            self._enqueue(_Close(code, reason))

    async def finish(self) -> None:
        """The client is gone: drop what is queued, or let a queued close go out first."""
        writer = self._writer
        if writer is not None:
            if not self.closing:
                writer.cancel()
            await asyncio.wait([writer])

    def abort(self) -> None:
        self._dead = True
        if self.deadline is not None:
            self.deadline.cancel()
        if self._writer is not None:
            self._writer.cancel()

    def _enqueue(self, item: str | _Control | _Close) -> None:
        self._pending.append(item)
        if self._writer is None:
            self._writer = asyncio.create_task(self._write(), name="websocket-writer")

    async def _write(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                self._granted = 0
                self._errors.clear()
                for item in batch:
                    if isinstance(item, _Close):
                        await self.ws.close(code=item.code, message=item.reason.encode())
                        self._dead = True
                        return
                    if isinstance(item, _Control):
                        await (self.ws.pong if item.pong else self.ws.ping)(item.payload)
                    else:
                        await self.ws.send_str(item)
        except (ConnectionError, RuntimeError) as exc:
            # The tab went away mid-send; the reader sees the close and ends the handler.
            log.debug("websocket %s send failed: %r", self.identity, exc)
            self._dead = True
        except Exception:
            log.exception("websocket %s writer failed; closing the socket", self.identity)
            self._dead = True
            await self.ws.close(code=1011, message=b"internal error")
        finally:
            self._writer = None
            if self._dead:
                self._pending.clear()
                self._errors.clear()
