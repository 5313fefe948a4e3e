"""A vendor endpoint's request, built by its SDK once and sent again with each call's body.

How the vendor modules hand the SDK a prepared body, and why this way. Figures are instructions
per model call counted by callgrind (`bench/provider_bench.py --instructions`: a short history, a
5-piece streamed answer, the whole provider layer): 4.1 M (anthropic) and 4.5 M (openai) before
this module, 2.3 M and 2.4 M with it and with deadline.py's one timer and sse.py; a plain aiohttp
POST of the same body, read to the end, is 0.65 M.

- `messages.create()` / `chat.completions.create()`: the SDKs validate and transform the whole
  history on every call (openai's transform ~0.3 ms a message) and encode it to JSON again.
- `messages`/`tools` in `extra_body`: no transform, but the whole history is encoded again.
- `client.post(path, content=<bytes>, stream=True)`, the SDKs' raw request method, with the body
  assembled from pieces encoded once per message (wire.py): nothing per message, but every call
  copies its options twice, parses and merges the URL, builds, merges and validates the headers
  and walks the retry loop: ~1.4 M instructions of a call, a third of it.
- What is used: the request `post` would build is built once, by the SDK itself
  (`_build_request`: URL, auth, version and platform headers, timeouts). A call sends a copy
  carrying its body: made with httpx's public `Request(stream=...)`, which takes the template's
  headers as they are (one list copy, their encoding known, the length set) instead of checking
  each again as `Request(content=...)` does (~0.15 M a call). It goes on the transport the SDK's
  own http client (`DefaultAioHttpClient`: httpx's client API on the SDK's aiohttp transport)
  chose for the URL once (its proxy settings kept), past the client's per-call auth, hooks,
  redirect and cookie steps, none of which is configured here (~0.1 M); a redirect, which the
  client follows, is sent again through the client. An error response becomes the SDK's own
  error (`_make_status_error_from_response`: status, body, headers, the same subclasses) and a
  transport failure the SDK's timeout or connection error, as `post` does; the response's events
  are read by sse.py, each handled as the SDK's `AsyncStream` handles it (`[DONE]`, `error`
  events, JSON), in batches, a batch per chunk read (1.90 → 1.71 M a call, openai).
  Skipped is only what cannot change between calls, the SDK's retries (off anyway: resilient.py
  retries, knowing about fallbacks and about text already shown) and the anthropic SDK's
  per-call tracing span and middleware (neither is configured here).

These are SDK internals, named only in each SDK's door (door.py), as is httpx's one (the
client's `_transport_for_url`: a release without it fails the door's check too). Without them
the provider uses the public `post` above, with the SDK's own stream, at 3.77 M (anthropic)
and 4.21 M (openai) instead of 1.72 M and 1.71 M (`provider_bench.py --instructions --deltas 5
--public`; 2.25 M and 2.18 M before the request copy and the transport above, 1.95 M and 1.90 M
before the events were read by sse.py).

Sending through httpx's own transport (a plain `httpx2.AsyncClient`) instead costs ~1.3 M more a
call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import httpx2

# the one header that changes with the body
_LENGTH = "Content-Length"

S = TypeVar("S")


class PreparedPost(Generic[S]):
    """`client.post(path, content=body, stream=True)` without redoing per call what never
    changes. The SDK's door (anthropic_sdk.py, openai_sdk.py) hands it what the SDK's internals
    make: the request built once (`template`), the transport the client sends it on
    (`transport`), the SDK's error for an error response (`status_error`) and the SDK's stream
    over a response (`stream`)."""

    def __init__(
        self,
        template: httpx2.Request,
        http: httpx2.AsyncClient,
        transport: httpx2.AsyncBaseTransport,
        *,
        status_error: Callable[[httpx2.Response], Exception],
        errors: tuple[Callable[..., Exception], Callable[..., Exception]],
        stream: Callable[[httpx2.Response], S],
    ) -> None:
        headers = template.headers.copy()
        headers.pop(_LENGTH, None)
        self._encoding = headers.encoding
        self._http = http
        self._transport = transport
        self._url = template.url
        self._headers = headers
        self._extensions = template.extensions
        self._status_error = status_error
        self._timeout_error, self._connection_error = errors
        self._stream = stream

    async def open(self, body: bytes) -> S:
        """The SDK's stream over the response when its status is 2xx; else the SDK's error for
        it, as `post` raises (a timeout and a failed connection too)."""
        request = httpx2.Request(
            "POST",
            self._url,
            headers=self._headers,
            stream=httpx2.ByteStream(body),
            extensions=self._extensions,
        )
        request.headers.encoding = self._encoding  # known: not found again by decoding each
        request.headers[_LENGTH] = str(len(body))
        request.read()
        try:
            response = await self._transport.handle_async_request(request)
            if response.has_redirect_location:  # rare: the client follows it, as post() would
                await response.aclose()
                response = await self._http.send(request, stream=True)
        except httpx2.TimeoutException as exc:
            raise self._timeout_error(request=request) from exc
        except Exception as exc:  # as post() does: anything the transport raised
            raise self._connection_error(request=request) from exc
        if response.is_success:
            return self._stream(response)
        try:
            await response.aread()  # the error's body
        finally:
            await response.aclose()
        raise self._status_error(response)
