"""Several "hosts" on this machine: Linux network namespaces on one bridge, and TCP forwarders.

Each host is a network namespace with its own loopback and one veth leg on a bridge in the
root namespace, on a private 10.77.N.0/24 of its own (the bridge is 10.77.N.1, the hosts .2,
.3 …). A process started with `host.wrap` sees only that host's addresses: its 127.0.0.1 is
its own, so whatever it shares (Redis, PostgreSQL, the fake model) it reaches over the bridge,
as a process on another machine would. Creating namespaces needs root (CAP_NET_ADMIN): without
it the test is skipped, saying so. Everything is removed at the end, even after a failure;
names are unique per run, so parallel runs never meet.
"""

from __future__ import annotations

import contextlib
import ipaddress
import random
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from tests.tcp_proxy import TcpProxy


@dataclass(frozen=True)
class Host:
    namespace: str
    address: str  # its address on the bridge

    @property
    def wrap(self) -> list[str]:
        """The command prefix that runs a program on this host."""
        return ["ip", "netns", "exec", self.namespace]


@dataclass(frozen=True)
class Network:
    subnet: ipaddress.IPv4Network
    gateway: str  # the root namespace's address on the bridge: where shared servers listen
    hosts: list[Host]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)


def _free_subnet() -> ipaddress.IPv4Network:
    used = subprocess.run(
        ["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True
    ).stdout
    for n in random.sample(range(1, 255), 254):
        if f" 10.77.{n}." not in used:
            return ipaddress.IPv4Network(f"10.77.{n}.0/24")
    pytest.skip("no free 10.77.N.0/24 for the test network")


@contextmanager
def network(count: int) -> Iterator[Network]:
    """`count` hosts on one bridge; skips when namespaces cannot be made here."""
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command (iproute2): cannot make network namespaces")
    tag = uuid.uuid4().hex[:6]
    bridge = f"gwb{tag}"
    namespaces: list[str] = []
    try:
        try:
            _ip("link", "add", bridge, "type", "bridge")
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"cannot make a bridge (needs root / CAP_NET_ADMIN): {exc.stderr.strip()}")
        subnet = _free_subnet()
        gateway = str(subnet[1])
        _ip("addr", "add", f"{gateway}/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        hosts = []
        for k in range(count):
            name, outer, inner = f"gw-{tag}-{k}", f"gwv{tag}{k}", f"gwp{tag}{k}"
            _ip("netns", "add", name)
            namespaces.append(name)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", name)
            _ip("link", "set", outer, "master", bridge)
            _ip("link", "set", outer, "up")
            address = str(subnet[2 + k])
            _ip("-n", name, "addr", "add", f"{address}/24", "dev", inner)
            _ip("-n", name, "link", "set", inner, "up")
            _ip("-n", name, "link", "set", "lo", "up")
            hosts.append(Host(name, address))
        yield Network(subnet, gateway, hosts)
    finally:
        for name in namespaces:  # deleting a namespace deletes the veth pair in it
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("netns", "del", name)
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", bridge)


@contextlib.asynccontextmanager
async def forwards(host: str, *targets: tuple[str, int]) -> AsyncIterator[list[TcpProxy]]:
    """TCP forwarders listening on `host`, one to each target: PostgreSQL and the fake servers
    listen on loopback only; the hosts reach them through these."""
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(TcpProxy(target, host)) for target in targets]
