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

`import lark_oapi` loads all of its ~11,000 modules (its `__init__` imports every API, and so
does `lark_oapi.Client`): 1.6 s of CPU. The packages `lark_oapi` and `lark_oapi.api.*` are
made lazy (`_LazyPackages`: a package's own `__init__` runs the first time a name it defines is
asked for, its submodules import as usual), and only the modules used are imported: the core,
the long connection with its event dispatcher, and IM's two upload resources (~1,000 modules,
0.45 s). For the same reason the Open API's generic call is `arequest` below, the body of
`Client.arequest`, on a `Config` built as `Client.builder()` builds it.
"""

from __future__ import annotations

import asyncio
import importlib.abc
import importlib.machinery
import logging
import sys
import threading
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)
_said: set[str] = set()
# packages whose `__init__` waits for a name it defines; the last one's imports pkg_resources
# (~60 ms) to declare a namespace package its own folder already is
LAZY = ("lark_oapi", "lark_oapi.api", "lark_oapi.ws.pb.google")


class _LazyPackages(importlib.abc.MetaPathFinder):
    """`lark_oapi` and `lark_oapi.api.*` packages made without running their `__init__`, which
    runs when a name it defines is first asked for (`lark_oapi.Client`, say): code that imports
    the whole SDK still gets it, code that imports a module gets that module's imports only."""

    _lock = threading.RLock()

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name not in LAZY and not name.startswith("lark_oapi.api."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.submodule_search_locations is None or spec.loader is None:
            return spec  # a module: imported as it is
        spec.loader = _LazyInit(spec.loader)
        return spec


class _LazyInit(importlib.abc.Loader):
    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        made: ModuleType | None = self.loader.create_module(spec)
        return made

    def exec_module(self, module: ModuleType) -> None:
        def init(name: str) -> Any:  # the module's `__getattr__`: for a name it lacks
            with _LazyPackages._lock:
                if module.__dict__.pop("__getattr__", None) is not None:
                    module.__loader__ = self.loader
                    self.loader.exec_module(module)
            return getattr(module, name)

        module.__getattr__ = init  # type: ignore[method-assign]


if "lark_oapi" not in sys.modules and not any(
    isinstance(finder, _LazyPackages) for finder in sys.meta_path
):
    sys.meta_path.insert(0, _LazyPackages())


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
import lark_oapi  # noqa: E402
import lark_oapi.core.http.transport as _transport  # noqa: E402
import lark_oapi.core.log as _log  # noqa: E402
import lark_oapi.ws.client as ws_client  # noqa: E402
from lark_oapi.api.im.v1.model.create_file_request import CreateFileRequest  # noqa: E402
from lark_oapi.api.im.v1.model.create_file_request_body import (  # noqa: E402
    CreateFileRequestBody,
)
from lark_oapi.api.im.v1.model.create_image_request import CreateImageRequest  # noqa: E402
from lark_oapi.api.im.v1.model.create_image_request_body import (  # noqa: E402
    CreateImageRequestBody,
)
from lark_oapi.api.im.v1.resource.file import File  # noqa: E402
from lark_oapi.api.im.v1.resource.image import Image  # noqa: E402
from lark_oapi.core.enum import AccessTokenType, HttpMethod, LogLevel  # noqa: E402
from lark_oapi.core.http import Transport  # noqa: E402
from lark_oapi.core.json import JSON  # noqa: E402
from lark_oapi.core.model import (  # noqa: E402
    BaseRequest,
    BaseResponse,
    Config,
    RawResponse,
    RequestOption,
)
from lark_oapi.core.token import verify  # noqa: E402
from lark_oapi.core.utils.files import Files  # noqa: E402
from lark_oapi.event.dispatcher_handler import EventDispatcherHandler  # noqa: E402
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
        log.info("lark-oapi %s: %s", getattr(lark_oapi, "__version__", "?"), what)


def config(*, app_id: str, app_secret: str, domain: str, timeout_s: float) -> Config:
    """What `Client.builder()…enable_set_token(True).build()` configures: every call carries
    a token we fetched (the SDK's own fetch blocks, with `requests`)."""
    made = Config()
    made.app_id, made.app_secret, made.domain = app_id, app_secret, domain
    made.timeout, made.enable_set_token, made.log_level = timeout_s, True, LogLevel.WARNING
    _log.logger.setLevel(int(LogLevel.WARNING.value))
    return made


async def arequest(
    config: Config, request: BaseRequest, option: RequestOption | None = None
) -> RawResponse:
    """`Client.arequest`: the SDK's generic call (domain, headers, JSON body), its raw answer."""
    option = option or RequestOption()
    verify(config, request, option)
    request.files = Files.extract_files(request.body)
    raw: RawResponse = await Transport.aexecute(config, request, option)
    return raw


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
    "JSON",
    "AccessTokenType",
    "BaseRequest",
    "BaseResponse",
    "CreateFileRequest",
    "CreateFileRequestBody",
    "CreateImageRequest",
    "CreateImageRequestBody",
    "EventDispatcherHandler",
    "File",
    "Files",
    "Frame",
    "HttpMethod",
    "Image",
    "LogLevel",
    "RequestOption",
    "arequest",
    "config",
    "connected",
    "disconnect",
    "stop_reconnecting",
    "use_loop",
    "ws_client",
]
