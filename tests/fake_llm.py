"""Local fake model servers for the real `anthropic` and `openai` clients: scripted replies, recorded requests.

A test scripts what the server answers (`Reply`: streamed text, tool calls, usage, an HTTP error,
an error event mid-stream, a stall) and asserts on what the server received (`Received`). The
vendor modules (`fake_anthropic`, `fake_openai`) render a `Reply` in their real SSE wire format.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from aiohttp import web


@dataclass(frozen=True)
class Call:
    """A tool call the fake model makes; `arguments` is JSON text, valid or not."""

    name: str
    arguments: str = "{}"
    split: int = 7  # characters per argument delta; 0 sends the arguments in one piece
    id: str | None = None  # None: a generated id; "" sends none (some compatible servers)
    # OpenAI-compatible quirks: deltas without `index`; the name again on every delta (MiniMax on
    # NVIDIA NIM); the whole arguments sent once more at the end
    indexed: bool = True
    name_every_delta: bool = False
    resent: bool = False


@dataclass(frozen=True)
class Reply:
    """One scripted response.

    status != 200: an HTTP error with `error` as its error type and `message`.
    status == 200: a stream of `text` pieces then `calls`; then `error` (if set) arrives as an
    error event mid-stream instead of the end. `stall_after`: hang after that many SSE frames
    (0: right after the headers) until the client gives up; with `keepalive_s`, keep sending the
    vendor's keep-alive (which the SDKs drop) that often while hanging. `garble_at`: the SSE frame
    at that index carries cut-off JSON; `reshape_at`: JSON, but not the shape the API sends.
    """

    text: Sequence[str] = ()
    calls: Sequence[Call] = ()
    usage: tuple[int, int] | None = (12, 7)
    status: int = 200
    error: str | None = None
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    stall_after: int | None = None
    stop: str | None = None  # override the stop/finish reason
    delay_s: float = 0.0  # pause before each SSE frame (to see text stream into the placeholder)
    keepalive_s: float | None = None
    garble_at: int | None = None
    reshape_at: int | None = None
    wait: asyncio.Event | None = None  # held after the headers until the test sets it


def fail(status: int, error: str, message: str = "scripted failure", **headers: str) -> Reply:
    return Reply(status=status, error=error, message=message, headers=dict(headers))


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float

    @property
    def api_key(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            return auth.removeprefix("Bearer ")
        return self.headers.get("x-api-key")


Script = Callable[[dict[str, Any]], Reply]


class FakeLLM(ABC):
    """Base: an aiohttp server on a free port; subclasses render replies in a vendor's format."""

    vendor: ClassVar[str]  # the `llm.provider` name that speaks this wire format
    path = "/"
    api_prefix = ""

    def __init__(self, *, api_key: str = "test-key", script: Script | None = None) -> None:
        self.api_key = api_key
        self.replies: list[Reply] = []
        self.script = script
        self.requests: list[Received] = []
        self._changed = asyncio.Event()
        self._closing = asyncio.Event()
        # when (monotonic) the client closed a stream before its end: a stopped turn's call
        self.closed: list[float] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- what subclasses provide -------------------------------------------------------------
    @abstractmethod
    def frames(self, reply: Reply, body: dict[str, Any]) -> list[str]:
        """The SSE frames that stream `reply` in the vendor's wire format."""

    @abstractmethod
    def error_body(self, reply: Reply) -> dict[str, Any]:
        """The vendor's JSON error body for a failing `reply`."""

    def keepalive(self) -> str:
        """What the server sends to keep a quiet stream open: an SSE comment by default."""
        return ": keep-alive\n\n"

    # -- life cycle ----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.api_prefix}"

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post(self.path, self._handle)
        # handler_cancellation: a client that closes the connection mid-stream cancels the
        # handler at once, so `closed` records it even while the stream is held quiet
        self._runner = web.AppRunner(
            app, shutdown_timeout=0.5, handle_signals=False, handler_cancellation=True
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def add(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def wait_closed(self, count: int, timeout: float = 10.0) -> None:
        """Until the client has closed `count` streams before their end."""
        async with asyncio.timeout(timeout):
            while len(self.closed) < count:
                self._changed.clear()
                await self._changed.wait()

    def _client_closed(self) -> None:
        if not self._closing.is_set():  # the server's own shutdown is not the client's doing
            self.closed.append(time.monotonic())
            self._changed.set()

    async def wait_requests(self, count: int, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.requests) < count:
                self._changed.clear()
                await self._changed.wait()

    # -- serving ---------------------------------------------------------------------------
    def _next(self, body: dict[str, Any]) -> Reply:
        if self.replies:
            return self.replies.pop(0)
        if self.script is not None:
            return self.script(body)
        return fail(
            400,
            "invalid_request_error",
            f"fake server: no scripted reply left for #{len(self.requests)}",
        )

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        received = Received(request.path, dict(request.headers), body, time.monotonic())
        self.requests.append(received)
        self._changed.set()
        if received.api_key != self.api_key:
            reply = fail(401, "authentication_error", "invalid x-api-key")
        else:
            reply = self._next(body)
        if reply.status != 200:
            return web.json_response(
                self.error_body(reply), status=reply.status, headers=reply.headers
            )
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                **reply.headers,
            }
        )
        await response.prepare(request)
        frames = self.frames(reply, body)
        try:
            if reply.wait is not None:
                await reply.wait.wait()
            for index, frame in enumerate(frames):
                if reply.stall_after is not None and index >= reply.stall_after:
                    break
                if reply.delay_s:
                    await asyncio.sleep(reply.delay_s)
                if index == reply.garble_at:
                    frame = garble(frame)
                if index == reply.reshape_at:
                    frame = reshape(frame)
                await response.write(frame.encode())
            if reply.stall_after is not None and reply.keepalive_s is not None:
                while not self._closing.is_set():  # pings are the behaviour under test
                    await response.write(self.keepalive().encode())
                    await asyncio.sleep(reply.keepalive_s)
                return response
            if reply.stall_after is not None:
                await self._closing.wait()  # the client's deadline, or the test's end, ends this
                return response
            await response.write_eof()
        except ConnectionResetError:
            self._client_closed()  # the client gave up: that is what a stall test wants
        except asyncio.CancelledError:
            self._client_closed()  # the connection was lost (handler_cancellation)
            raise
        return response


