"""`McpServer`: one configured MCP server as a tool source, kept connected by its own task.

`run()` is the supervisor: the one task that creates, enters and leaves the server's
`mcp.Client` (the SDK's cancel scopes must be left in the task that entered them). It connects
in the background under `connect_timeout_s`, lists the tools, then serves until the connection
ends (the child died, the stream closed, a call found it closed); then it reconnects with capped
backoff. A tools-list-changed notice (`listen` on 2026-07-28 servers, the notification on
older ones) lists the tools again. The last list stays while the server is down: a call then
fails at once with a tool error saying why, and the tools come back under the same names.

A call runs as a task in the supervisor's task group (so it lives and dies with the connection)
and is awaited by the caller: when the caller is cancelled (its deadline, /stop, TaskStop), the
call task is cancelled, and the SDK tells the server (`notifications/cancelled`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import replace
from typing import Any

import mcp.types as types
from mcp import Client
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared.exceptions import MCPError
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from tools.base import ToolContext, ToolError, ToolResult
from tools.mcp.catalog import Catalog
from tools.mcp.errors import describe_error
from tools.mcp.results import to_result
from tools.mcp.settings import McpServerConfig
from tools.mcp.state import ServerState
from tools.mcp.transport import open_transport
from tools.source import ToolInfo

log = logging.getLogger(__name__)

# what `mcp.Client` takes besides a transport: an in-process server, in tests
Target = Callable[[AsyncExitStack, asyncio.Event], Awaitable[Any]]


class McpServer:
    """One server's tools, and the task that keeps its connection."""

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        target: Target | None = None,
        backoff_s: tuple[float, float] = (0.5, 30.0),
        mode: str = "auto",
    ) -> None:
        """`target`: what to connect to, instead of the configured command or URL (tests);
        `mode`: the SDK's, "auto" (2026-07-28 when the server speaks it, else the 2025-11-25
        handshake) or "legacy" (the handshake only)."""
        self.server = name
        self.config = config
        self._target = target
        self._backoff = backoff_s
        self._mode = mode
        self._catalog = Catalog(name, config)
        self._state = ServerState(name, config.transport, required=config.required)
        self._changed = asyncio.Event()  # set, and replaced, at every change
        self._client: Client | None = None
        self._calls: asyncio.TaskGroup | None = None
        self._ended: asyncio.Event | None = None

    # -- ToolSource ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"mcp:{self.server}"

    @property
    def version(self) -> int:
        return self._catalog.version

    def tools(self) -> Sequence[ToolInfo]:
        return self._catalog.infos

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        client, calls, ended = self._client, self._calls, self._ended
        if client is None or calls is None or ended is None:
            state = self._state
            why = f": {state.reason}" if state.reason else ""
            raise ToolError(
                f"MCP server {self.server!r} is {state.phase}{why}; it is retried in the"
                " background, so try again later or do without it"
            )
        tool = self._catalog.original(name)
        if tool is None:  # the list changed since the registry looked
            raise ToolError(f"MCP server {self.server!r} no longer lists {name!r}")
        task = calls.create_task(self._call(client, tool, dict(arguments), ended))
        try:
            outcome = await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # our caller was cancelled (a deadline, /stop): the task went with it
            raise ToolError(
                f"MCP server {self.server!r} lost the connection during the call"
            ) from None
        if isinstance(outcome, BaseException):
            raise ToolError(f"{self.server}/{tool}: {describe_error(outcome)}")
        return await to_result(outcome, ctx, f"{self.server}/{tool}")

    @staticmethod
    async def _call(
        client: Client, tool: str, arguments: dict[str, Any], ended: asyncio.Event
    ) -> types.CallToolResult | Exception:
        # runs in the supervisor's group: an exception is handed back, never left to end it;
        # one that says the connection is gone ends this connection (`ended`), not a newer one
        try:
            return await client.call_tool(tool, arguments)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                ended.set()
            return exc
        except Exception as exc:
            ended.set()
            return exc

    # -- state ----------------------------------------------------------------------------------
    @property
    def state(self) -> ServerState:
        return self._state

    def _set(self, **changes: Any) -> None:
        state = replace(self._state, **changes)
        if state.phase != self._state.phase:
            state = replace(state, since=time.time())
            log.log(
                logging.WARNING if state.phase == "down" else logging.INFO,
                "MCP server %s",
                state.line(),
            )
        self._state = state
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_for(self, check: Callable[[ServerState], bool]) -> ServerState:
        """Until the state passes `check` (for `bot mcp check` and tests; the caller bounds it)."""
        while not check(self._state):
            await self._changed.wait()
        return self._state

    # -- the supervisor ---------------------------------------------------------------------------
    async def run(self) -> None:
        """Keep the server connected until cancelled; never raises but the cancellation."""
        first, most = self._backoff
        backoff = first
        while True:
            started = time.monotonic()
            try:
                await self._connection()
                reason = "the connection ended"
            except Exception as exc:  # the server's problem, never the gateway's
                reason = describe_error(exc)
                log.debug("MCP server %s: connection failed", self.server, exc_info=True)
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # our cancellation arrived while the SDK's transport was failing, and its task
                # group took it for its own: the shutdown still wins
                raise asyncio.CancelledError
            self._set(phase="down", reason=f"{reason}; retrying in {backoff:g} s")
            if time.monotonic() - started > 60:
                backoff = first  # it ran well for a while: a new problem
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, most)

    async def _connection(self) -> None:
        ended = asyncio.Event()
        refresh = asyncio.Event()

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                refresh.set()

        async with AsyncExitStack() as stack:
            if self._target is not None:
                target = await self._target(stack, ended)
            else:
                target = await open_transport(self.config, stack, ended)
            client = Client(
                target,
                # a backstop only: each call's deadline is the registry's (call_timeout_s)
                read_timeout_seconds=self.config.call_timeout_s + 5,
                message_handler=on_message,
                mode="legacy" if self.config.sse else self._mode,  # SSE predates 2026-07-28
                cache=None,  # the tool list is ours to keep; calls are never cached
            )
            async with asyncio.timeout(self.config.connect_timeout_s):
                await stack.enter_async_context(client)
                await self._catalog.refresh(client)
            async with asyncio.TaskGroup() as calls:
                self._client, self._calls, self._ended = client, calls, ended
                watcher = calls.create_task(self._watch_list(client, refresh, ended))
                self._set(
                    phase="ready",
                    reason="",
                    tools=self._catalog.names,
                    protocol=client.protocol_version,
                )
                try:
                    await ended.wait()
                finally:
                    self._client = self._calls = self._ended = None
                    self._set(phase="down", reason="the connection ended; reconnecting")
                    watcher.cancel()

    async def _watch_list(
        self, client: Client, refresh: asyncio.Event, ended: asyncio.Event
    ) -> None:
        """List the tools again whenever the server says they changed."""
        listener = None
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:  # older ones send a notice
            listener = asyncio.create_task(self._listen(client, refresh, ended))
        try:
            while True:
                await refresh.wait()
                refresh.clear()
                try:
                    async with asyncio.timeout(self.config.connect_timeout_s):
                        await self._catalog.refresh(client)
                except Exception as exc:
                    log.warning(
                        "MCP server %s: listing tools failed: %s", self.server, describe_error(exc)
                    )
                    ended.set()
                    return
                self._set(tools=self._catalog.names)
        finally:
            if listener is not None:
                listener.cancel()
                await asyncio.wait({listener})  # it leaves its stream in its own task

    async def _listen(self, client: Client, refresh: asyncio.Event, ended: asyncio.Event) -> None:
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                refresh.set()  # a change between the first listing and this stream's start
                async for _event in subscription:
                    refresh.set()
        except SubscriptionLost:
            # the stream broke (a restarted HTTP server): connect again, and list again
            ended.set()
        except Exception as exc:  # the server offers no listen: calls still work
            log.debug("MCP server %s: no list-changed stream: %s", self.server, describe_error(exc))
