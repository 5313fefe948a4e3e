"""Server-Sent Events: a session's hub frames as `id:`/`event:`/`data:` records on one response.

`id:` is the frame's `seq`, so a client that lost the stream sends it back as `Last-Event-ID` and
gets only what it missed. The queue between the hub and the response is bounded: a client that
reads too slowly loses the stream (an `error` event `too_slow`) rather than the server's memory.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

from aiohttp import web

QUEUE_FRAMES: Final = 256
_GONE: Final = ""  # pushed when the hub dropped us, or the server shuts down


class SseSubscriber:
    """A hub subscriber (adapters.hub.Subscriber) feeding one response."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[str] = asyncio.Queue(QUEUE_FRAMES + 1)  # + the end marker
        self.overflowed = False
        self._ended = False

    def push(self, frame: str) -> bool:
        if self._ended:
            return False
        if self.queue.qsize() >= QUEUE_FRAMES:
            self.overflowed = True
            self.end()
            return False
        self.queue.put_nowait(frame)
        return True

    def end(self) -> None:
        if not self._ended:
            self._ended = True
            self.queue.put_nowait(_GONE)


def event(frame: dict[str, Any], encoded: str | None = None) -> bytes:
    """One SSE record; frames without a seq (our own `error`s) carry no `id:`."""
    data = encoded if encoded is not None else json.dumps(frame, ensure_ascii=False)
    head = f"id: {frame['seq']}\n" if "seq" in frame else ""
    return f"{head}event: {frame['type']}\ndata: {data}\n\n".encode()


async def open_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",  # nginx: pass events through as they come
        }
    )
    await response.prepare(request)
    return response


class StreamEnded(Exception):
    """The stream ends early: `stream_timeout` or `too_slow`."""

    def __init__(self, code: str, why: str) -> None:
        super().__init__(f"{code}: {why}")
        self.code = code
        self.why = why


async def frames(
    subscriber: SseSubscriber, replay: list[str], *, timeout_s: float, keepalive_s: float
) -> AsyncIterator[tuple[dict[str, Any], str] | None]:
    """The replay, then live frames, as (frame, its JSON); None after each `keepalive_s` of
    quiet. Stops when the subscriber ends (shutdown); `StreamEnded` on timeout or overflow."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    for encoded in replay:
        yield json.loads(encoded), encoded
    while True:
        wait_s = min(keepalive_s, deadline - loop.time())
        if wait_s <= 0:
            raise StreamEnded("stream_timeout", f"no answer within {timeout_s:g} s")
        try:
            encoded = await asyncio.wait_for(subscriber.queue.get(), wait_s)
        except TimeoutError:
            yield None
            continue
        if encoded == _GONE:
            if subscriber.overflowed:
                raise StreamEnded("too_slow", "the stream fell behind")
            return
        yield json.loads(encoded), encoded


async def pump(
    response: web.StreamResponse,
    subscriber: SseSubscriber,
    replay: list[str],
    *,
    emit_after: int,
    done: Callable[[dict[str, Any]], Awaitable[bool]],
    timeout_s: float,
    keepalive_s: float,
    quiet_timeout: bool = False,
) -> None:
    """Write the replay, then live frames with seq > `emit_after`, until `done(frame)` is true.

    Every frame (those not written too) goes through `done`, so a resumed stream still knows
    when its answer is complete. Ends with an `error` event on overflow, and on timeout unless
    `quiet_timeout` (a stream that follows a session just ends; EventSource reconnects).
    """
    try:
        async for item in frames(subscriber, replay, timeout_s=timeout_s, keepalive_s=keepalive_s):
            if item is None:
                await response.write(b": keepalive\n\n")  # also finds a client that has gone
                continue
            frame, encoded = item
            if frame.get("seq", 0) > emit_after:
                await response.write(event(frame, encoded))
            if await done(frame):
                return
    except StreamEnded as ended:
        if not (quiet_timeout and ended.code == "stream_timeout"):
            await _error(response, ended.code, ended.why)


async def collect(
    subscriber: SseSubscriber,
    replay: list[str],
    *,
    done: Callable[[dict[str, Any]], Awaitable[bool]],
    timeout_s: float,
) -> dict[str, Any] | None:
    """The frame for which `done` is true (the answer), or None if the server shuts down first."""
    async for item in frames(subscriber, replay, timeout_s=timeout_s, keepalive_s=timeout_s):
        if item is not None and await done(item[0]):
            return item[0]
    return None


async def _error(response: web.StreamResponse, code: str, why: str) -> None:
    message = f"{why}; resume with GET …/events (or send again) with Last-Event-ID"
    await response.write(event({"type": "error", "code": code, "message": message}))
