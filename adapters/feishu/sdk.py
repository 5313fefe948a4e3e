"""lark_oapi, imported so that its import-time event loop is not left open.

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
"""

from __future__ import annotations

import sys
import threading
from typing import Any


def _import() -> None:
    import lark_oapi.ws.client

    lark_oapi.ws.client.loop.close()  # this thread's, made by the import: never used


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


_transport.httpx = _Httpx()
_log.logger.removeHandler(_log.handler)

__all__ = ["AccessTokenType", "Frame", "HttpMethod", "lark", "ws_client"]
