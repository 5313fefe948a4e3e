"""Tool calling for models without function calling: tools described in the prompt, calls read back.

`ToolModeProvider` wraps a vendor provider with `llm.tool_mode`:
- native: tools go in the API's `tools` parameter (this wrapper steps aside);
- text: tools are described in the system prompt and a reply that is the JSON object
  `{"tool_calls": [{"name": ..., "arguments": {...}}]}` is read as calls. A reply that tries and
  fails to be one gets one retry with the parse error; after that it is a plain answer;
- auto: native, until the server clearly refuses the `tools` parameter (`ToolsUnsupported`, a 400
  such as Ollama's "does not support tools" or llama.cpp's "requires --jinja", before any output);
  from then on text mode for the rest of the process, logged once. The switch is for good, so
  anything less clear (a 500 that mentions functions, an error after the stream began) is an
  ordinary failure: retried, or shown as one.

Text that cannot be a call streams through at once; a reply that opens with `{` or a code fence
is held back until it is complete, so a call's JSON never flashes up in the chat.
"""

from __future__ import annotations

import json
import logging
import operator
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import Any, Literal

from agent.providers.base import Provider, ToolsUnsupported
from agent.providers.textcalls import CallFormatError, parse_calls, tools_prompt
from agent.providers.wire import cached
from agent.types import (
    Message,
    ModelRequest,
    ModelStream,
    Stop,
    StreamRestart,
    TextDelta,
    ToolCallEvent,
)

log = logging.getLogger(__name__)

ToolMode = Literal["native", "text", "auto"]
RETRY = (
    "Your last reply could not be read as a tool call: {error}. If you meant to call a tool, reply "
    'with only the JSON object {{"tool_calls": [{{"name": "...", "arguments": {{...}}}}]}}; '
    "otherwise answer in plain text."
)


class ToolModeProvider:
    def __init__(self, inner: Provider, mode: ToolMode) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.mode: ToolMode = mode
        self._prompt: tuple[tuple[Any, ...], str] = ((), "")

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()

    async def stream(self, request: ModelRequest) -> ModelStream:
        if self.mode != "text":
            yielded = False
            try:
                async with aclosing(self.inner.stream(request)) as events:
                    async for event in events:
                        yielded = True
                        yield event
                return
            except ToolsUnsupported as exc:
                if self.mode != "auto" or yielded:
                    raise  # a server that streamed an answer took the tools: no refusal
                log.warning(
                    "%s; using text-mode tool calling from now on (llm.tool_mode: auto)", exc
                )
                self.mode = "text"
        async with aclosing(self._text_mode(request)) as events:
            async for event in events:
                yield event

    async def _text_mode(self, request: ModelRequest) -> ModelStream:
        # the history goes as text even when no tools are offered: the server may not know them
        plain = replace(request, tools=(), messages=as_text_messages(request.messages))
        if not request.tools:
            async with aclosing(self.inner.stream(plain)) as events:
                async for event in events:
                    yield event
            return
        plain = replace(plain, system=f"{request.system}\n\n{self._tools_prompt(request)}".strip())
        names = frozenset(spec.name for spec in request.tools)
        for attempt in (1, 2):
            reader = _Reader()
            stop = Stop("end_turn")
            async with aclosing(self.inner.stream(plain)) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        if out := reader.feed(event.text):
                            yield TextDelta(out)
                    elif isinstance(event, Stop):
                        stop = event
                    else:
                        yield event  # usage; tool calls cannot come without tools
            try:
                calls = parse_calls(reader.text, names)
            except CallFormatError as exc:
                if attempt == 1:
                    log.info(
                        "%s: unreadable text-mode tool call (%s); asking again", self.name, exc
                    )
                    if reader.emitted:
                        yield StreamRestart()
                    retry = (
                        Message("assistant", reader.text),
                        Message("user", RETRY.format(error=exc)),
                    )
                    plain = replace(plain, messages=(*plain.messages, *retry))
                    continue
                calls = None  # asked twice: take the words as they are
            if calls:
                for call in calls:
                    yield ToolCallEvent(call)
                yield Stop("tool_use")
                return
            if held := reader.held():
                yield TextDelta(held)
            yield stop
            return

    def _tools_prompt(self, request: ModelRequest) -> str:
        # built once per tool set (the coordinator hands the same tuple for a persona version)
        if self._prompt[0] is not request.tools:
            self._prompt = (request.tools, tools_prompt(request.tools))
        return self._prompt[1]


class _Reader:
    """Streams a reply that cannot be a call; holds back one that opens like JSON or a fence."""

    __slots__ = ("emitted", "mode", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.mode: Literal["undecided", "stream", "hold"] = "undecided"
        self.emitted = False

    def feed(self, text: str) -> str:
        self.parts.append(text)
        if self.mode == "stream":
            return text
        if self.mode == "hold":
            return ""
        start = "".join(self.parts)
        if not start.strip():
            return ""
        if start.lstrip()[0] in "{`":
            self.mode = "hold"
            return ""
        self.mode = "stream"
        self.emitted = True
        return start

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def held(self) -> str:
        return self.text if self.mode == "hold" else ""


def as_text_messages(messages: Sequence[Message]) -> tuple[Message, ...]:
    """History without native tool messages: calls as the JSON the model writes, results as text.

    Each converted message is made once and kept on its source, so the vendor module's encoded
    pieces (kept on the converted message) are reused on the next call too; messages with nothing
    to convert pass as they are."""
    out: list[Message] = []
    results: list[Message] = []
    for message in messages:
        if message.role == "tool":
            results.append(message)
            continue
        if results:
            out.append(_results_message(results))
            results = []
        if message.role == "assistant" and message.tool_calls:
            out.append(cached(message, "text", _calls_message))
        else:
            out.append(message)
    if results:
        out.append(_results_message(results))
    return tuple(out)


def _calls_message(message: Message) -> Message:
    calls = [{"name": c.name, "arguments": c.arguments_object()} for c in message.tool_calls]
    text = json.dumps({"tool_calls": calls}, ensure_ascii=False)
    return Message("assistant", f"{message.content}\n\n{text}".strip())


def _results_message(results: list[Message]) -> Message:
    """One user message for consecutive tool results, kept on the first with the group it is for."""
    group = tuple(results)
    kept: tuple[tuple[Message, ...], Message] | None = results[0].derived.get("text")
    if kept is None or len(kept[0]) != len(group) or any(map(operator.is_not, kept[0], group)):
        texts = [
            f"Tool {m.name or 'call'} ({m.tool_call_id}) {'failed' if m.is_error else 'returned'}:"
            f"\n{m.content}"
            for m in group
        ]
        kept = results[0].derived["text"] = (
            group,
            # what the tools made (a chart, a PDF) goes with their text, as a user's would
            Message(
                "user",
                "[tool results]\n\n" + "\n\n".join(texts),
                parts=tuple(p for m in group for p in m.parts),
            ),
        )
    return kept[1]
