"""Each web socket is pinged at its own time.

aiohttp rounds a heartbeat of over 5 s up to the next whole second, so every socket that opened
within that second pinged in one pass of the loop: with thousands of idle sockets, passes of
tens of milliseconds that turns waited behind (bench/many_bench.py). The gateway's server asks
for the times as they are.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import aiohttp

from bot.runtime.app import App
from tests.conftest import ORIGIN, make_config


async def pinged_at(ws: aiohttp.ClientWebSocketResponse) -> float:
    """When the server's first ping reached this client (the loop's clock)."""
    while True:
        message = await ws.receive(timeout=15)
        if message.type == aiohttp.WSMsgType.PING:
            return asyncio.get_running_loop().time()
        assert message.type == aiohttp.WSMsgType.TEXT, message


async def test_sockets_opened_half_a_second_apart_are_pinged_half_a_second_apart(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    config = make_config(tmp_path, channels={"websocket": {"heartbeat_s": 5.1}})
    loop = asyncio.get_running_loop()
    async with App(config, base_dir=tmp_path) as app:
        # just past a whole second: rounded up, both heartbeats would fall on the same second
        await asyncio.sleep(math.ceil(loop.time()) - loop.time() + 0.05)
        opened, sockets = [], []
        for pause in (0.0, 0.5):
            await asyncio.sleep(pause)
            ws = await session.ws_connect(
                f"{app.url}/ws", headers={"Origin": ORIGIN}, autoping=False
            )
            opened.append(loop.time())
            sockets.append(ws)
        first, second = await asyncio.gather(*(pinged_at(ws) for ws in sockets))
        for ws in sockets:
            await ws.close()
    assert abs((second - first) - (opened[1] - opened[0])) < 0.15, (opened, first, second)
