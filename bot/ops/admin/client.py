"""Who is asking for `/admin`: the peer address, or the client a trusted proxy names.

A proxy on this host connects from loopback whoever its client is, so loopback alone proves
nothing when a request was relayed. Any of the headers proxies and CDNs set (not only
`X-Forwarded-For`: Cloudflare's `CF-Connecting-IP`, Akamai's `True-Client-IP`, ...) marks a
request as relayed. From a peer in `admin.trusted_proxies` the client is the last address of
`X-Forwarded-For` that is not itself a trusted proxy (the entries left of it are the client's
own claims; every hop a trusted proxy: the one the nearest proxy saw); from any other peer a
relayed request has no known client at all.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from aiohttp import web

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

FORWARDING_HEADERS = (
    "Forwarded",
    "X-Forwarded-For",
    "X-Forwarded-Host",
    "X-Forwarded",
    "X-Real-IP",
    "X-Client-IP",
    "X-Cluster-Client-IP",
    "X-Original-Forwarded-For",
    "X-ProxyUser-Ip",
    "Client-IP",
    "True-Client-IP",
    "CF-Connecting-IP",
    "Fastly-Client-IP",
)


def parse_address(value: str) -> Address | None:
    try:
        address = ipaddress.ip_address(value.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # 127.0.0.1 on a dual-stack socket bound to "::"
    return address


class ClientAddress:
    def __init__(self, trusted_proxies: Sequence[str]) -> None:
        self._trusted: list[Network] = [ipaddress.ip_network(n) for n in trusted_proxies]

    def _is_proxy(self, address: Address) -> bool:
        return any(address in network for network in self._trusted)

    def of(self, request: web.Request) -> Address | None:
        """The client's address; None when it cannot be known (a unix socket, or a request
        relayed by a peer that is not a trusted proxy)."""
        peer = parse_address(request.remote or "")
        if peer is None:
            return None
        if not any(name in request.headers for name in FORWARDING_HEADERS):
            return peer
        if not self._is_proxy(peer):
            return None
        hops = ",".join(request.headers.getall("X-Forwarded-For", [])).split(",")
        nearest: Address | None = None
        for hop in reversed(hops):
            address = parse_address(hop)
            if address is None:
                return None  # a hop we cannot read: nothing left of it can be trusted
            if not self._is_proxy(address):
                return address
            nearest = nearest or address
        return nearest  # every hop a proxy of ours: the client sits on a proxy's host
