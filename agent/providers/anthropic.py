"""AnthropicProvider: the Messages API through the official async `anthropic` SDK, streamed.

Raw stream events (not the SDK's accumulating helper, which re-parses the partial JSON of tool
arguments on every delta) become our events: text deltas as they arrive, a tool call when its
`content_block_stop` closes it (arguments passed on exactly as sent, valid JSON or not), usage
from `message_start` and `message_delta`. SDK types and errors never leave this module.

The request is not made by `messages.create`, which would encode the whole history to JSON again
on every call (~3 ms at 1,000 messages; older SDK versions also ran a per-message transform, the
SDK's issue #1195). The body is assembled from pieces encoded once per message (wire.py) and sent
as the request the SDK built once for the endpoint (prepared.py, which says why that way and what
it costs), or through the SDK's public `post()` when its internals are not as expected
(anthropic_sdk.py, door.py): the SDK still does the transport, auth, the version header,
timeouts and its error types (`event: error` included); create()'s extras (a deprecated-model
warning, tracing span names) are not needed here. As in the OpenAI module, events arrive as
parsed JSON (no pydantic model per event), on the fast path read by sse.py as the SDK's
`AsyncStream[object]` would make them, a batch per chunk read, and the client runs on the SDK's
aiohttp transport (`DefaultAioHttpClient`): both measured in bench/provider_bench.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import anthropic
import httpx2

from agent.providers.anthropic_sdk import door
from agent.providers.anthropic_wire import _PREFIX, BASE, _turns
from agent.providers.base import ProviderError, ProviderUnavailable
from agent.providers.classify import MALFORMED, classify, connection_failure, malformed
from agent.providers.deadline import Deadline, Timeouts
from agent.providers.image_plan import Plan
from agent.providers.media import ALL_MEDIA, Media
from agent.providers.media_call import MediaCall
from agent.providers.wire import LastEncoded, dumps, json_object
from agent.types import (
    ModelEvent,
    ModelRequest,
    ModelStream,
    Stop,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    Usage,
)
from tools.base import ToolSpec
from tools.redact import split_credentials

log = logging.getLogger(__name__)

DEFAULT_MODEL = "claude-sonnet-5-5"  # the SDK's newest Sonnet; 4-5 is deprecated
KEY_HINT = "ANTHROPIC_API_KEY (or llm.api_key)"
_STOPS = {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"}


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str,
        model: str = DEFAULT_MODEL,
        base_url: str | None = None,
        timeouts: Timeouts | None = None,
        media: Media = ALL_MEDIA,
        sdk_internals: bool = True,
    ) -> None:
        self.model = model
        self.media = media  # what the model takes natively; the rest goes as text (media.py)
        self.timeouts = timeouts or Timeouts()
        self._api_key = api_key
        # SDK retries off: ours (resilient.py) know about fallback and about text already shown
        # a user:password in the URL goes as the header it stands for: SDKs log their URLs
        base_url, auth = split_credentials(base_url)
        # the SDK's own aiohttp transport: a third less CPU per call than httpx (module doc)
        http = anthropic.DefaultAioHttpClient(timeout=self.timeouts.httpx())
        self._client = anthropic.AsyncAnthropic(
            http_client=http,
            api_key=api_key,
            base_url=base_url,
            default_headers=auth or None,
            max_retries=0,
            timeout=self.timeouts.httpx(),
        )
        self.base_url = str(self._client.base_url).rstrip("/")
        # the request built once through SDK internals, or the SDK's public post() (door.py)
        self._door = door(self._client, http, internals=sdk_internals)
        self._tools: tuple[tuple[ToolSpec, ...], bytes] = ((), b"[]")
        self._system = LastEncoded()

    async def aclose(self) -> None:
        await self._client.close()

    async def stream(self, request: ModelRequest) -> ModelStream:
        model = request.model or self.model
        who = f"anthropic {model} at {self.base_url}"
        media = MediaCall(request, self.media, _PREFIX + self.media.key, BASE + self.media.key)
        plan = await media.ready()
        deadline = Deadline(self.timeouts, who)
        for attempt in range(2):
            try:
                stream = await deadline.wait(self._door.open(self._body(request, model, plan)))
                break
            except (anthropic.APIError, httpx2.HTTPError) as exc:
                error = self._error(exc, who, bool(request.tools))
                # an image it refused: once more without it (and never again: media_call.py)
                if not await media.refused(error, plan) or attempt:
                    deadline.close()
                    raise error from exc
                plan = await media.ready()
        media.sent(plan)
        state = _State()
        # an async generator (closed below): the events of each read (door.py)
        batches = cast(AsyncGenerator[list[Any], None], aiter(stream))
        try:
            while True:
                try:
                    batch = await deadline.wait(anext(batches))
                except StopAsyncIteration:
                    break
                for event in batch:
                    if not isinstance(event, dict):
                        raise TypeError(
                            f"an event that is not a JSON object: {type(event).__name__}"
                        )
                    if event.get("type") != "message_start":
                        deadline.token()
                    for ours in state.take(event):
                        yield ours
        except (anthropic.APIError, httpx2.HTTPError) as exc:
            raise self._error(exc, who, bool(request.tools)) from exc
        except MALFORMED as exc:  # the SDK parses each data line to JSON; it does not map this
            raise malformed(who, exc) from exc
        finally:
            deadline.close()
            await batches.aclose()
            await stream.close()
        if not state.done:
            raise ProviderUnavailable(f"{who}: the stream ended before message_stop")
        yield Usage(state.input_tokens, state.output_tokens, self.name, model)
        yield Stop(_STOPS.get(state.stop or "", "other"))  # type: ignore[arg-type]

    def _body(self, request: ModelRequest, model: str, plan: Plan) -> bytes:
        """The Messages API request as JSON: the history's pieces are encoded once each."""
        fields: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens, "stream": True}
        encoded = {"system": self._system(request.system)} if request.system else {}
        if request.tools:
            encoded["tools"] = self._tool_params(request.tools)
        messages = _turns(request.messages, self.media, plan)
        return json_object(fields, encoded, {"messages": messages})

    def _tool_params(self, tools: tuple[ToolSpec, ...]) -> bytes:
        # the coordinator hands the same tuple for a persona version: encode once, not per call
        if self._tools[0] is not tools:
            params = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in tools
            ]
            self._tools = (tools, dumps(params))
        return self._tools[1]

    def _error(self, exc: Exception, who: str, had_tools: bool) -> ProviderError:
        if isinstance(exc, anthropic.APIStatusError):
            # a mid-stream `event: error` arrives with the stream's HTTP status, 200
            status = exc.status_code if exc.status_code >= 400 else None
            error = exc.body.get("error") if isinstance(exc.body, dict) else None
            error = error if isinstance(error, dict) else {}
            return classify(
                who=who,
                key_hint=KEY_HINT,
                status=status,
                kind=error.get("type") or exc.type,
                code=exc.error_code,
                message=str(error.get("message") or exc.api_message or exc.message),
                headers=exc.response.headers,
                had_tools=had_tools,
                api_key=self._api_key,
            )
        if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
            return self.timeouts.timed_out(who, exc)
        failure = connection_failure(exc) or f"connection failed: {type(exc).__name__}"
        return ProviderUnavailable(f"{who}: {failure}")


