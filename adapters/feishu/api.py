"""The Open API through lark-oapi, with our own async token cache and errors as `ChannelError`s.

lark-oapi fetches the tenant token with `requests` (blocking) even inside its `a*` methods, so
the SDK's config has `enable_set_token` and every call carries a token we fetched through
the SDK's async transport. Each call is the SDK's `arequest` (its generic call, which does the
domain, headers and JSON) and its raw answer is read here: `{"code": 0, "data": …}` is success,
anything else becomes one of the errors in adapters/base.py. A send that may have landed (a
timeout, an answer that is not JSON) is `DeliveryUncertain`; sends carry a `uuid`, so the
platform drops a retried duplicate.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

import httpx

from adapters.base import ChannelError, DeliveryUncertain, MessageGone, RateLimited
from adapters.feishu.sdk import (
    AccessTokenType,
    BaseRequest,
    HttpMethod,
    RequestOption,
    arequest,
    config,
)
from adapters.platform_calls import NO_PLATFORM_CALLS, PlatformCalls

log = logging.getLogger(__name__)

TOKEN_PATH = "/open-apis/auth/v3/tenant_access_token/internal"
REFRESH_BEFORE_S = 300.0  # a token is renewed this long before it expires
TOKEN_INVALID = {99991661, 99991663, 99991664, 99991665}  # missing, invalid, expired [doc]
SECRET_REFUSED = {10014, 10003}  # "app secret invalid", "invalid param" (a wrong app id) [doc]
RATE_LIMITED = {99991400, 230020, 11232}  # gateway, per chat, tenant [doc]
GONE = {230011, 231003}  # the message was recalled or deleted [doc]
STALE_SEQUENCE = 300317  # CardKit: "sequence number compare failed"
# CardKit: "streaming mode is closed", "card streaming timeout" (10 minutes after it was turned on)
STREAM_CLOSED = {300309, 200850}
NO_PERMISSION = {99991672, 99991679}  # the app lacks a scope (cardkit:card:write, say) [doc]


class CredentialsRefused(ChannelError):
    """The platform refused the app id or secret: retrying cannot help."""


class ApiError(ChannelError):
    def __init__(self, code: int, msg: str, what: str) -> None:
        super().__init__(f"Feishu {what} refused: code {code}: {msg}")
        self.code = code


class FeishuApi:
    """One app's calls. `call` returns the answer's `data` or raises a `ChannelError`."""

    def __init__(
        self,
        *,
        app_id: str,
        app_secret: str,
        base_url: str,
        timeout_s: float,
        calls: PlatformCalls = NO_PLATFORM_CALLS,
    ) -> None:
        self.metrics = calls  # what each call came to, for /metrics
        self.app_id = app_id
        self._app_secret = app_secret
        self.config = config(
            app_id=app_id, app_secret=app_secret, domain=base_url, timeout_s=timeout_s
        )
        self._token = ""
        self._token_expires = 0.0
        self._token_lock = asyncio.Lock()
        self.calls = 0  # answered calls (for /healthz and the benchmark)
        self.rate_limited = 0

    async def token(self, *, renew: bool = False) -> str:
        """The tenant token, fetched or renewed without blocking the loop (one fetch at a time)."""
        async with self._token_lock:
            if renew or not self._token or time.monotonic() >= self._token_expires:
                body = {"app_id": self.app_id, "app_secret": self._app_secret}
                answer = await self._send(HttpMethod.POST, TOKEN_PATH, body, {}, (), None)
                code = int(answer.get("code", -1))
                if code in SECRET_REFUSED:
                    raise CredentialsRefused(
                        f"Feishu refused the app credentials (code {code}: {answer.get('msg')});"
                        " check FEISHU_APP_ID and FEISHU_APP_SECRET"
                    )
                if code != 0 or not answer.get("tenant_access_token"):
                    raise ApiError(code, str(answer.get("msg")), "the tenant token")
                self._token = str(answer["tenant_access_token"])
                lifetime = float(answer.get("expire", 7200))
                self._token_expires = time.monotonic() + max(lifetime - REFRESH_BEFORE_S, 60.0)
            return self._token

    async def call(
        self,
        method: HttpMethod,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        paths: Mapping[str, str] | None = None,
        query: tuple[tuple[str, str], ...] = (),
        what: str = "call",
        sending: bool = False,
        field: str = "data",
    ) -> dict[str, Any]:
        """One API call with the tenant token; an expired token is renewed and the call retried.

        Returns the answer's `field` (`data`, or `bot` for the bot's info)."""
        # the path as written, ids still `:placeholders`: a bounded name for the metrics
        name = path.removeprefix("/open-apis/")
        for attempt in (1, 2):
            token = await self.token(renew=attempt == 2)
            try:
                answer = await self._send(method, path, body, paths or {}, query, token, sending)
            except ChannelError:
                self.metrics.record("feishu", name, "error")
                raise
            code = int(answer.get("code", -1))
            if code == 0:
                self.metrics.record("feishu", name, "ok")
                data = answer.get(field)
                return data if isinstance(data, dict) else {}
            if code in RATE_LIMITED:
                self.rate_limited += 1
                reset = float(answer.get("_reset", 1.0))
                self.metrics.record("feishu", name, "rate_limited", retry_after_s=reset)
            else:
                self.metrics.record("feishu", name, "error")
            if code not in TOKEN_INVALID or attempt == 2:
                raise _error(code, str(answer.get("msg", "")), what, answer)
            log.info("Feishu token refused (code %d); renewing it", code)
        raise AssertionError("unreachable")

    async def _send(
        self,
        method: HttpMethod,
        path: str,
        body: Mapping[str, Any] | None,
        paths: Mapping[str, str],
        query: tuple[tuple[str, str], ...],
        token: str | None,
        sending: bool = False,
    ) -> dict[str, Any]:
        builder = (
            BaseRequest.builder()
            .http_method(method)
            .uri(path)
            .paths(dict(paths))
            .queries(list(query))
        )
        if token is not None:
            builder = builder.token_types({AccessTokenType.TENANT})
        else:
            builder = builder.token_types(set())
        if body is not None:
            builder = builder.body(dict(body))
        option = RequestOption.builder().tenant_access_token(token).build() if token else None
        try:
            raw = await arequest(self.config, builder.build(), option)
        except httpx.TransportError as exc:
            never_sent = isinstance(exc, httpx.ConnectError)
            what = f"no answer from Feishu ({type(exc).__name__})"
            raise _lost(what, sending and not never_sent) from exc
        try:
            answer = json.loads(raw.content)
            if not isinstance(answer, dict):
                raise ValueError("not an object")
        except ValueError:
            if raw.status_code == 429:
                answer = {"code": 99991400, "msg": "HTTP 429"}
            else:
                what = f"an answer that is not Feishu's JSON (HTTP {raw.status_code}; a proxy?)"
                raise _lost(what, sending) from None
        self.calls += 1
        if raw.status_code == 429 and int(answer.get("code", 0)) == 0:
            answer["code"] = 99991400
        answer["_reset"] = _reset_s(raw.headers)
        return answer


def _reset_s(headers: Mapping[str, str]) -> float:
    """The gateway's `x-ogw-ratelimit-reset` (seconds until the window opens), else 1 s."""
    for key, value in headers.items():
        if key.lower() == "x-ogw-ratelimit-reset":
            try:
                return max(float(value), 0.1)
            except ValueError:
                break
    return 1.0


def _lost(what: str, sending: bool) -> ChannelError:
    if sending:
        return DeliveryUncertain(f"{what}; the message may have been posted, so it is not resent")
    return ChannelError(what)


def _error(code: int, msg: str, what: str, answer: Mapping[str, Any]) -> ChannelError:
    if code in RATE_LIMITED:
        return RateLimited(float(answer.get("_reset", 1.0)), f"Feishu rate limit ({code})")
    if code in GONE:
        return MessageGone(f"Feishu {what}: code {code}: {msg}")
    if code in SECRET_REFUSED:
        return CredentialsRefused(f"Feishu refused the app credentials (code {code}: {msg})")
    return ApiError(code, msg, what)
