"""Server-sent events split in fewer Python steps, for the SDKs' own streams to read.

The SDKs' `AsyncStream` reads events from a decoder the client makes (`_make_sse_decoder`, the
hook their Bedrock and Vertex clients override with decoders of their own); the vendor modules
hand it this one. It yields the SDK's own event objects with what the SDK's `SSEDecoder` would
put in them, so the stream's event handling (`[DONE]`, `ping`, `error` events and their error
types, JSON parsing) stays the SDK's. What differs is the work per line: the SDK's decoder runs a
regex, a generator step, a copy, a UTF-8 decode and a method call for every line; this one splits
each chunk in C and walks the lines in one loop, decoding only what it keeps: 6-9 % of a model
call's instructions (bench/provider_bench.py --instructions). Reading the events in our own loop
instead of the SDK's stream would save another 10-20 % (0.25-0.5 M instructions; openai's stream
also drains the body after `[DONE]` under an anyio cancel scope, ~0.15 M), but the event handling
would then be ours, not the SDK's.

A stream's end marker (openai's `data: [DONE]`, `end=`) is not passed on: the events after it are
dropped and the rest of the body is read to its end here, so the SDK's stream ends as at the end
of the body. That is what the SDK does on `[DONE]` (stop; read the rest so the HTTP/1.1 connection
is reused), without what its `break` costs: a drain under an anyio timeout scope, and three async
generators (its `_iter_events`, this decoder's, httpx's `aiter_bytes`) left unfinished for the
event loop's finalizer, each a thread-safe wake-up and a task to close it. That was 10 % of an
openai call: 2.40 M instructions before, 2.17 M after (2.81 M and 2.57 M with 2,000 messages;
bench/provider_bench.py --instructions). As the SDK's drain, it reads the rest for at most 0.1 s
and a failure to read it is no error.

The format is the WHATWG one the SDK decoder implements: lines end in LF, CRLF or CR; a blank line
ends an event; `:` starts a comment; one space after the colon is dropped; `data` lines join with
LF; an `id` holding NUL is ignored and the last one is kept across events; a partial event when
the stream ends is dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

_DRAIN_S = 0.1  # the SDK's own limit for reading what follows [DONE]
EventFactory = Callable[..., Any]  # the SDK's ServerSentEvent(event=, data=, id=, retry=)


class SSELines:
    """An `SSEBytesDecoder` (the SDKs' protocol) making events with `event_factory`."""

    def __init__(self, event_factory: EventFactory, end: bytes | None = None) -> None:
        self._factory = event_factory
        self._end = end  # the data that ends the stream (module doc)

    def iter_bytes(self, iterator: Iterator[bytes]) -> Iterator[Any]:
        parser = _Parser(self._factory, self._end)
        for chunk in iterator:
            yield from parser.feed(chunk)
        yield from parser.finish()

    async def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[Any]:
        parser = _Parser(self._factory, self._end)
        chunks = aiter(iterator)
        async for chunk in chunks:
            for event in parser.feed(chunk):
                yield event
            if parser.ended:
                await _read_rest(chunks)
                return
        for event in parser.finish():
            yield event


async def _read_rest(chunks: AsyncIterator[bytes]) -> None:
    """What follows the end marker, read and dropped for the connection's reuse, as the SDK's
    drain does: for at most 0.1 s, and a failure is no error (the answer is whole). Then the SDK's
    stream closes the response, and with it a connection whose body did not end."""
    try:
        async with asyncio.timeout(_DRAIN_S):
            async for _ in chunks:
                pass
    except Exception:  # noqa: BLE001 (TimeoutError or the transport's: the answer is whole)
        return


class _Parser:
    __slots__ = ("_data", "_end", "_ended", "_event", "_factory", "_id", "_pending", "_retry")

    def __init__(self, factory: EventFactory, end: bytes | None = None) -> None:
        self._factory = factory
        self._end = end
        self._ended = False  # the end marker came: the rest is dropped
        self._pending = b""  # the unfinished last line
        self._event = b""
        self._data: list[bytes] = []
        self._id = b""
        self._retry: int | None = None

    @property
    def ended(self) -> bool:
        return self._ended

    def feed(self, chunk: bytes) -> list[Any]:
        if self._ended:
            return []
        text = self._pending + chunk
        if b"\r" in text:
            # a CR at the end may be the first half of a CRLF: it waits for the next chunk
            held = text.endswith(b"\r")
            text = text[:-1] if held else text
            text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + (b"\r" if held else b"")
        *lines, self._pending = text.split(b"\n")
        events: list[Any] = []
        for line in lines:
            if not line:
                if self._event or self._data or self._id or self._retry is not None:
                    if self._end is not None and b"\n".join(self._data).startswith(self._end):
                        self._ended, self._pending = True, b""
                        return events  # as the SDK's `startswith("[DONE]")`
                    events.append(self._dispatch())
                continue
            if line[0] == 58:  # ":", a comment
                continue
            name, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                self._data.append(value)
            elif name == b"event":
                self._event = value
            elif name == b"id":
                if b"\0" not in value:
                    self._id = value
            elif name == b"retry":
                try:
                    self._retry = int(value)
                except ValueError:
                    pass
        return events

    def finish(self) -> list[Any]:
        """The stream ended: a CR held back was a line end after all."""
        return self.feed(b"\n") if self._pending.endswith(b"\r") else []

    def _dispatch(self) -> Any:
        event = self._factory(
            event=self._event.decode() or None,
            data=b"\n".join(self._data).decode(),
            id=self._id.decode() or None,
            retry=self._retry,
        )
        self._event, self._data, self._retry = b"", [], None  # the id is kept, as the spec says
        return event
