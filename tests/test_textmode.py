"""Text-mode tool calling (`llm.tool_mode`) with the real `openai` client against a compatible
fake server that has no function calling, through a web socket conversation."""

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import ClientSession

from agent.providers.base import ProviderRejected, ProviderUnavailable, ToolsUnsupported
from agent.providers.classify import classify
from agent.providers.textcalls import CallFormatError, parse_calls
from agent.providers.textmode import ToolModeProvider
from agent.types import Message, ModelRequest, ModelStream, TextDelta
from tests.conftest import Running, ask_once, connect
from tests.fake_llm import Reply, fail, llm_config
from tests.fake_openai import FakeOpenAI

OLLAMA_REFUSAL = "registry.ollama.ai/library/gemma:2b does not support tools"
SCHEMA_ERROR = (
    "Invalid schema for function 'get_current_datetime': In context=(), 'required' is required to"
    " be supplied and to be an array including every key in properties. Missing 'timezone'."
)
CALL = '{"tool_calls": [{"name": "get_current_datetime", "arguments": {"timezone": "UTC"}}]}'
KNOWN = frozenset({"get_current_datetime"})


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(compat=True) as server:
        yield server


def _shown(frames: list[dict[str, Any]]) -> list[str]:
    return [f["text"] for f in frames if f["type"] in ("message.updated", "message.completed")]


async def test_text_mode_describes_tools_and_reads_the_call(
    running: Running, session: ClientSession, fake: FakeOpenAI
) -> None:
    fake.add(Reply(text=[CALL[:30], CALL[30:]], delay_s=0.02), Reply(text=["It is noon UTC."]))
    app = await running(llm=llm_config("openai", fake, tool_mode="text"))
    completed, frames = await ask_once(session, app, "what time is it?")
    assert completed["text"] == "It is noon UTC."
    assert not any("tool_calls" in text for text in _shown(frames))  # the JSON never shows
    first, second = (r.body for r in fake.requests)
    assert "tools" not in first and "tools" not in second
    system = first["messages"][0]["content"]
    assert "get_current_datetime" in system and '{"tool_calls": [' in system
    said, results = second["messages"][-2:]
    assert (
        said["role"] == "assistant"
        and json.loads(said["content"])["tool_calls"][0]["name"] == "get_current_datetime"
    )
    assert results["role"] == "user" and results["content"].startswith("[tool results]")
    assert '"timezone": "UTC"' in results["content"]


async def test_an_unreadable_call_gets_one_retry_with_the_error(
    running: Running, session: ClientSession, fake: FakeOpenAI
) -> None:
    broken = '{"tool_calls": [{"name": "get_current_datetime", "arguments": {"timezone": '
    fake.add(Reply(text=[broken]), Reply(text=[CALL]), Reply(text=["Done."]))
    app = await running(llm=llm_config("openai", fake, tool_mode="text"))
    completed, _ = await ask_once(session, app, "what time is it?")
    assert completed["text"] == "Done."
    retry = fake.requests[1].body["messages"]
    assert retry[-2] == {"role": "assistant", "content": broken}
    assert "could not be read as a tool call: not valid JSON" in retry[-1]["content"]
    assert "[tool results]" in fake.requests[2].body["messages"][-1]["content"]


async def test_unreadable_twice_is_taken_as_the_answer(
    running: Running, session: ClientSession, fake: FakeOpenAI
) -> None:
    broken = '{"tool_calls": oops}'
    fake.add(Reply(text=[broken]), Reply(text=["Some words, then ", broken]))
    app = await running(llm=llm_config("openai", fake, tool_mode="text"))
    completed, _ = await ask_once(session, app, "what time is it?")
    assert completed["text"] == "Some words, then " + broken
    assert len(fake.requests) == 2


@pytest.mark.parametrize(
    "refusal",
    [
        fail(400, "invalid_request_error", OLLAMA_REFUSAL),
        fail(500, "server_error", "tools param requires --jinja flag"),  # llama.cpp says 500
    ],
)
async def test_auto_switches_to_text_when_the_server_refuses_tools(
    running: Running,
    session: ClientSession,
    fake: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
    refusal: Reply,
) -> None:
    caplog.set_level(logging.WARNING)
    answers = iter([Reply(text=[CALL]), Reply(text=["Noon."]), Reply(text=["Hello again."])])

    def script(body: dict[str, Any]) -> Reply:
        return refusal if "tools" in body else next(answers)

    fake.script = script
    app = await running(llm=llm_config("openai", fake, tool_mode="auto"))
    client = await connect(session, app)
    await client.hello()
    assert (await client.ask("what time is it?"))["text"] == "Noon."
    assert ["tools" in r.body for r in fake.requests] == [True, False, False]
    assert (await client.ask("hi"))["text"] == "Hello again."
    assert "tools" not in fake.requests[-1].body and len(fake.requests) == 4  # stays in text mode
    history = fake.requests[-1].body["messages"]
    assert len(history) == 6  # system, then the first turn's exchange as plain text, then "hi"
    assert all(m["role"] != "tool" and "tool_calls" not in m for m in history)
    switched = [r for r in caplog.records if "text-mode tool calling" in r.getMessage()]
    assert len(switched) == 1


