"""sse.py splits a stream into the events the SDKs' own decoders make of it, however it is chunked,
and ends openai's at `[DONE]` reading the body to its end."""

import asyncio
import gc
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from anthropic._streaming import ServerSentEvent as AnthropicEvent
from anthropic._streaming import SSEDecoder as AnthropicDecoder
from openai._streaming import ServerSentEvent as OpenAIEvent
from openai._streaming import SSEDecoder as OpenAIDecoder

from agent.providers.openai import OpenAIProvider
from agent.providers.sse import SSELines
from agent.types import Message, ModelRequest, Stop, TextDelta
from tests.fake_llm import Reply
from tests.fake_openai import FakeOpenAI

STREAMS = [
    # the vendors' own shapes
    b'event: message_start\ndata: {"type":"message_start"}\n\nevent: ping\ndata: {}\n\n',
    b'data: {"choices":[]}\n\ndata: [DONE]\n\n',
    # CRLF and CR line ends, comments, a field without a colon or without its space
    b'event: a\r\ndata: {"x": 1}\r\n\r\n: keep-alive\r\rdata:no space\rdata\r\r',
    # data on several lines, an event with no data, a blank line too many, unknown fields
    b"data: one\ndata: two\n\nevent: lonely\n\n\n\nfoo: bar\ndata: three\n\n",
    # an id (kept across events, one holding NUL ignored), retry, and an event left unfinished
    b"id: 7\ndata: a\n\nid: x\x00y\ndata: b\n\nretry: 1500\ndata: c\n\nretry: soon\n\ndata: cut",
    # multi-byte UTF-8, split anywhere by the chunking below
    "data: Grüße ☃\n\n".encode(),
]


def _chunks(stream: bytes, size: int) -> list[bytes]:
    return [stream[i : i + size] for i in range(0, len(stream), size)]


async def _aiter(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def _seen(events: Sequence[OpenAIEvent | AnthropicEvent]) -> list[tuple[object, ...]]:
    return [(e.event, e.data, e.id or None, e.retry) for e in events]


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize(
    ("decoder", "event"), [(OpenAIDecoder, OpenAIEvent), (AnthropicDecoder, AnthropicEvent)]
)
async def test_every_chunking_gives_the_events_the_sdk_decoder_gives(
    stream: bytes, decoder: type[OpenAIDecoder] | type[AnthropicDecoder], event: type
) -> None:
    expected = _seen([e async for e in decoder().aiter_bytes(_aiter([stream]))])
    assert expected  # each stream has events
    for size in range(1, len(stream) + 1):
        chunks = _chunks(stream, size)
        ours = [e async for e in SSELines(event).aiter_bytes(_aiter(chunks))]
        assert all(isinstance(e, event) for e in ours)
        assert _seen(ours) == expected, f"chunks of {size} bytes"
        assert _seen(list(SSELines(event).iter_bytes(iter(chunks)))) == expected


def test_bytes_that_are_not_utf8_fail_as_the_sdk_decoder_does() -> None:
    with pytest.raises(UnicodeDecodeError):
        list(SSELines(OpenAIEvent).iter_bytes(iter([b"data: \xff\n\n"])))
    with pytest.raises(UnicodeDecodeError):
        list(OpenAIDecoder().iter_bytes(iter([b"data: \xff\n\n"])))


@pytest.mark.parametrize("size", [1, 5, 1000])
async def test_the_end_marker_ends_the_events_and_the_body_is_read_to_its_end(size: int) -> None:
    stream = b'data: {"a":1}\n\ndata: [DONE]\n\ndata: {"after":1}\n\nevent: x\ndata: y\n\n'
    chunks = _chunks(stream, size)
    read: list[bytes] = []

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            read.append(chunk)
            yield chunk

    ours = [e async for e in SSELines(OpenAIEvent, end=b"[DONE]").aiter_bytes(body())]
    assert [e.data for e in ours] == ['{"a":1}']  # the SDK stops at [DONE] too
    assert read == chunks  # the rest read, for the connection's reuse
    assert [e.data for e in SSELines(OpenAIEvent, end=b"[DONE]").iter_bytes(iter(chunks))] == [
        '{"a":1}'
    ]


@pytest.mark.parametrize("after", ["fails", "hangs"])
async def test_what_follows_the_end_marker_is_no_error_and_no_wait(after: str) -> None:
    """As the SDK's drain: a body that breaks or never ends after [DONE] still gives the answer."""

    async def body() -> AsyncIterator[bytes]:
        yield b'data: {"a":1}\n\ndata: [DONE]\n\n'
        if after == "fails":
            raise ConnectionResetError("the server went away")
        await asyncio.Event().wait()  # the body never ends
        yield b""

    async with asyncio.timeout(5):  # a guard, not a measure: the drain gives up after 0.1 s
        ours = [e async for e in SSELines(OpenAIEvent, end=b"[DONE]").aiter_bytes(body())]
    assert [e.data for e in ours] == ['{"a":1}']


async def test_an_openai_call_leaves_no_async_generator_to_the_loops_finalizer() -> None:
    """The SDK's `break` at [DONE] left three unfinished (each a wake-up and a task to close)."""
    finalized: list[str] = []
    firstiter, finalizer = sys.get_asyncgen_hooks()
    assert finalizer is not None

    def counting(agen: Any) -> None:
        finalized.append(agen.ag_code.co_qualname)
        finalizer(agen)

    async with FakeOpenAI(script=lambda body: Reply(text=["Hel", "lo"])) as fake:
        provider = OpenAIProvider(api_key=fake.api_key, base_url=fake.url, model="m")
        try:
            sys.set_asyncgen_hooks(firstiter, counting)
            try:
                for _ in range(2):
                    events = [
                        e async for e in provider.stream(ModelRequest("", (Message("user", "hi"),)))
                    ]
                gc.collect()
                await asyncio.sleep(0)
            finally:
                sys.set_asyncgen_hooks(firstiter, finalizer)
        finally:
            await provider.aclose()
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta("Hel"), TextDelta("lo")]
    assert Stop("end_turn") in events
    assert finalized == []
