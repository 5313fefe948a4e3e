"""How the gateway reaches one server: the stdio child (under tools/mcp/guard.py), Streamable
HTTP, or the legacy HTTP+SSE transport (`sse: true`).

`open_transport` enters what the connection needs on the caller's exit stack (so the supervisor
task that owns the connection also closes it) and returns what `mcp.Client` takes. The read
stream is watched: when it ends (the child died, the HTTP stream closed) `ended` is set, so the
supervisor reconnects at once instead of waiting for the next call to fail.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx2
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from tools.mcp.oauth import client_credentials
from tools.mcp.settings import McpServerConfig

GUARD = str(Path(__file__).with_name("guard.py"))


class ConnectFailed(Exception):
    """The server cannot be started or reached as configured; the text says why and the fix."""


class _WatchedRead:
    """The transport's read stream, telling `ended` when it ends."""

    def __init__(self, inner: Any, ended: asyncio.Event) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.receive()
            return item
        except Exception:
            self._ended.set()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.__anext__()
            return item
        except Exception:  # StopAsyncIteration too: the end of the stream
            self._ended.set()
            raise

    async def __aenter__(self) -> _WatchedRead:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def _watched(streams: Any, ended: asyncio.Event) -> AsyncIterator[tuple[_WatchedRead, Any]]:
    async with streams as (read, write):
        yield _WatchedRead(read, ended), write


def child_environment(config: McpServerConfig) -> dict[str, str]:
    """What the stdio child gets: its configured `env`, plus the gateway's PATH (a server
    started as `npx` or `uvx` finds its runtime through it) unless `env` sets PATH."""
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    env.update(config.env)
    return env


def stdio_parameters(config: McpServerConfig) -> StdioServerParameters:
    """The guard's command line around the configured one; the guard drops every variable the
    SDK adds (HOME, USER, SHELL ...) but the configured ones."""
    assert config.command is not None
    env = child_environment(config)
    cwd = config.cwd
    if cwd is not None and not Path(cwd).is_dir():
        raise ConnectFailed(f"cwd {cwd!r} is not a folder; create it or fix `cwd`")
    command = shutil.which(config.command, path=env["PATH"])
    if command is None:
        raise ConnectFailed(
            f"command {config.command!r} not found on PATH; install it, or give its full path"
        )
    args = ["-I", "-S", GUARD, str(os.getpid()), ",".join(env), "--", command, *config.args]
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=cwd)


async def open_transport(
    config: McpServerConfig, stack: AsyncExitStack, ended: asyncio.Event
) -> Any:
    """The transport for `mcp.Client`, entered on `stack` by the client itself."""
    if config.command is not None:
        return _watched(stdio_client(stdio_parameters(config)), ended)
    assert config.url is not None
    # a fresh provider per connection: its tokens last as long as the connection's client
    auth = client_credentials(config.url, config.oauth) if config.oauth else None
    if config.sse:  # the legacy transport: it makes its own HTTP client
        streams = sse_client(
            config.url, headers=dict(config.headers), timeout=config.connect_timeout_s, auth=auth
        )
        return _watched(streams, ended)
    # the read timeout is the SDK's (an SSE stream stays open); a call's deadline is ours
    timeout = httpx2.Timeout(config.connect_timeout_s, read=300)
    http = await stack.enter_async_context(
        httpx2.AsyncClient(headers=dict(config.headers), timeout=timeout, auth=auth)
    )
    return _watched(streamable_http_client(config.url, http_client=http), ended)