async def test_auto_keeps_native_tools_after_a_schema_error(
    running: Running, session: ClientSession, fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    # "function" and "required" are in the message, but the server did not refuse tools
    fake.add(fail(400, "invalid_request_error", SCHEMA_ERROR), Reply(text=["Hello again."]))
    app = await running(llm=llm_config("openai", fake, tool_mode="auto", max_retries=2))
    client = await connect(session, app)
    await client.hello()
    refused = await client.ask("what time is it?")
    assert refused["text"].startswith("Sorry — the AI model refused the request")
    assert (await client.ask("hi"))["text"] == "Hello again."
    assert ["tools" in r.body for r in fake.requests] == [True, True]  # not retried, no switch
    assert "text-mode tool calling" not in caplog.text


async def test_auto_retries_a_500_that_mentions_function_calls(
    running: Running, session: ClientSession, fake: FakeOpenAI
) -> None:
    fake.add(
        fail(500, "server_error", "function call parsing requires valid JSON"),
        Reply(text=["Noon."]),
    )
    app = await running(llm=llm_config("openai", fake, tool_mode="auto"))
    completed, _ = await ask_once(session, app, "what time is it?")
    assert completed["text"] == "Noon."
    assert ["tools" in r.body for r in fake.requests] == [True, True]  # retried, still native


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (400, OLLAMA_REFUSAL, ToolsUnsupported),
        (400, "tools param requires --jinja flag", ToolsUnsupported),
        (500, "tools param requires --jinja flag", ToolsUnsupported),
        (500, "Unsupported param: tools", ToolsUnsupported),  # older llama.cpp
        (
            400,
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser',
            ToolsUnsupported,
        ),  # vLLM
        (400, "function calling is not supported by this model", ToolsUnsupported),
        (422, "Unrecognized request argument supplied: tools", ToolsUnsupported),
        (400, SCHEMA_ERROR, ProviderRejected),
        (500, "function call parsing requires valid JSON", ProviderUnavailable),
        (500, "tool call parser crashed: not supported token", ProviderUnavailable),
        (None, "function call parsing requires valid JSON", ProviderUnavailable),  # mid-stream
    ],
)
def test_which_failures_refuse_tools(
    status: int | None, message: str, expected: type[Exception]
) -> None:
    error = classify(
        who="w", key_hint="k", status=status, kind=None, code=None, message=message, had_tools=True
    )
    assert type(error) is expected, error


class _FailsAfterText:
    """A provider whose failure comes after it streamed: it took the tools, whatever it says."""

    name = model = "fails-after-text"

    async def stream(self, request: ModelRequest) -> ModelStream:
        yield TextDelta("Half an answer")
        raise ToolsUnsupported("fails-after-text: tools are not supported")


async def test_auto_does_not_switch_on_a_failure_after_output() -> None:
    provider = ToolModeProvider(_FailsAfterText(), "auto")
    request = ModelRequest("", (Message("user", "hi"),))
    with pytest.raises(ToolsUnsupported):
        async for _ in provider.stream(request):
            pass
    assert provider.mode == "auto"


def test_parse_calls_forms() -> None:
    [call] = parse_calls(f"```json\n{CALL}\n```", KNOWN) or []
    assert call.name == "get_current_datetime" and json.loads(call.arguments) == {"timezone": "UTC"}
    [call] = parse_calls(f"Let me look.\n{CALL}", KNOWN) or []  # words before the object
    assert call.name == "get_current_datetime"
    [call] = (
        parse_calls('{"name": "get_current_datetime", "arguments": "{}"}', KNOWN) or []
    )  # bare form
    assert call.arguments == "{}"
    assert parse_calls("It is noon.", KNOWN) is None
    assert parse_calls('{"name": "Ada", "age": 36}', KNOWN) is None  # JSON that is an answer
    with pytest.raises(CallFormatError, match="non-empty list"):
        parse_calls('{"tool_calls": []}', KNOWN)
    with pytest.raises(CallFormatError, match="must be a JSON object"):
        parse_calls('{"tool_calls": [{"name": "x", "arguments": [1]}]}', KNOWN)
