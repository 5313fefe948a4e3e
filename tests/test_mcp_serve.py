"""MCP servers under a real `bot serve`: the gateway serves while a server is down, /readyz says
which (fatal only for a `required` one), /metrics counts per server, and a gateway killed with
SIGKILL leaves no server process behind."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.processes import one_gateway, write_config
from tests.test_mcp_servers import DEMO, WAIT_S, free_port, logged, pid_alive

pytestmark = pytest.mark.process


async def readyz(session: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, object]]:
    async with session.get(f"{url}/readyz") as response:
        return response.status, await response.json()


async def test_serve_reports_servers_and_a_sigkill_leaves_no_orphans(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    nowhere = f"http://127.0.0.1:{free_port()}/mcp"
    stubborn = tmp_path / "stubborn.pid"
    # a server that ignores both its stdin closing and SIGTERM, and never answers
    ignore = (
        "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        f" open({str(stubborn)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    )
    servers = {
        "files": {"command": sys.executable, "args": [DEMO, "--log", str(log), "--child"]},
        "stubborn": {"command": sys.executable, "args": ["-c", ignore], "connect_timeout_s": 300},
        "optional": {"url": nowhere, "connect_timeout_s": 1},
        "vital": {"url": nowhere, "connect_timeout_s": 1, "required": True},
    }
    config = write_config(tmp_path, mcp={"servers": servers})
    async with one_gateway(config, {}) as gateway, aiohttp.ClientSession() as session:
        await logged(log, "child ")
        async with asyncio.timeout(WAIT_S):
            while True:  # until the first attempts are over: connecting is not yet down
                status, body = await readyz(session, gateway.url)
                down, degraded = body.get("down", {}), body.get("degraded", {})
                assert isinstance(down, dict) and isinstance(degraded, dict)
                files_ready = "mcp:files" not in down and "mcp:files" not in degraded
                started = stubborn.exists() and stubborn.read_text()
                if "mcp:vital" in down and "mcp:optional" in degraded and files_ready and started:
                    break
                await asyncio.sleep(0.1)
        assert status == 503  # the required server is down; the optional one only degrades
        assert "cannot connect" in str(degraded["mcp:optional"])
        server_pid = int(log.read_text().split("started ")[1].split()[0])
        grandchild = int(log.read_text().split("child ")[1].split()[0])
        stubborn_pid = int(stubborn.read_text())
        assert "connecting" in str(degraded["mcp:stubborn"])
        gateway.process.send_signal(signal.SIGKILL)
        await gateway.process.wait()
        async with asyncio.timeout(WAIT_S):
            # noqa: ASYNC110 - other processes
            while any(map(pid_alive, (server_pid, grandchild, stubborn_pid))):  # noqa: ASYNC110
                await asyncio.sleep(0.1)
