"""lark_oapi, imported so that its import-time event loop is not left open, and its internals.

`lark_oapi.ws.client` runs `loop = asyncio.get_event_loop()` when it is imported: outside a
running loop that makes a new loop, sets it as the thread's loop and never closes it (a
ResourceWarning later, and a loop nobody runs). So the first import happens on a short-lived
thread, whose loop is closed when the import is done; each long connection sets its own loop in
that global (longconn.py). Everything here imports lark_oapi through this module.

Its async calls each open a new `httpx.AsyncClient`, which builds a new SSL context (reading the
CA bundle: 50-150 ms of CPU on the event loop, per call). The SDK's transport is given httpx with
one SSL context shared by those clients; nothing else changes.

Its logger ("Lark") writes to stdout with a handler of its own and passes records on to ours
too: the handler goes, so each record is logged once, by our logging setup.

Those three are the SDK's module globals, and the long connection (longconn.py) needs what its
`ws.Client` keeps private (whether it is connected, how to stop it reconnecting and close it):
this is the one module that names any of it. Each is looked for before it is used; one a release
took away costs what it was for (an SSL context per call, a log line printed twice, a readiness
that trusts the client, a socket closed with its loop), is logged once, and breaks nothing.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from typing import Any

log = logging.getLogger(__name__)
_said: set[str] = set()


def _import() -> None:
    import lark_oapi.ws.client

    loop = getattr(lark_oapi.ws.client, "loop", None)
    if isinstance(loop, asyncio.AbstractEventLoop):
        loop.close()  # this thread's, made by the import: never used


if "lark_oapi.ws.client" not in sys.modules:
    _loader = threading.Thread(target=_import, name="lark-oapi-import")
    _loader.start()
    _loader.join()

import httpx  # noqa: E402
import lark_oapi as lark  # noqa: E402
import lark_oapi.core.http.transport as _transport  # noqa: E402
import lark_oapi.core.log as _log  # noqa: E402
import lark_oapi.ws.client as ws_client  # noqa: E402
from lark_oapi.core.enum import AccessTokenType, HttpMethod  # noqa: E402
from lark_oapi.ws.pb.pbbp2_pb2 import Frame  # noqa: E402

_SSL = httpx.create_ssl_context()  # httpx's default (certifi, or SSL_CERT_FILE), made once


class _Httpx:
    """httpx as lark-oapi's transport sees it: the same, but clients share one SSL context."""

    def __getattr__(self, name: str) -> Any:
        return getattr(httpx, name)

    @staticmethod
    def AsyncClient(**options: Any) -> httpx.AsyncClient:  # noqa: N802 - httpx's name
        options.setdefault("verify", _SSL)
        return httpx.AsyncClient(**options)


def _changed(what: str) -> None:
    """A lark-oapi internal is not where it was: what it was for is done without, said once."""
    if what not in _said:
        _said.add(what)
        log.info("lark-oapi %s: %s", getattr(lark, "__version__", "?"), what)


if getattr(_transport, "httpx", None) is httpx:
    _transport.httpx = _Httpx()
else:
    _changed("its transport does not use httpx as it did: an SSL context per call")
if isinstance(getattr(_log, "handler", None), logging.Handler):
    _log.logger.removeHandler(_log.handler)
else:
    _changed("its log handler is not where it was: Lark records may be printed twice")


def use_loop(loop: asyncio.AbstractEventLoop) -> None:
    """The long connection's thread runs `loop`: the client drives whatever loop its module
    global holds (without that global, the thread's current loop, which `loop` is too)."""
    if hasattr(ws_client, "loop"):
        ws_client.loop = loop


def connected(client: Any) -> bool:
    """Whether the client has its web socket open; a client that keeps it elsewhere is trusted."""
    if not hasattr(client, "_conn"):
        _changed("ws.Client._conn is gone: the long connection counts as up while it runs")
        return True
    return client._conn is not None


def stop_reconnecting(client: Any) -> None:
    """A stop must not turn into a reconnect."""
    if hasattr(client, "_auto_reconnect"):
        client._auto_reconnect = False


async def disconnect(client: Any) -> None:
    """Close the client's web socket (else its loop's closing drops it)."""
    close = getattr(client, "_disconnect", None)
    if close is None:
        _changed("ws.Client._disconnect is gone: the socket closes with its loop")
        return
    await close()


__all__ = [
    "AccessTokenType",
    "Frame",
    "HttpMethod",
    "connected",
    "disconnect",
    "lark",
    "stop_reconnecting",
    "use_loop",
    "ws_client",
]
