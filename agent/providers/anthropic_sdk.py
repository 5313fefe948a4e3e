"""The `anthropic` SDK's internals the provider uses, behind one door (door.py says why).

Every private name of the SDK that the gateway uses is here: `_models.FinalRequestOptions` and
`_build_request` (the request built once), `_make_status_error_from_response` (the SDK's error for
an error response), `_streaming.ServerSentEvent` and the stream's `_decoder` (sse.py's faster line
splitting). Each is tried once, when the provider is built; without any of them the provider
sends through the SDK's public `post()`, which makes the same request, only slower.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import anthropic
import httpx2

from agent.providers.door import Door, Events, PublicPost, fast_path
from agent.providers.prepared import PreparedPost
from agent.providers.sse import SSELines

PATH = "/v1/messages"

# an error response as the API sends it: the SDK's error for it is tried once, at start
_REFUSED = {"type": "error", "error": {"type": "invalid_request_error", "message": "a probe"}}

try:
    from anthropic._models import FinalRequestOptions
    from anthropic._streaming import ServerSentEvent
except ImportError:  # a release that moved them: the public path, and the log says why
    MOVED = True
else:
    MOVED = False


def door(client: anthropic.AsyncAnthropic, http: httpx2.AsyncClient, *, internals: bool) -> Door:
    """The fast path when `internals` allows it and the SDK still has what it needs, else the
    public `post()`; either way the stream yields each event as parsed JSON."""
    missing: list[str] = []
    fast: PreparedPost[Events] | None = None
    if internals:
        try:
            fast = _prepared(client, http)
        except Exception as exc:  # noqa: BLE001 (anything an SDK change may raise: say it, go on)
            missing.append(f"{type(exc).__name__}: {exc}")
    if fast_path("anthropic", anthropic.__version__, missing, internals) and fast is not None:
        return fast
    return PublicPost(client, PATH, {}, anthropic.AsyncStream[object])


def _prepared(client: anthropic.AsyncAnthropic, http: httpx2.AsyncClient) -> PreparedPost[Events]:
    if MOVED:
        raise ImportError("anthropic._models.FinalRequestOptions, _streaming.ServerSentEvent")
    if "_decoder" not in getattr(anthropic.AsyncStream, "__annotations__", {}):
        raise AttributeError("AsyncStream._decoder")
    event = ServerSentEvent(event="e", data="{}", id=None, retry=None)
    if (event.event, event.json()) != ("e", {}):
        raise TypeError("ServerSentEvent(event=, data=, id=, retry=) makes another event")
    options = FinalRequestOptions.construct(method="post", url=PATH)
    template = client._build_request(options)
    if not isinstance(template, httpx2.Request) or not template.url.path.endswith(PATH):
        raise TypeError(f"_build_request made {template!r}")
    status_error = client._make_status_error_from_response
    refused = status_error(httpx2.Response(400, json=_REFUSED, request=template))
    if not isinstance(refused, anthropic.BadRequestError):
        raise TypeError(f"_make_status_error_from_response made {refused!r}")
    _Stream(httpx2.Response(200, request=template), client)  # the stream's constructor as used
    return PreparedPost(
        template,
        http,
        http._transport_for_url(template.url),  # the client's choice for the URL (proxies)
        status_error=status_error,
        errors=(anthropic.APITimeoutError, anthropic.APIConnectionError),
        stream=partial(_Stream, client=client),
    )


class _Stream(anthropic.AsyncStream[object]):
    """The SDK's stream, events as parsed JSON, the lines split by sse.py."""

    def __init__(self, response: httpx2.Response, client: Any) -> None:
        super().__init__(cast_to=object, response=response, client=client)
        self._decoder = SSELines(ServerSentEvent)
