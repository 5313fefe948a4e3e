"""The web server's listening socket, with a cap on the connections open at once.

Past the process's open-file limit every `accept` fails (EMFILE): the server stops answering
anyone, `/healthz` included, and the database, Redis and the model cannot open a file either.
So past `server.max_connections` (by default three quarters of that limit) a new connection is
answered at once with a bare `503` and closed, and a WARNING says so (once a minute at most);
idle ones make room after `server.idle_timeout_s`.

aiohttp's `TCPSite` offers no hook when a connection opens, so the socket is ours: each new
connection gets a gate protocol that either hands the transport to aiohttp's own request handler
(`transport.set_protocol`, public asyncio API) or refuses it. Everything after that is aiohttp's,
but for one thing at the end: a closed connection's objects are let go of (`_let_go`).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any, cast

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

log = logging.getLogger(__name__)

_BUSY_BODY = b"too many open connections (server.max_connections)\n"
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Retry-After: 5\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
    % (len(_BUSY_BODY), _BUSY_BODY)
)
WARN_EVERY_S = 60.0


def default_max_connections() -> int:
    """Three quarters of the open-file limit: the rest is for storage, Redis, the model."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 10_000 if soft == resource.RLIM_INFINITY else max(1, soft * 3 // 4)


class CappedListener:
    def __init__(self, server: web.Server, max_connections: int) -> None:
        self.server = server
        self.max_connections = max_connections
        self.refused = 0
        self._warned_at = -WARN_EVERY_S
        self._listening: asyncio.Server | None = None
        # aiohttp's request handler tells its server when its connection is lost: so are we
        self._lost = server.connection_lost
        server.connection_lost = self._connection_lost  # type: ignore[method-assign]

    async def open(self, host: str, port: int) -> int:
        """Listen on `host`:`port`; the port it got (0 asks for any free one)."""
        loop = asyncio.get_running_loop()
        self._listening = await loop.create_server(
            lambda: _Gate(self), host, port, reuse_address=True
        )
        bound: int = self._listening.sockets[0].getsockname()[1]
        return bound

    def close(self) -> None:
        """No more connections; those open are aiohttp's to close (its runner's cleanup)."""
        if self._listening is not None:
            self._listening.close()
            self._listening = None

    def admit(self, transport: asyncio.Transport) -> None:
        if len(self.server.connections) >= self.max_connections:
            self.refused += 1
            now = time.monotonic()
            if now - self._warned_at >= WARN_EVERY_S:
                self._warned_at = now
                log.warning(
                    "refusing connections: %d open (server.max_connections); %d refused so far",
                    len(self.server.connections),
                    self.refused,
                )
            transport.write(BUSY)
            transport.close()
            return
        handler = self.server()
        transport.set_protocol(handler)
        handler.connection_made(transport)

    def _connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        transport = handler.transport
        self._lost(handler, exc)
        _let_go(handler, transport)


def _let_go(handler: RequestHandler, transport: Any) -> None:
    """Break the two reference cycles a closed connection is left in, so that reference
    counting frees it at once. Left, each closed web socket was 29 objects of cyclic garbage
    (bench/many_census.py) that only a full collection frees, after walking every live object
    too: 10,000 visitors coming and going left ~290,000, and full collections of 90-160 ms
    (bench/many_bench.py, loaded machine). The cycles: asyncio's socket transport holds its
    own bound `_read_ready_cb` (CPython 3.11; 3.12 lets go of it on close, gh-100348), and a
    web socket's `WebSocketResponse` is aiohttp's handler's `_data_received_cb` while it holds
    its request, which holds the handler. Neither is used once the connection is lost."""
    handler._data_received_cb = None
    if transport is not None and hasattr(transport, "_read_ready_cb"):
        transport._read_ready_cb = None


class _Gate(asyncio.Protocol):
    """A connection's first protocol, for as long as `connection_made` takes."""

    def __init__(self, listener: CappedListener) -> None:
        self._listener = listener

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (uvloop's is not a subclass of asyncio.Transport)
        self._listener.admit(cast(asyncio.Transport, transport))
