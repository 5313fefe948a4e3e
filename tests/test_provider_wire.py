"""Request bodies built from history pieces encoded once: what the fake servers receive is what
the SDKs' create() sent (through the SDK's internals and through its public API alike), and a
message sent again is not encoded again."""

import gc
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.history import HistoryWindow
from agent.providers import anthropic_wire as anthropic_module
from agent.providers import openai_wire as openai_module
from agent.providers.anthropic import AnthropicProvider
from agent.providers.anthropic_wire import _turns, to_anthropic
from agent.providers.door import PublicPost
from agent.providers.media import ALL_MEDIA
from agent.providers.openai import OpenAIProvider
from agent.providers.openai_wire import _items, to_openai
from agent.providers.prepared import PreparedPost
from agent.providers.textmode import as_text_messages
from agent.providers.wire import dumps, resume
from agent.types import Message, ModelEvent, ModelRequest, TextDelta, ToolCall
from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import Received, Reply
from tests.fake_openai import FakeOpenAI
from tools.base import ToolSpec

CALLS = (
    ToolCall("call_1", "lookup", '{"q": "Grüße ☃"}'),
    ToolCall("call_2", "lookup", "not json"),  # sent back as {} (APIs want an object)
)
HISTORY = (
    Message("user", 'Grüße, what is ☃? "quoted" and \\ backslash'),
    Message("assistant", "", CALLS),
    Message("tool", "snow", tool_call_id="call_1", name="lookup"),
    Message("tool", "boom", tool_call_id="call_2", name="lookup", is_error=True),
    Message("assistant", ""),  # empty: left out by both vendors
    Message("assistant", "A snowman.\n"),
    Message("user", "thanks"),
)
TOOLS = (
    ToolSpec(
        "lookup",
        "Look something up.",
        {"type": "object", "properties": {"q": {"type": "string"}}},
    ),
)


async def _text(provider: OpenAIProvider | AnthropicProvider, request: ModelRequest) -> str:
    events: list[ModelEvent] = [event async for event in provider.stream(request)]
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.fixture
async def openai_fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def anthropic_fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def _headers(received: Received) -> dict[str, str]:
    return {k: v for k, v in received.headers.items() if k not in ("Host", "Content-Length")}


@pytest.mark.parametrize("internals", [True, False], ids=["internals", "public"])
async def test_openai_request_is_what_create_sent(openai_fake: FakeOpenAI, internals: bool) -> None:
    openai_fake.add(Reply(text=["ok"]), Reply(text=["ok"]))
    provider = OpenAIProvider(
        api_key="test-key", base_url=openai_fake.url, model="m", sdk_internals=internals
    )
    assert isinstance(provider._door, PreparedPost if internals else PublicPost)
    request = ModelRequest("Be brief.", HISTORY, TOOLS, max_tokens=99)
    assert await _text(provider, request) == "ok"
    tool = {"type": "function", "function": {"name": "lookup", "description": "Look something up.",
            "parameters": dict(TOOLS[0].parameters)}}  # fmt: skip
    before: dict[str, Any] = {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 99,
        "messages": to_openai("Be brief.", HISTORY),
        "tools": [tool],
    }
    # the same request through the SDK's create(), as the provider sent it before
    async for _ in await provider._client.chat.completions.create(**before):
        pass
    await provider.aclose()
    ours, sdk = openai_fake.requests
    assert ours.path == sdk.path == "/v1/chat/completions"
    assert ours.body == sdk.body == before
    assert _headers(ours) == _headers(sdk) and ours.headers["Authorization"] == "Bearer test-key"
    assert ours.body["messages"][2]["tool_calls"][1]["function"]["arguments"] == "{}"
    assert ours.body["messages"][4]["content"] == "Error: boom"