def sse(data: Any, event: str | None = None) -> str:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n"


def reshape(frame: str) -> str:
    """`frame` with valid JSON of the wrong shape for either vendor (fields of the wrong type)."""
    lines = frame.rstrip("\n").split("\n")
    lines[-1] = 'data: {"type": "content_block_delta", "delta": 7, "choices": 7}'
    return "\n".join(lines) + "\n\n"


def garble(frame: str) -> str:
    """`frame` with the JSON of its data line cut in half, as a broken proxy might send it."""
    lines = frame.rstrip("\n").split("\n")
    data = lines[-1]
    lines[-1] = data[: len("data: ") + (len(data) - len("data: ")) // 2]
    return "\n".join(lines) + "\n\n"


def pieces(text: str, size: int) -> list[str]:
    if size <= 0 or not text:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


def llm_config(provider: str, fake: FakeLLM, **extra: Any) -> dict[str, Any]:
    """The `llm` config section that points the real SDK client at `fake`, with short deadlines."""
    return {
        "provider": provider,
        "base_url": fake.url,
        "api_key": fake.api_key,
        "model": "test-model",
        "connect_timeout_s": 2,
        "first_token_timeout_s": 2,
        "total_timeout_s": 10,
        "retry_backoff_s": 0.01,
        **extra,
    }


BACKUP_NOTE = re.compile(
    r"\n\n— answered by the backup model \([^)]+\): the usual one did not answer"
)


def by_backup(text: str, answer: str) -> bool:
    """Whether `text` is `answer` ending with the one note a backup model's answer carries."""
    return text.startswith(answer) and BACKUP_NOTE.fullmatch(text[len(answer) :]) is not None
