"""The `anthropic` SDK's internals the provider uses, behind one door (door.py says why).

Every private name of the SDK that the gateway uses is here: `_models.FinalRequestOptions` and
`_build_request` (the request built once), `_make_status_error_from_response` (the SDK's error for
an error response) and `_make_status_error` (its error for an `error` event). Each is tried once,
when the provider is built; without any of them the provider sends through the SDK's public
`post()`, which makes the same request, only slower.

On the fast path the events are read by sse.py, and `_event` does with each what the SDK's
`AsyncStream.__stream__` does: `ping` and unnamed events are passed over, an `error` event raises
the SDK's error for it (`_make_status_error` with the parsed body, or the raw data when it is not
JSON), an event without data is passed over, and the rest is parsed as JSON.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import anthropic
import httpx2

from agent.providers.door import Door, Events, PublicPost, fast_path
from agent.providers.prepared import PreparedPost
from agent.providers.sse import SKIP, EventBatches

PATH = "/v1/messages"

# an error response as the API sends it: the SDK's error for it is tried once, at start
_REFUSED = {"type": "error", "error": {"type": "invalid_request_error", "message": "a probe"}}
_OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "a probe"}}

try:
    from anthropic._models import FinalRequestOptions
except ImportError:  # a release that moved it: the public path, and the log says why
    MOVED = True
else:
    MOVED = False


def door(client: anthropic.AsyncAnthropic, http: httpx2.AsyncClient, *, internals: bool) -> Door:
    """The fast path when `internals` allows it and the SDK still has what it needs, else the
    public `post()`; either way the stream yields the events as parsed JSON, in batches."""
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
        raise ImportError("anthropic._models.FinalRequestOptions")
    options = FinalRequestOptions.construct(method="post", url=PATH)
    template = client._build_request(options)
    if not isinstance(template, httpx2.Request) or not template.url.path.endswith(PATH):
        raise TypeError(f"_build_request made {template!r}")
    status_error = client._make_status_error_from_response
    refused = status_error(httpx2.Response(400, json=_REFUSED, request=template))
    if not isinstance(refused, anthropic.BadRequestError):
        raise TypeError(f"_make_status_error_from_response made {refused!r}")
    event_error = client._make_status_error
    ok = httpx2.Response(200, request=template)
    overloaded = event_error("overloaded", body=_OVERLOADED, response=ok)
    if not isinstance(overloaded, anthropic.APIStatusError):
        raise TypeError(f"_make_status_error made {overloaded!r}")
    errors = (anthropic.APITimeoutError, anthropic.APIConnectionError)
    return PreparedPost(
        template,
        http,
        http._transport_for_url(template.url),  # the client's choice for the URL (proxies)
        status_error=status_error,
        errors=errors,
        stream=partial(EventBatches, handle=partial(_event, event_error), errors=errors),
    )


def _event(event_error: Any, name: str | None, data: str, response: httpx2.Response) -> Any:
    """One event's JSON, as the SDK's stream makes it, or SKIP (the module doc)."""
    if name == "ping" or name is None:
        return SKIP
    if name == "error":
        body: object = data
        try:
            body = json.loads(data)
            message = f"{body}"
        except Exception:  # noqa: BLE001 (as the SDK: any failure to parse keeps the raw data)
            message = data or f"Error code: {response.status_code}"
        raise event_error(message, body=body, response=response)
    if not data:
        return SKIP
    return json.loads(data)
