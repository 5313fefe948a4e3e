"""A scripted model for tests and benchmarks: replies come from a list or a function, not an LLM."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.types import ModelRequest, ModelStream, Stop, TextDelta, ToolCall, ToolCallEvent, Usage


@dataclass(frozen=True, slots=True)
class Reply:
    """One model response: text (streamed in `chunks` pieces) and/or tool calls.

    `wait` blocks the response until the event is set (to hold a turn open); `error` is raised
    instead of answering; `delay_s` sleeps before each chunk.
    """

    text: str = ""
    calls: Sequence[tuple[str, Mapping[str, Any] | str]] = ()
    chunks: int = 1
    delay_s: float = 0.0
    wait: asyncio.Event | None = None
    error: BaseException | None = None
    usage: Usage = field(default_factory=lambda: Usage(10, 5))


Script = Iterable[Reply] | Callable[[ModelRequest], Reply]


class ScriptExhausted(AssertionError):
    """The test's script had no reply left for a model call it did not expect."""


class ScriptedProvider:
    name = "scripted"

    def __init__(self, script: Script, *, model: str = "scripted", latency_s: float = 0.0) -> None:
        self.model = model
        self.latency_s = latency_s  # before each response, like a real model's time to first token
        self.requests: list[ModelRequest] = []
        self._fn = script if callable(script) else None
        self._queue = [] if callable(script) else list(script)
        self._seen = asyncio.Event()

    async def wait_requests(self, count: int) -> None:
        """Until at least `count` model calls have started."""
        while len(self.requests) < count:
            self._seen.clear()
            await self._seen.wait()

    def add(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    def _next(self, request: ModelRequest) -> Reply:
        if self._fn is not None:
            return self._fn(request)
        if not self._queue:
            raise ScriptExhausted(f"no scripted reply left for call #{len(self.requests)}")
        return self._queue.pop(0)

    async def stream(self, request: ModelRequest) -> ModelStream:
        self.requests.append(request)
        self._seen.set()
        reply = self._next(request)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if reply.wait is not None:
            await reply.wait.wait()
        if reply.error is not None:
            raise reply.error
        for piece in _split(reply.text, reply.chunks):
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            yield TextDelta(piece)
        for name, args in reply.calls:
            text = args if isinstance(args, str) else json.dumps(args)
            yield ToolCallEvent(
                ToolCall(id=f"call_{uuid.uuid4().hex[:8]}", name=name, arguments=text)
            )
        yield reply.usage
        yield Stop("tool_use" if reply.calls else "end_turn")


def _split(text: str, chunks: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, chunks)))
    return [text[i : i + size] for i in range(0, len(text), size)]