@dataclass(slots=True)
class _ToolBlock:
    id: str
    name: str
    start_input: Any
    parts: list[str] = field(default_factory=list)

    def call(self) -> ToolCall:
        text = "".join(self.parts)
        if not text.strip() and self.start_input:
            text = json.dumps(self.start_input)  # some proxies send the whole input at the start
        return ToolCall(self.id, self.name, text or "{}")


@dataclass(slots=True)
class _State:
    """What one stream has said so far."""

    blocks: dict[Any, _ToolBlock] = field(default_factory=dict)  # by the event's index
    input_tokens: int = 0
    output_tokens: int = 0
    stop: str | None = None
    done: bool = False

    def take(self, event: dict[str, Any]) -> Sequence[ModelEvent]:
        """Fold one stream event (its JSON, as parsed) in; returns our events for it."""
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event["delta"]
            if delta.get("type") == "text_delta":
                text = delta.get("text")
                return (TextDelta(text),) if text else ()
            if delta.get("type") == "input_json_delta" and event.get("index") in self.blocks:
                self.blocks[event["index"]].parts.append(delta.get("partial_json") or "")
        elif kind == "content_block_start":
            block = event["content_block"]
            if block.get("type") == "tool_use":
                self.blocks[event.get("index")] = _ToolBlock(
                    block.get("id") or "", block.get("name") or "", block.get("input")
                )
            elif block.get("type") == "text" and block.get("text"):
                return (TextDelta(block["text"]),)
        elif kind == "content_block_stop":
            tool = self.blocks.pop(event.get("index"), None)
            if tool is not None:
                return (ToolCallEvent(tool.call()),)
        elif kind == "message_start":
            self._count((event.get("message") or {}).get("usage"))
        elif kind == "message_delta":
            self.stop = (event.get("delta") or {}).get("stop_reason") or self.stop
            self._count(event.get("usage"))
        elif kind == "message_stop":
            self.done = True
        return ()

    def _count(self, usage: dict[str, Any] | None) -> None:
        """Counts are cumulative; input includes cache writes and reads (they are billed)."""
        if not usage:
            return
        fresh = usage.get("input_tokens")
        if fresh is not None:
            cached = (usage.get("cache_creation_input_tokens") or 0) + (
                usage.get("cache_read_input_tokens") or 0
            )
            self.input_tokens = max(self.input_tokens, fresh + cached)
        self.output_tokens = max(self.output_tokens, usage.get("output_tokens") or 0)
