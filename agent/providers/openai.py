"""OpenAIProvider: Chat Completions through the official async `openai` SDK, streamed, for OpenAI
and every compatible server (Ollama, vLLM, llama.cpp, LM Studio, DeepSeek ...) via `base_url`.

Compatible servers differ in what they stream, so tool-call deltas are accumulated defensively:
by `index` (or by position when a server sends none), a new id at a used index starts a new
call, and so do more arguments after whole ones (a server that numbers nothing); arguments may
come in one piece (or as an object), names may repeat on every delta, ids may be missing, there
may be no usage chunk, and text and tool calls may share one message. SDK types never leave this
module.

The request is not made by `chat.completions.create`, which runs its request transform over every
message of the history against the whole message-param union on every call (~0.3 ms per message:
300 ms a call at 1,000 messages, most of a busy process's CPU). The body is assembled from pieces
encoded once per message (wire.py) and sent as the request the SDK built once for the endpoint
(prepared.py, which says why that way and what it costs), or through the SDK's public `post()`
when its internals are not as expected (openai_sdk.py, door.py): the SDK still does the transport,
auth, timeouts and its error types (an `error` inside the stream included).

Each chunk arrives as parsed JSON, not also built into a pydantic `ChatCompletionChunk` (~15 % of
a turn's CPU): on the fast path read by sse.py as the SDK's `AsyncStream[object]` would make it,
a batch per chunk read (on the public path, that stream itself), and the client runs on the
SDK's own aiohttp transport (`DefaultAioHttpClient`, the `aiohttp` extra), about a third less CPU
per call than httpx's (bench/provider_bench.py). Reading plain JSON means a field of the wrong
type raises here, which the stream maps to a retryable broken stream, as it does for JSON that
does not parse.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, cast

import httpx2
import openai

from agent.providers.base import ProviderError, ProviderUnavailable
from agent.providers.classify import MALFORMED, classify, connection_failure, malformed
from agent.providers.deadline import Deadline, Timeouts
from agent.providers.image_plan import Plan
from agent.providers.media import Media, media_for
from agent.providers.media_call import MediaCall
from agent.providers.openai_sdk import door
from agent.providers.openai_wire import _PREFIX, BASE, _items
from agent.providers.wire import LastEncoded, dumps, json_object
from agent.types import (
    ModelRequest,
    ModelStream,
    Stop,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    Usage,
)
from tools.base import ToolSpec
from tools.redact import redact_credentials, split_credentials

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gpt-5.4-mini"  # the SDK's current small model; gpt-4o-mini is being retired
KEY_HINT = "OPENAI_API_KEY (or llm.api_key)"
OPENAI_HOST = "api.openai.com"
_STOPS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


class OpenAIProvider:
    name = "openai"

    def __init__(
        self,
        *,
        api_key: str,
        model: str = DEFAULT_MODEL,
        base_url: str | None = None,
        timeouts: Timeouts | None = None,
        media: Media | None = None,
        sdk_internals: bool = True,
    ) -> None:
        self.model = model
        self.timeouts = timeouts or Timeouts()
        self._api_key = api_key
        # a user:password in the URL goes as the header it stands for: SDKs log their URLs
        base_url, auth = split_credentials(base_url)
        # the SDK's own aiohttp transport: a third less CPU per call than httpx (module doc)
        http = openai.DefaultAioHttpClient(timeout=self.timeouts.httpx())
        self._client = openai.AsyncOpenAI(
            http_client=http,
            api_key=api_key,
            base_url=base_url,
            default_headers=auth or None,
            max_retries=0,
            timeout=self.timeouts.httpx(),
        )
        # the request built once through SDK internals, or the SDK's public post() (door.py)
        self._door = door(self._client, http, internals=sdk_internals)
        self.base_url = str(self._client.base_url).rstrip("/")
        # OpenAI's newer models refuse `max_tokens`; compatible servers may not know the new name
        self._max_key = "max_completion_tokens" if OPENAI_HOST in self.base_url else "max_tokens"
        # what the model takes natively; the rest goes as text (media.py)
        self.media = media if media is not None else media_for("openai", self.base_url, None)
        self._tools: tuple[tuple[ToolSpec, ...], bytes] = ((), b"[]")
        self._system = LastEncoded(lambda text: {"role": "system", "content": text})

    async def aclose(self) -> None:
        await self._client.close()

    async def stream(self, request: ModelRequest) -> ModelStream:
        model = request.model or self.model
        who = f"openai {model} at {self.base_url}"
        media = MediaCall(request, self.media, _PREFIX + self.media.key, BASE + self.media.key)
        plan = await media.ready()
        deadline = Deadline(self.timeouts, who)
        for attempt in range(2):
            try:
                stream = await deadline.wait(self._door.open(self._body(request, model, plan)))
                break
            except (openai.OpenAIError, httpx2.HTTPError) as exc:
                error = self._error(exc, who, bool(request.tools))
                # an image it refused: once more without it (and never again: media_call.py)
                if not await media.refused(error, plan) or attempt:
                    deadline.close()
                    raise error from exc
                plan = await media.ready()
        media.sent(plan)
        state = _State()
        # an async generator (closed below): the chunks of each read (door.py)
        batches = cast(AsyncGenerator[list[Any], None], aiter(stream))
        try:
            while True:
                try:
                    batch = await deadline.wait(anext(batches))
                except StopAsyncIteration:
                    break
                for chunk in batch:
                    text = state.take(chunk)
                    if text:
                        yield TextDelta(text)
                if state.started:
                    deadline.token()
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            raise self._error(exc, who, bool(request.tools)) from exc
        except MALFORMED as exc:  # the SDK parses each data line to JSON; it does not map this
            raise malformed(who, exc) from exc
        finally:
            deadline.close()
            await batches.aclose()
            await stream.close()
        if state.finish is None and not state.calls:
            raise ProviderUnavailable(f"{who}: the stream ended before a finish_reason")
        for call in state.tool_calls():
            yield ToolCallEvent(call)
        if state.usage is not None:
            yield Usage(*state.usage, self.name, model)
        stop = "tool_use" if state.calls else _STOPS.get(state.finish or "", "other")
        yield Stop(stop)  # type: ignore[arg-type]

    def _body(self, request: ModelRequest, model: str, plan: Plan) -> bytes:
        """The Chat Completions request as JSON: the history's pieces are encoded once each."""
        system = [self._system(request.system)] if request.system else []
        fields: dict[str, Any] = {
            "model": model,
            "stream": True,
            "stream_options": {"include_usage": True},
            self._max_key: request.max_tokens,
        }
        encoded = {"tools": self._tool_params(request.tools)} if request.tools else {}
        items = _items(request.messages, self.media, plan)
        return json_object(fields, encoded, {"messages": [*system, *items]})

    def _tool_params(self, tools: tuple[ToolSpec, ...]) -> bytes:
        # the coordinator hands the same tuple for a persona version: encode once, not per call
        if self._tools[0] is not tools:
            params = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in tools
            ]
            self._tools = (tools, dumps(params))
        return self._tools[1]

    def _error(self, exc: Exception, who: str, had_tools: bool) -> ProviderError:
        if isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException):
            return self.timeouts.timed_out(who, exc)
        if isinstance(exc, openai.APIConnectionError | httpx2.HTTPError):
            failure = connection_failure(exc) or f"connection failed: {type(exc).__name__}"
            return ProviderUnavailable(f"{who}: {failure}")
        if not isinstance(exc, openai.APIError):
            return ProviderUnavailable(redact_credentials(f"{who}: {type(exc).__name__}: {exc}"))
        body = exc.body if isinstance(exc.body, dict) else {}
        status = getattr(exc, "status_code", None)  # None: an error object inside the stream
        response = getattr(exc, "response", None)
        return classify(
            who=who,
            key_hint=KEY_HINT,
            status=status,
            kind=exc.type or body.get("type"),
            code=exc.code,
            message=str(body.get("message") or exc.message),
            headers=response.headers if response is not None else None,
            had_tools=had_tools,
            api_key=self._api_key,
        )


