"""`bot serve` out of file descriptors: a few log lines, not thousands, and it recovers."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import socket
import sys
from pathlib import Path

import aiohttp
import pytest

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parent.parent
FD_LIMIT = 64


async def _healthz_until_ok(port: int) -> int:
    """`/healthz`'s status once it is 200, or the last one after 20 s.

    The flood's closed connections may still sit in the listen backlog: the server accepts them
    in one batch, fills its `max_connections` with them and answers the next with its bare 503
    until it has read their EOFs. Recovering means a 200 soon after, not on the first try.
    """
    status = 0
    async with aiohttp.ClientSession() as session, asyncio.timeout(20):
        while True:
            async with session.get(f"http://127.0.0.1:{port}/healthz") as r:
                status = r.status
            if status != 503:
                return status
            await asyncio.sleep(0.2)


def _low_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
async def test_an_accept_flood_logs_one_line_and_the_server_recovers(
    tmp_path: Path, event_loop: str
) -> None:
    """asyncio logs each failed accept (filtered to one line); libuv (uvloop) drops a connection
    it cannot take without a word, so there is nothing to filter: it must recover all the same."""
    asyncio_loop = event_loop == "asyncio"
    config = tmp_path / "config.yaml"
    config.write_text(
        json.dumps(
            {
                "server": {"port": 0, "event_loop": event_loop},
                "storage": {"path": str(tmp_path / "bot.db")},
                "personas": {"dirs": [str(ROOT / "personas")]},
                "llm": {"provider": "offline"},
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "serve",
        "--config",
        str(config),
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=_low_fd_limit,
    )
    assert server.stderr is not None
    lines: list[str] = []
    serving: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    accept_failed = asyncio.Event()

    async def read_log() -> None:
        assert server.stderr is not None
        async for raw in server.stderr:  # read all the time: a full pipe would block the server
            line = raw.decode(errors="replace").rstrip()
            lines.append(line)
            if "serving http://" in line and not serving.done():
                serving.set_result(
                    int(line.split("serving http://", 1)[1].split()[0].split(":")[1])
                )
            if "socket.accept()" in line:
                accept_failed.set()

    reader = asyncio.create_task(read_log())
    flood: list[socket.socket] = []
    try:
        async with asyncio.timeout(30):
            port = await serving
        for _ in range(3 * FD_LIMIT):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))  # silent connections, as many as the backlog takes
            flood.append(sock)
        if asyncio_loop:
            async with asyncio.timeout(10):
                await accept_failed.wait()
        await asyncio.sleep(1.5)  # keep the flood up across the server's accept retries (1 s)
        for sock in flood:
            sock.close()
        flood.clear()
        assert await _healthz_until_ok(port) == 200
    finally:
        for sock in flood:
            sock.close()
        if server.returncode is None:
            server.terminate()
        await server.wait()
        await reader
    assert not any(line.startswith("Traceback") for line in lines), "\n".join(lines)
    accept_lines = [line for line in lines if "socket.accept()" in line]
    if asyncio_loop:
        assert 1 <= len(accept_lines) <= 3, lines
        assert "ulimit -n" in accept_lines[0]
