"""Who may open a socket: the Origin rule and the connection caps, checked before the upgrade."""

from __future__ import annotations

import ipaddress
import logging
import resource
from collections.abc import Sequence
from urllib.parse import urlsplit

from aiohttp import hdrs, web

log = logging.getLogger(__name__)


def origin_of(url: str) -> str:
    """`https://bot.example.com/path` → `https://bot.example.com`, as browsers send Origin."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def own_origins(sockname: object) -> frozenset[str]:
    """The origins of pages this server itself serves on the address a socket was accepted on.

    The address comes from the kernel, not from the client: unlike the `Host` header, a page
    on another site (even one whose name resolves to us, after DNS rebinding) cannot match it.
    """
    if not isinstance(sockname, tuple) or len(sockname) < 2:
        return frozenset()
    host, port = str(sockname[0]), sockname[1]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return frozenset()
    hosts = {f"[{host}]" if address.version == 6 else host}
    if address.is_loopback:
        hosts |= {"127.0.0.1", "localhost", "[::1]"}
    return frozenset(f"http://{name}:{port}" for name in hosts)


def default_max_connections() -> int:
    """Three quarters of the open-file limit: the rest is for the store, the model, other peers.

    Past the limit every accept fails with EMFILE and the whole server stops answering.
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 10_000
    return max(1, soft * 3 // 4)


class Admission:
    """Allowed origins and open-socket counts (in total and per client address)."""

    def __init__(
        self,
        allowed_origins: Sequence[str],
        *,
        public_url: str | None,
        max_connections: int | None,
        max_per_address: int,
        address_header: str | None = None,
    ) -> None:
        if isinstance(allowed_origins, str):
            raise TypeError(
                f"allowed_origins must be a list of origins, e.g. [{allowed_origins!r}]"
            )
        for origin in allowed_origins:
            if origin.endswith("/"):
                raise ValueError(
                    f"allowed origin {origin!r} ends with '/'; browsers send {origin.rstrip('/')!r}"
                )
        for name, value in (
            ("max_connections", max_connections),
            ("max_connections_per_address", max_per_address),
        ):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        origins = set(allowed_origins)
        if public_url:
            origins.add(origin_of(public_url))
        self.origins = frozenset(origins)
        self.max_connections = max_connections or default_max_connections()
        self.max_per_address = max_per_address
        self.address_header = address_header  # only behind a proxy: a client can send it too
        self.total = 0
        self._full = False
        self._per_address: dict[str, int] = {}

    def admit(self, request: web.Request) -> str:
        """Count the socket `request` opens and return its client address, or raise the refusal.

        The caller calls `closed(address)` when the socket is gone.
        """
        self.check_origin(request)
        address = self.address(request)
        retry = {"Retry-After": "10"}
        if self.total >= self.max_connections:
            if not self._full:  # once each time the server fills up, not once per refusal
                self._full = True
                log.warning("websocket refusing sockets: %d open (max_connections)", self.total)
            raise web.HTTPServiceUnavailable(
                headers=retry,
                text=f"the server has {self.total} sockets open, its limit; try again later "
                "(raise channels.websocket.max_connections and the open-file limit)",
            )
        if self._per_address.get(address, 0) >= self.max_per_address:
            log.debug("websocket refused: %s has %d sockets open", address, self.max_per_address)
            raise web.HTTPTooManyRequests(
                headers=retry,
                text=f"{address} has {self.max_per_address} sockets open already; close some "
                "(the limit is channels.websocket.max_connections_per_address)",
            )
        self.total += 1
        self._per_address[address] = self._per_address.get(address, 0) + 1
        return address

    def check_origin(self, request: web.Request) -> None:
        """Raise the refusal of a page whose origin is not allowed (a missing Origin means a
        non-browser client, which could forge one anyway)."""
        origin = request.headers.get(hdrs.ORIGIN)
        # Browsers apply no CORS to web sockets: without this check any site could put our bot
        # on its pages.
        if origin is not None and not self.allows_origin(request, origin):
            log.info("websocket refused: origin %r is not in allowed_origins", origin)
            # Readable by any page (a browser hides why a web socket failed): the widget fetches
            # this URL after a failed connect to tell "not allowed here" from "offline".
            raise web.HTTPForbidden(
                headers={"Access-Control-Allow-Origin": "*"},
                text=f"origin {origin!r} is not allowed; "
                "add it to channels.websocket.allowed_origins",
            )

    def allows_origin(self, request: web.Request, origin: str) -> bool:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        return origin in self.origins | own_origins(sockname)

    def address(self, request: web.Request) -> str:
        """The client's address: the TCP peer's, or behind a reverse proxy the one it names in
        `address_header` (of `X-Forwarded-For`, the last entry: the one that proxy added)."""
        if self.address_header is not None:
            named = request.headers.get(self.address_header, "").rpartition(",")[2].strip()
            if named:
                return named
        return request.remote or "unknown"

    def closed(self, address: str) -> None:
        self.total -= 1
        self._full = False
        left = self._per_address.pop(address, 1) - 1
        if left:
            self._per_address[address] = left
