"""Every refusal of the sessions API is JSON: `{"error": {"code", "message"}}` with a 4xx status
(5xx: `try_later` 503 with Retry-After when Redis is down, `internal_error` 500).

`ApiError` is raised by handlers; the middleware turns it, and aiohttp's own refusals (unknown
route, wrong method, a body over the size limit) under the API's prefix, into that shape.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web
from aiohttp.typedefs import Middleware

from adapters.base import QueueOverflow, TryLater

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

TRY_LATER_S = 2  # Retry-After of a 503 `try_later`: a Redis restart takes about a second
_AIOHTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
    415: "unsupported_media_type",
}


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})

    def response(self) -> web.Response:
        body = {"error": {"code": self.code, "message": self.message}}
        return web.json_response(body, status=self.status, headers=self.headers)


def not_found(what: str = "session") -> ApiError:
    # The same answer for "no such session" and "another key's session": existence is not leaked.
    return ApiError(404, "not_found", f"no such {what} for this API key")


def middleware(prefix: str) -> Middleware:
    @web.middleware
    async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith(prefix):
            return await handler(request)
        try:
            return await handler(request)
        except ApiError as exc:
            return exc.response()
        except QueueOverflow as exc:  # not taken: the messages queued get their own answers
            why = (
                f"{exc}; nothing was taken: send it again once the bot has answered (the same "
                "client_message_id is fine)"
            )
            return ApiError(429, "queue_full", why).response()
        except TryLater as exc:  # Redis is down: not taken; the same request later is answered
            log.warning("%s %s not taken: %s", request.method, request.path, exc)
            why = (
                "the server cannot take this just now (its shared state is unreachable): "
                f"send it again in {TRY_LATER_S} s with the same client_message_id (it is "
                "answered once)"
            )
            later = {"Retry-After": str(TRY_LATER_S)}
            return ApiError(503, "try_later", why, later).response()
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            code = _AIOHTTP_CODES.get(exc.status, "http_error")
            headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
            return ApiError(exc.status, code, exc.reason, headers).response()
        except Exception:
            log.exception("%s %s failed", request.method, request.path)
            why = "the server failed on this request; it is logged"
            return ApiError(500, "internal_error", why).response()

    return json_errors
