"""The suite's own guards work: a hung test times out, a connect off loopback fails, and a test
that starts a process without the `process` mark fails."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.network_guard import NetworkBlocked, NetworkGuard, outside_loopback

NOT_ROUTABLE = ("192.0.2.1", 9)  # TEST-NET-1 (RFC 5737): never routed anywhere
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.process
def test_a_hanging_async_test_fails_with_a_timeout(tmp_path: Path) -> None:
    test_file = tmp_path / "test_hang.py"
    test_file.write_text(
        "import asyncio\n"
        "\n"
        "async def test_hangs() -> None:\n"
        "    await asyncio.Event().wait()\n"
        "\n"
        "def test_after_it_still_runs() -> None:\n"
        "    pass\n"
    )
    # the same plugin and method as pyproject.toml sets for this suite, without its config
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)]
    options = ["-o", "asyncio_mode=auto", "--timeout=1", "--timeout-method=signal"]
    result = subprocess.run(
        [*command, *options], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Failed: Timeout" in result.stdout, result.stdout
    assert "1 failed, 1 passed" in result.stdout, result.stdout


@pytest.mark.process
def test_a_test_starting_a_process_unmarked_fails_even_if_it_catches_the_error(
    tmp_path: Path,
) -> None:
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import (  # noqa: F401  (the suite's hooks, registered here)\n"
        "    pytest_configure, pytest_runtest_makereport, pytest_runtest_protocol,\n"
        ")\n"
    )
    (tmp_path / "test_processes.py").write_text(
        "import asyncio, subprocess\n"
        "import pytest\n"
        "\n"
        "def test_unmarked() -> None:\n"
        "    subprocess.run(['true', 'unmarked'])\n"
        "\n"
        "async def test_unmarked_and_caught() -> None:\n"
        "    try:\n"
        "        await asyncio.create_subprocess_exec('true', 'caught')\n"
        "    except Exception:\n"
        "        pass\n"
        "\n"
        "@pytest.mark.process\n"
        "def test_marked() -> None:\n"
        "    subprocess.run(['true'], check=True)\n"
        "\n"
        "def test_no_process() -> None:\n"
        "    pass\n"
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "asyncio_mode=auto",
    ]
    options = ["-o", "markers=process: starts a process", "--rootdir", str(tmp_path)]
    result = subprocess.run(
        [*command, *options, str(tmp_path)],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "2 failed, 2 passed" in result.stdout, result.stdout + result.stderr
    assert "FAILED test_processes.py::test_unmarked " in result.stdout, result.stdout
    assert "true unmarked" in result.stdout and "true caught" in result.stdout, result.stdout


def test_a_blocking_connect_off_loopback_fails_naming_the_address(
    network_guard: NetworkGuard,
) -> None:
    with socket.socket() as sock, pytest.raises(NetworkBlocked, match=r"192\.0\.2\.1:9"):
        sock.connect(NOT_ROUTABLE)
    with socket.socket() as sock, pytest.raises(NetworkBlocked, match=r"192\.0\.2\.1:9"):
        sock.connect_ex(NOT_ROUTABLE)
    assert network_guard.blocked == ["192.0.2.1:9", "192.0.2.1:9"]
    network_guard.blocked.clear()  # seen: this test's teardown need not fail


async def test_an_asyncio_connect_off_loopback_fails_naming_the_address(
    network_guard: NetworkGuard,
) -> None:
    with pytest.raises(NetworkBlocked, match=r"192\.0\.2\.1:9"):
        await asyncio.open_connection(*NOT_ROUTABLE)
    assert network_guard.blocked == ["192.0.2.1:9"]
    network_guard.blocked.clear()


@pytest.mark.parametrize(
    ("family", "address"),
    [
        (socket.AF_INET, ("127.0.0.1", 80)),
        (socket.AF_INET, ("127.8.9.10", 80)),
        (socket.AF_INET, ("localhost", 80)),
        (socket.AF_INET6, ("::1", 80, 0, 0)),
        (socket.AF_INET6, ("::ffff:127.0.0.1", 80, 0, 0)),
        (socket.AF_UNIX, "/tmp/bot.sock"),
    ],
)
def test_loopback_and_unix_sockets_are_allowed(family: int, address: object) -> None:
    assert outside_loopback(family, address) is None


@pytest.mark.parametrize(
    ("family", "address", "shown"),
    [
        (socket.AF_INET, ("10.0.0.1", 443), "10.0.0.1:443"),
        (socket.AF_INET, ("api.telegram.org", 443), "api.telegram.org:443"),
        (socket.AF_INET6, ("2001:db8::1", 443, 0, 0), "[2001:db8::1]:443"),
    ],
)
def test_other_addresses_are_named(family: int, address: object, shown: str) -> None:
    assert outside_loopback(family, address) == shown


async def test_a_loopback_connect_goes_through() -> None:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await reader.read() == b""
        writer.close()
        await writer.wait_closed()


def test_a_network_the_test_allowed_is_reachable_and_others_still_are_not(
    network_guard: NetworkGuard,
) -> None:
    """A test's own bridge to its network namespaces (tests/netns_kit.py) may be allowed."""
    network_guard.allow(ipaddress.ip_network("192.0.2.0/30"))
    with socket.socket() as sock:
        sock.settimeout(0.01)
        with pytest.raises(OSError):  # allowed: the real connect runs (nothing answers there)
            sock.connect(NOT_ROUTABLE)
    with socket.socket() as sock, pytest.raises(NetworkBlocked, match=r"192\.0\.2\.9:9"):
        sock.connect(("192.0.2.9", 9))
    assert network_guard.blocked == ["192.0.2.9:9"]
    network_guard.blocked.clear()