@pytest.mark.parametrize("internals", [True, False], ids=["internals", "public"])
async def test_anthropic_request_is_what_create_sent(
    anthropic_fake: FakeAnthropic, internals: bool
) -> None:
    anthropic_fake.add(Reply(text=["ok"]), Reply(text=["ok"]))
    provider = AnthropicProvider(
        api_key="test-key", base_url=anthropic_fake.url, model="m", sdk_internals=internals
    )
    assert isinstance(provider._door, PreparedPost if internals else PublicPost)
    request = ModelRequest("Be brief.", HISTORY, TOOLS, max_tokens=99)
    assert await _text(provider, request) == "ok"
    tool = {"name": "lookup", "description": "Look something up.",
            "input_schema": dict(TOOLS[0].parameters)}  # fmt: skip
    before: dict[str, Any] = {
        "model": "m",
        "max_tokens": 99,
        "stream": True,
        "system": "Be brief.",
        "messages": to_anthropic(HISTORY),
        "tools": [tool],
    }
    async for _ in await provider._client.messages.create(**before):
        pass
    await provider.aclose()
    ours, sdk = anthropic_fake.requests
    assert ours.path == sdk.path == "/v1/messages"
    assert ours.body == sdk.body == before
    assert _headers(ours) == _headers(sdk) and ours.headers["anthropic-version"]
    # both tool results in one user turn, the empty assistant message left out: turns alternate
    roles = [turn["role"] for turn in ours.body["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert len(ours.body["messages"][2]["content"]) == 2


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_a_message_sent_again_is_not_encoded_again(
    vendor: str, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic
) -> None:
    fake: FakeOpenAI | FakeAnthropic = openai_fake if vendor == "openai" else anthropic_fake
    fake.add(Reply(text=["one"]), Reply(text=["two"]))
    cls = OpenAIProvider if vendor == "openai" else AnthropicProvider
    provider = cls(api_key="test-key", base_url=fake.url, model="m")
    first = Message("user", "first question")
    await _text(provider, ModelRequest("", (first,)))
    # The stored piece is what goes out again: change it, and the next request carries the change.
    stored: Any = first.derived[vendor]
    if vendor == "openai":
        first.derived[vendor] = dumps({"role": "user", "content": "from the cache"})
    else:
        turn = {"role": "user", "content": [{"type": "text", "text": "from the cache"}]}
        role, blocks, _ = stored
        first.derived[vendor] = (role, blocks, dumps(turn))
    # what the last request made of the history is kept too (the tests below); forget it so the
    # piece itself is read again
    module = openai_module if vendor == "openai" else anthropic_module
    first.derived.pop(module._PREFIX + provider.media.key)
    answer = Message("assistant", "one")
    await _text(provider, ModelRequest("", (first, answer, Message("user", "second"))))
    await provider.aclose()
    messages: list[dict[str, Any]] = fake.requests[1].body["messages"]
    first_sent = messages[0]["content"]
    assert first_sent in ("from the cache", [{"type": "text", "text": "from the cache"}])
    assert len(messages) == 3 and vendor in answer.derived


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_each_call_sends_its_own_system_prompt_though_its_encoding_is_kept(
    vendor: str, openai_fake: FakeOpenAI, anthropic_fake: FakeAnthropic
) -> None:
    """A persona edited while the bot runs: the next call carries the new prompt, not the
    encoding kept from the last (and none, when a request has no system prompt)."""
    fake: FakeOpenAI | FakeAnthropic = openai_fake if vendor == "openai" else anthropic_fake
    fake.add(*(Reply(text=["ok"]) for _ in range(4)))
    cls = OpenAIProvider if vendor == "openai" else AnthropicProvider
    provider = cls(api_key="test-key", base_url=fake.url, model="m")
    history = (Message("user", "hi"),)
    for system in ("Be brief.", "Be brief.", "Answer in French.", ""):
        await _text(provider, ModelRequest(system, history))
    await provider.aclose()
    if vendor == "openai":
        systems = [
            [m["content"] for m in r.body["messages"] if m["role"] == "system"]
            for r in fake.requests
        ]
        assert systems == [["Be brief."], ["Be brief."], ["Answer in French."], []]
    else:
        fields = [r.body.get("system") for r in fake.requests]
        assert fields == ["Be brief.", "Be brief.", "Answer in French.", None]


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_the_sdk_builds_the_request_once_not_per_call(
    vendor: str,
    openai_fake: FakeOpenAI,
    anthropic_fake: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake: FakeOpenAI | FakeAnthropic = openai_fake if vendor == "openai" else anthropic_fake
    fake.add(Reply(text=["one"]), Reply(text=["two"]))
    cls = OpenAIProvider if vendor == "openai" else AnthropicProvider
    provider = cls(api_key="test-key", base_url=fake.url, model="m")
    builds: list[Any] = []
    build = provider._client._build_request

    def counted(*args: Any, **kwargs: Any) -> Any:
        builds.append(args)
        return build(*args, **kwargs)

    monkeypatch.setattr(provider._client, "_build_request", counted)
    assert await _text(provider, ModelRequest("", (Message("user", "first"),))) == "one"
    assert await _text(provider, ModelRequest("", (Message("user", "second"),))) == "two"
    await provider.aclose()
    assert builds == []  # built when the provider was made; a call only sends it with its body
    first, second = fake.requests
    assert _headers(first) == _headers(second) and first.body != second.body
    assert int(second.headers["Content-Length"]) == len(
        json.dumps(second.body, separators=(",", ":"), ensure_ascii=False).encode()
    )


def test_token_estimates_are_made_once_per_message() -> None:
    window = HistoryWindow()
    rows = [("t1", Message("user", "a" * 400)), ("t2", Message("user", "b" * 400))]
    assert window.fit("s", rows, 1000) == [m for _, m in rows]
    # a window that starts over (a trimmed history) reuses each message's estimate
    rows[1][1].derived["tokens"] = 5000
    assert HistoryWindow().fit("s", rows, 1000) == []


def test_text_mode_history_is_converted_once() -> None:
    first, second = as_text_messages(HISTORY), as_text_messages(HISTORY)
    assert [m.role for m in first] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "assistant",
        "user",
    ]
    assert all(a is b for a, b in zip(first, second, strict=True))  # their pieces stay encoded
    assert first[0] is HISTORY[0] and "boom" in first[2].content and "snow" in first[2].content
    # a group of results that is not the one kept (here: one result fewer) is made anew
    [calls, results] = as_text_messages(HISTORY[1:3])
    assert "snow" in results.content and "boom" not in results.content
    assert as_text_messages(HISTORY)[2] is not results


def _growing_histories() -> list[tuple[Message, ...]]:
    """A conversation growing a few messages a request (tool rounds, empty assistant messages)."""
    history: list[Message] = []
    histories = []
    for n in range(40):
        call = ToolCall(f"c{n}", "lookup", "{}")
        history += [
            Message("user", f"question {n}"),
            Message("assistant", "", (call,)) if n % 3 == 0 else Message("assistant", f"a{n}"),
        ]
        if n % 3 == 0:
            history += [
                Message("tool", "r", tool_call_id=call.id, name="lookup"),
                Message("assistant", "" if n % 2 else f"after {n}"),
            ]
        histories.append(tuple(history))
    return histories


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_a_request_continues_from_the_last_one_and_stays_what_the_conversion_makes(
    vendor: str,
) -> None:
    # each body is exactly what `to_openai`/`to_anthropic` make of the whole history, and a request
    # walks only the messages its conversation's last request did not have (tool rounds merge
    # into user turns for anthropic; empty assistant messages are left out)
    key = (
        openai_module._PREFIX if vendor == "openai" else anthropic_module._PREFIX
    ) + ALL_MEDIA.key
    previous: tuple[Message, ...] = ()
    histories = _growing_histories()
    for messages in histories:
        if previous:
            prefix = resume(messages, key)  # picks up where the last one stopped
            assert prefix is not None and prefix.count == len(previous)
        if vendor == "openai":
            assert json.loads(b"[" + b",".join(_items(messages)) + b"]") == to_openai("", messages)
        else:
            assert json.loads(b"[" + b",".join(_turns(messages)) + b"]") == to_anthropic(messages)
        previous = messages
        assert [m for m in messages if key in m.derived] == [messages[-1]]  # one kept
    moved = histories[-1][10:]  # the history window dropped the oldest turns
    assert resume(moved, key) is None


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_what_a_history_keeps_is_not_walked_by_every_full_collection(vendor: str) -> None:
    # Every cached history keeps its messages' pieces; a full collection of the cyclic GC walks
    # every tracked object and holds the event loop meanwhile (bot/runtime/heap.py). The pieces are plain
    # bytes and tuples of strings, which the collector stops tracking once it has seen them, so a
    # message's `derived` is not walked again: only the message itself and, on the newest one,
    # what its conversation's last request made of the history.
    key = (
        openai_module._PREFIX if vendor == "openai" else anthropic_module._PREFIX
    ) + ALL_MEDIA.key
    messages = _growing_histories()[-1]
    if vendor == "openai":
        _items(messages)
    else:
        _turns(messages)
    HistoryWindow().fit("s", [(str(n), m) for n, m in enumerate(messages)], 10**6)
    gc.collect()
    kept = [m for m in messages if gc.is_tracked(m.derived)]
    assert kept == [messages[-1]] and key in messages[-1].derived