@dataclass(slots=True)
class _Call:
    id: str
    name: str
    parts: list[str] = field(default_factory=list)
    next_name: str = ""  # a name that came after the arguments were whole: the next call's

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def whole(self) -> bool:
        """The arguments so far are one complete JSON object: nothing more can be appended."""
        if not self.parts or not self.parts[-1].rstrip().endswith("}"):
            return False  # cheap test first: this runs for every delta
        try:
            json.loads(self.text)
        except ValueError:
            return False
        return True


@dataclass(slots=True)
class _State:
    calls: list[_Call] = field(default_factory=list)
    slots: dict[int, int] = field(default_factory=dict)  # the server's index -> our call
    usage: tuple[int, int] | None = None
    finish: str | None = None
    started: bool = False

    def take(self, chunk: Any) -> str:
        """Fold one chunk (its JSON, as parsed) in; returns its text."""
        if not isinstance(chunk, dict):
            raise ValueError(f"a chunk that is not a JSON object: {type(chunk).__name__}")
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = (usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0)
            self.started = True
        text = ""
        for choice in chunk.get("choices") or ():
            if choice.get("index") not in (0, None):
                continue  # n > 1 is never asked for
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
                self.started = True
            delta = choice.get("delta")
            if not delta:
                continue
            content = delta.get("content")
            if content:
                text += content
                self.started = True
            for position, piece in enumerate(delta.get("tool_calls") or ()):
                self._add(position, piece)
                self.started = True
        return text

    def _add(self, position: int, piece: dict[str, Any]) -> None:
        index = piece.get("index")
        index = index if index is not None else position
        function = piece.get("function") or {}
        name = function.get("name") or ""
        args = function.get("arguments")
        if args is not None and not isinstance(args, str):
            args = json.dumps(args)  # a server that sends the arguments as an object
        call_id = piece.get("id")
        slot = self.slots.get(index)
        current = self.calls[slot] if slot is not None else None
        if current is not None and call_id and current.id and call_id != current.id:
            current = None  # a new id at a used index
        if current is not None and current.whole():
            # A server that numbers nothing (no index, no id) runs calls together: more arguments
            # after whole ones start the next call. Some servers repeat the name on every delta
            # or send the whole arguments again at the end: neither is a new call.
            if not (args and args.strip()):
                current.next_name = name or current.next_name
                return
            again = name in ("", current.name) and not current.next_name
            if again and args.strip() == current.text.strip():
                return
            name, current = name or current.next_name or current.name, None
        if current is None:
            self.slots[index] = len(self.calls)
            current = _Call(call_id or "", name)
            self.calls.append(current)
        else:
            current.id = current.id or call_id or ""
            current.name = current.name or name
        if args:
            current.parts.append(args)

    def tool_calls(self) -> list[ToolCall]:
        # a missing id gets one here; the loop also makes ids unique per round
        return [
            ToolCall(call.id or f"call_{n}", call.name, "".join(call.parts) or "{}")
            for n, call in enumerate(self.calls)
            if call.name
        ]
