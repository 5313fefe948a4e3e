"""The `openai` SDK's internals the provider uses, behind one door (door.py says why).

Every private name of the SDK that the gateway uses is here: `_models.FinalRequestOptions` and
`_build_request` (the request built once), `_make_status_error_from_response` (the SDK's error for
an error response). Each is tried once, when the provider is built; without any of them the
provider sends through the SDK's public `post()`, which makes the same request, only slower.

On the fast path the events are read by sse.py, and `_event` does with each what the SDK's
`AsyncStream.__stream__` does for Chat Completions: `[DONE]` ends the stream (sse.py), the data is
parsed as JSON, and an object with a truthy `error` raises the SDK's `APIError` with the same
message and body.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import httpx2
import openai

from agent.providers.door import Door, Events, PublicPost, fast_path
from agent.providers.prepared import PreparedPost
from agent.providers.sse import EventBatches

PATH = "/chat/completions"

# an error response as the API sends it: the SDK's error for it is tried once, at start
_REFUSED = {"type": "error", "error": {"type": "invalid_request_error", "message": "a probe"}}

try:
    from openai._models import FinalRequestOptions
except ImportError:  # a release that moved it: the public path, and the log says why
    MOVED = True
else:
    MOVED = False


def door(client: openai.AsyncOpenAI, http: httpx2.AsyncClient, *, internals: bool) -> Door:
    """The fast path when `internals` allows it and the SDK still has what it needs, else the
    public `post()`; either way the stream yields the chunks as parsed JSON, in batches."""
    missing: list[str] = []
    fast: PreparedPost[Events] | None = None
    if internals:
        try:
            fast = _prepared(client, http)
        except Exception as exc:  # noqa: BLE001 (anything an SDK change may raise: say it, go on)
            missing.append(f"{type(exc).__name__}: {exc}")
    if fast_path("openai", openai.__version__, missing, internals) and fast is not None:
        return fast
    options = {"security": {"bearer_auth": True}}  # as create() asks
    return PublicPost(client, PATH, options, openai.AsyncStream[object])


def _prepared(client: openai.AsyncOpenAI, http: httpx2.AsyncClient) -> PreparedPost[Events]:
    if MOVED:
        raise ImportError("openai._models.FinalRequestOptions")
    options = FinalRequestOptions.construct(method="post", url=PATH, security={"bearer_auth": True})
    template = client._build_request(options)
    if not isinstance(template, httpx2.Request) or not template.url.path.endswith(PATH):
        raise TypeError(f"_build_request made {template!r}")
    status_error = client._make_status_error_from_response
    refused = status_error(httpx2.Response(400, json=_REFUSED, request=template))
    if not isinstance(refused, openai.BadRequestError):
        raise TypeError(f"_make_status_error_from_response made {refused!r}")
    errors = (openai.APITimeoutError, openai.APIConnectionError)
    return PreparedPost(
        template,
        http,
        http._transport_for_url(template.url),  # the client's choice for the URL (proxies)
        status_error=status_error,
        errors=errors,
        stream=partial(EventBatches, handle=_event, errors=errors, end=b"[DONE]"),
    )


def _event(name: str | None, data: str, response: httpx2.Response) -> Any:
    """One event's chunk, as the SDK's stream makes it (the module doc)."""
    chunk = json.loads(data)
    if type(chunk) is dict and chunk.get("error"):  # the SDK: is_mapping(data) and data.get(...)
        error = chunk["error"]
        message = error.get("message") if isinstance(error, dict) else None
        if not message or not isinstance(message, str):
            message = "An error occurred during streaming"
        raise openai.APIError(message=message, request=response.request, body=error)
    return chunk
