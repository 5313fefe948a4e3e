"""A model's server-sent events read off the response, in batches: the fast path's stream.

On the fast path (prepared.py) the vendor module reads the events here instead of through the
SDK's `AsyncStream`. The SDK's stream runs four async generators for every event (its decoder's,
`_iter_events`, `__stream__`, `__aiter__`), makes a `ServerSentEvent` of each, and checks each
parsed item with `typing.Mapping` (an ABC check through `typing`); this reads each chunk that
arrives in one loop and hands the vendor module, per chunk, the list of items its events made,
so the vendor module's own wait for the next read (its deadline) is per read, not per event.
bench/provider_bench.py --instructions, a 5-piece answer: 1.90 → 1.71 M instructions a call
(openai), 1.95 → 1.72 M (anthropic); each more event read on its own 87 → 62 k and 74 → 56 k.

What the SDK's stream does with an event is done by the door's `handle` (openai_sdk.py,
anthropic_sdk.py): the same JSON parsing and the SDK's own error for an `error` event; a failed
read becomes the SDK's timeout or connection error, as its `_iter_events` maps it. The public
path (door.py) keeps the SDK's stream whole, each event a batch of one.

A stream's end marker (openai's `data: [DONE]`, `end=`) ends it: the events after it are dropped
and the rest of the body is read to its end here, for the connection's reuse, as the SDK's drain
does on `[DONE]`, for at most 0.1 s, a failure to read it no error. Before (the SDK's own stop),
the `break` left three async generators unfinished for the event loop's finalizer, each a
thread-safe wake-up and a task to close it: 10 % of an openai call.

The format is the WHATWG one the SDK decoder implements: lines end in LF, CRLF or CR; a blank line
ends an event; `:` starts a comment; one space after the colon is dropped; `data` lines join with
LF; a partial event when the stream ends is dropped. The `id` and `retry` fields, which the SDKs'
streams never read, are skipped (an event of nothing else is none here; openai's stream failed on
its empty data).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2

_DRAIN_S = 0.1  # the SDK's own limit for reading what follows [DONE]
SKIP: Any = object()  # what `handle` returns for an event the SDK's stream passes over (a ping)
# (event name or None, data, the response) -> the item, or SKIP; raises the SDK's error
Handle = Callable[[str | None, str, httpx2.Response], Any]
SDKError = Callable[..., Exception]  # the SDK's APITimeoutError / APIConnectionError(request=)


class EventBatches:
    """The items of one 2xx response's events (door.py's `Events`): a list for each chunk read
    that completed any; `close()` releases the connection."""

    __slots__ = ("_end", "_errors", "_handle", "_response")

    def __init__(
        self,
        response: httpx2.Response,
        *,
        handle: Handle,
        errors: tuple[SDKError, SDKError],
        end: bytes | None = None,
    ) -> None:
        self._response = response
        self._handle = handle
        self._errors = errors  # (timeout, connection): the SDK's, as its _iter_events raises
        self._end = end  # the data that ends the stream (module doc)

    def __aiter__(self) -> AsyncIterator[list[Any]]:
        return self._batches()

    async def close(self) -> None:
        await self._response.aclose()

    async def _batches(self) -> AsyncIterator[list[Any]]:
        response, handle = self._response, self._handle
        parser = Parser(self._end)
        chunks = aiter(response.aiter_bytes())
        try:
            async for chunk in chunks:
                batch = [
                    item
                    for event, data in parser.feed(chunk)
                    if (item := handle(event, data, response)) is not SKIP
                ]
                if batch:
                    yield batch
                if parser.ended:
                    await _read_rest(chunks)
                    return
            batch = [
                item
                for event, data in parser.finish()
                if (item := handle(event, data, response)) is not SKIP
            ]
            if batch:
                yield batch
        except httpx2.TimeoutException as exc:
            raise self._errors[0](request=response.request) from exc
        except (httpx2.RequestError, ssl.SSLError) as exc:
            raise self._errors[1](request=response.request) from exc
        finally:
            await response.aclose()


async def _read_rest(chunks: AsyncIterator[bytes]) -> None:
    """What follows the end marker, read and dropped for the connection's reuse, as the SDK's
    drain does: for at most 0.1 s, and a failure is no error (the answer is whole). Then the
    response is closed, and with it a connection whose body did not end."""
    try:
        async with asyncio.timeout(_DRAIN_S):
            async for _ in chunks:
                pass
    except Exception:  # noqa: BLE001 (TimeoutError or the transport's: the answer is whole)
        return


class Parser:
    """Splits the chunks of an event stream into (event name or None, data) pairs: each chunk
    split in C, its lines walked in one loop, only what is kept decoded."""

    __slots__ = ("_data", "_end", "_ended", "_event", "_pending")

    def __init__(self, end: bytes | None = None) -> None:
        self._end = end
        self._ended = False  # the end marker came: the rest is dropped
        self._pending = b""  # the unfinished last line
        self._event = b""
        self._data: list[bytes] = []

    @property
    def ended(self) -> bool:
        return self._ended

    def feed(self, chunk: bytes) -> list[tuple[str | None, str]]:
        if self._ended:
            return []
        text = self._pending + chunk
        if b"\r" in text:
            # a CR at the end may be the first half of a CRLF: it waits for the next chunk
            held = text.endswith(b"\r")
            text = text[:-1] if held else text
            text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + (b"\r" if held else b"")
        *lines, self._pending = text.split(b"\n")
        events: list[tuple[str | None, str]] = []
        for line in lines:
            if not line:
                if self._event or self._data:
                    data = b"\n".join(self._data)
                    if self._end is not None and data.startswith(self._end):
                        self._ended, self._pending = True, b""
                        return events  # as the SDK's `startswith("[DONE]")`
                    events.append((self._event.decode() or None, data.decode()))
                    self._event, self._data = b"", []
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
        return events

    def finish(self) -> list[tuple[str | None, str]]:
        """The stream ended: a CR held back was a line end after all."""
        return self.feed(b"\n") if self._pending.endswith(b"\r") else []
