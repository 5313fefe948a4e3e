"""HTTP for tools: the app's shared aiohttp session, a deadline on every request, one error type."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
from yarl import URL

from tools.base import ToolContext

USER_AGENT = "chat-gateway-tools/0.1"
MAX_BODY_BYTES = 2_000_000


class Unreachable(Exception):
    """A service did not answer usefully (network, timeout, HTTP status, bad body); degrade."""


@contextlib.asynccontextmanager
async def _session(ctx: ToolContext) -> AsyncIterator[aiohttp.ClientSession]:
    shared = ctx.deps.http.current if ctx.deps.http is not None else None
    if shared is not None:
        yield shared
        return
    async with aiohttp.ClientSession() as own:  # outside the app (tests, scripts)
        yield own


async def fetch(
    ctx: ToolContext,
    url: str,
    *,
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """GET `url` within `tools.http_timeout_s`; any failure raises Unreachable naming the host."""
    deadline = ctx.deps.settings.http_timeout_s
    sent = {"User-Agent": USER_AGENT, **(headers or {})}
    # the request's own: the shared session's bound (60 s) must not cut a longer deadline short
    timeout = aiohttp.ClientTimeout(total=deadline)
    try:
        async with (
            asyncio.timeout(deadline),
            _session(ctx) as session,
            session.get(url, params=params, headers=sent, timeout=timeout) as response,
        ):
            if response.status >= 400:
                raise Unreachable(f"{_host(url)} answered HTTP {response.status}")
            # `read(n)` returns what is buffered so far, often only the first piece: read to EOF
            body = bytearray()
            async for piece in response.content.iter_chunked(65_536):
                body += piece
                if len(body) > MAX_BODY_BYTES:
                    break
    except TimeoutError:
        raise Unreachable(f"{_host(url)} did not answer within {deadline:g} s") from None
    except (aiohttp.ClientError, OSError) as exc:
        raise Unreachable(f"{_host(url)} is unreachable ({type(exc).__name__})") from exc
    if len(body) > MAX_BODY_BYTES:
        raise Unreachable(f"{_host(url)} sent more than {MAX_BODY_BYTES} bytes")
    return bytes(body)


async def fetch_json(ctx: ToolContext, url: str, **kwargs: Any) -> Any:
    body = await fetch(ctx, url, **kwargs)
    try:
        return json.loads(body)
    except ValueError as exc:
        raise Unreachable(f"{_host(url)} did not send JSON") from exc


def _host(url: str) -> str:
    try:
        return URL(url).host or url
    except ValueError:
        return url
