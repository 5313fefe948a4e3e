"""Tests reach only loopback and unix sockets: a connect anywhere else fails, naming the address."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

import pytest


class NetworkBlocked(RuntimeError):
    """Not an OSError on purpose: clients retry or wrap OSErrors, which would hide the cause."""


def outside_loopback(family: int, address: Any) -> str | None:
    """The address as text when a socket of `family` connecting to it leaves this machine."""
    if family not in (socket.AF_INET, socket.AF_INET6):
        return None  # unix sockets and the like never leave the machine
    host = address[0]
    if host == "localhost":
        return None
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])  # drop an IPv6 scope id
    except ValueError:
        return f"{host}:{address[1]}"  # a name: connect() would resolve it, maybe off this machine
    mapped = getattr(ip, "ipv4_mapped", None)
    if (mapped or ip).is_loopback:
        return None
    return f"[{host}]:{address[1]}" if ip.version == 6 else f"{host}:{address[1]}"


class NetworkGuard:
    """Wraps socket.socket.connect/connect_ex, the seam every client (asyncio's too) ends in."""

    def __init__(self) -> None:
        # kept even when the caller swallows the exception, so the test still fails at teardown
        self.blocked: list[str] = []
        self.allowed: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []

    def allow(self, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> None:
        """Also allow a network that never leaves this machine: the test's own bridge to the
        network namespaces it made (tests/netns_kit.py)."""
        self.allowed.append(network)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in ("connect", "connect_ex"):
            monkeypatch.setattr(socket.socket, name, self._wrap(getattr(socket.socket, name)))

    def _wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(sock: socket.socket, address: Any) -> Any:
            target = outside_loopback(sock.family, address)
            if target is not None and not self._allowed(address[0]):
                self.blocked.append(target)
                raise NetworkBlocked(
                    f"test tried to connect to {target}; tests may reach only 127.0.0.0/8, ::1 "
                    "and unix sockets: point the client at a local fake server"
                )
            return real(sock, address)

        return guarded

    def _allowed(self, host: str) -> bool:
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(ip in network for network in self.allowed)
