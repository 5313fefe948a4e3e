"""sse.py splits a stream into the events the SDKs' own decoders make of it, however it is chunked,
hands them on a batch per chunk read, and ends openai's at `[DONE]` reading the body to its end."""

import asyncio
import gc
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx2
import openai
import pytest
from anthropic._streaming import ServerSentEvent as AnthropicEvent
from anthropic._streaming import SSEDecoder as AnthropicDecoder
from openai._streaming import ServerSentEvent as OpenAIEvent
from openai._streaming import SSEDecoder as OpenAIDecoder

from agent.providers.openai import OpenAIProvider
from agent.providers.sse import EventBatches, Parser
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
    """What the SDKs' streams read of an event, its name and data; an event of only an id or a
    retry is none here (module doc of sse.py)."""
    return [(e.event, e.data) for e in events if e.event or e.data]


def _parsed(chunks: list[bytes], end: bytes | None = None) -> list[tuple[str | None, str]]:
    parser = Parser(end)
    return [pair for chunk in chunks for pair in parser.feed(chunk)] + parser.finish()


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("decoder", [OpenAIDecoder, AnthropicDecoder])
async def test_every_chunking_gives_the_events_the_sdk_decoder_gives(
    stream: bytes, decoder: type[OpenAIDecoder] | type[AnthropicDecoder]
) -> None:
    expected = _seen([e async for e in decoder().aiter_bytes(_aiter([stream]))])
    assert expected  # each stream has events
    for size in range(1, len(stream) + 1):
        assert _parsed(_chunks(stream, size)) == expected, f"chunks of {size} bytes"


def test_bytes_that_are_not_utf8_fail_as_the_sdk_decoder_does() -> None:
    with pytest.raises(UnicodeDecodeError):
        _parsed([b"data: \xff\n\n"])
    with pytest.raises(UnicodeDecodeError):
        list(OpenAIDecoder().iter_bytes(iter([b"data: \xff\n\n"])))


def _response(body: AsyncIterator[bytes]) -> httpx2.Response:
    return httpx2.Response(200, content=body, request=httpx2.Request("POST", "http://model/"))


def _data(name: str | None, data: str, response: httpx2.Response) -> str:
    return data


async def _batches(body: AsyncIterator[bytes], end: bytes | None = None) -> list[list[str]]:
    errors = (openai.APITimeoutError, openai.APIConnectionError)
    events = EventBatches(_response(body), handle=_data, errors=errors, end=end)
    return [batch async for batch in events]


@pytest.mark.parametrize("size", [1, 5, 1000])
async def test_the_end_marker_ends_the_events_and_the_body_is_read_to_its_end(size: int) -> None:
    stream = b'data: {"a":1}\n\ndata: [DONE]\n\ndata: {"after":1}\n\nevent: x\ndata: y\n\n'
    chunks = _chunks(stream, size)
    read: list[bytes] = []

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            read.append(chunk)
            yield chunk

    assert _parsed(chunks, end=b"[DONE]") == [(None, '{"a":1}')]  # the SDK stops at [DONE] too
    assert [d for batch in await _batches(body(), end=b"[DONE]") for d in batch] == ['{"a":1}']
    assert read == chunks  # the rest read, for the connection's reuse


async def test_each_chunk_read_is_one_batch_of_the_events_it_completed() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b"data: a\n\ndata: b\n\nda"
        yield b"ta: c"
        yield b"\n\n: nothing but a comment\n\n"
        yield b"data: d\n\n"

    assert await _batches(body()) == [["a", "b"], ["c"], ["d"]]


@pytest.mark.parametrize("after", ["fails", "hangs"])
async def test_what_follows_the_end_marker_is_no_error_and_no_wait(after: str) -> None:
    """As the SDK's drain: a body that breaks or never ends after [DONE] still gives the answer."""

    async def body() -> AsyncIterator[bytes]:
        yield b'data: {"a":1}\n\ndata: [DONE]\n\n'
        if after == "fails":
            raise httpx2.ReadError("the server went away")
        await asyncio.Event().wait()  # the body never ends
        yield b""

    async with asyncio.timeout(5):  # a guard, not a measure: the drain gives up after 0.1 s
        assert await _batches(body(), end=b"[DONE]") == [['{"a":1}']]


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        (httpx2.ReadTimeout("slow"), openai.APITimeoutError),
        (httpx2.ReadError("reset"), openai.APIConnectionError),
    ],
)
async def test_a_failed_read_is_the_sdks_error_as_its_stream_raises(
    failure: Exception, error: type[Exception]
) -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b"data: a\n\n"
        raise failure

    with pytest.raises(error):
        await _batches(body())


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
