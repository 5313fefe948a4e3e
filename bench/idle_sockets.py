"""The idle visitors of bench/many_bench.py: web sockets open on the gateway, answering its pings.

They run in a process of their own, as browsers do, not in the load's: the load's event loop
times the paced turns, and 5,000 sockets' pings answered there (~250 a second, ~25 at each of
the gateway's ticks) would take turns on that loop with the frames it times. Each socket is a visitor of a stored
conversation (`visitor(index)`), says hello, waits for its `ready`, then reads until it closes:
aiohttp's client answers each ping inside `receive`, as a browser answers it in its network
stack. The child answers one line at a time on its stdin: an empty line, `OPEN <sockets still
open>`; at the end of its stdin it closes them and exits.

    python bench/idle_sockets.py URL COUNT   # prints "OPEN <n>" once all are open
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import subprocess
import sys
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ws_load import ORIGIN, _until, ask  # noqa: E402


def visitor(index: int) -> str:
    return f"bench-visitor-{index:04d}"  # as ws_load.gateway_conversation names them


async def open_idle(
    session: aiohttp.ClientSession, url: str, count: int
) -> list[aiohttp.ClientWebSocketResponse]:
    """`count` visitors of the stored conversations back, each socket idle after its ready."""

    async def one(index: int) -> aiohttp.ClientWebSocketResponse:
        ws = await session.ws_connect(url, headers={"Origin": ORIGIN}, compress=15)
        await ws.send_str(json.dumps({"type": "hello", "visitor_id": visitor(index)}))
        await _until(ws, "ready")
        return ws

    sockets: list[aiohttp.ClientWebSocketResponse] = []
    for start_at in range(0, count, 100):
        batch = range(start_at, min(count, start_at + 100))
        sockets += await asyncio.gather(*(one(i) for i in batch))
    return sockets


async def answer_pings(ws: aiohttp.ClientWebSocketResponse) -> None:
    """Read the socket until it closes: `receive` answers each ping with a pong."""
    async for _ in ws:
        pass


class IdleSockets:
    """The child process: `with IdleSockets(url, count) as idle:` returns once all are open."""

    def __init__(self, url: str, count: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, url, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("OPEN "):
            self.process.kill()
            raise SystemExit(f"bench/idle_sockets.py did not open its sockets: {line!r}")
        self.opened = int(line.split()[1])

    def still_open(self) -> int:
        return int(ask(self.process).split()[1])

    def __enter__(self) -> IdleSockets:
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()


async def serve(url: str, count: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        sockets = await open_idle(session, url, count)
        gc.freeze()  # the sockets' objects stay: no collection of this process walks them again
        answering = [asyncio.create_task(answer_pings(ws)) for ws in sockets]
        print(f"OPEN {len(sockets)}", flush=True)
        while await loop.run_in_executor(None, sys.stdin.readline):
            print(f"OPEN {sum(not ws.closed for ws in sockets)}", flush=True)
        for task in answering:
            task.cancel()
        for ws in sockets:
            await ws.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("count", type=int)
    args = parser.parse_args()
    asyncio.run(serve(args.url, args.count))


if __name__ == "__main__":
    main()
