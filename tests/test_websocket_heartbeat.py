"""Web sockets that opened together are not pinged together.

Thousands of sockets open at once when a deploy makes every tab reconnect, and each ping and its
pong cost the loop ~0.1 ms: pinged in one pass, turns wait behind them (bench/many_bench.py).
Two things put them in one pass: aiohttp rounds a heartbeat of over 5 s up to the next whole
second of the loop's clock, and sockets with the same interval keep the phase they opened in.
The gateway's server asks for the times as they are, and each socket draws its own interval.
"""

from __future__ import annotations

import asyncio
import math
from itertools import pairwise
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


def moments(times: list[float], apart_s: float = 0.01) -> int:
    """How many moments `times` fall at: those within `apart_s` of the one before are one."""
    return 1 + sum(later - earlier > apart_s for earlier, later in pairwise(sorted(times)))


async def test_sockets_opened_together_are_pinged_at_moments_of_their_own(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    """Ten sockets opened at once, just past a whole second, with a 6.5 s heartbeat: each pings
    0.8-1 intervals later (all over 5 s), across ~1.3 s. Rounded up, they would ping at one or two whole
    seconds; with one interval for all, within the few ms they opened in."""
    config = make_config(tmp_path, channels={"websocket": {"heartbeat_s": 6.5}})
    loop = asyncio.get_running_loop()
    async with App(config, base_dir=tmp_path) as app:
        await asyncio.sleep(math.ceil(loop.time()) - loop.time() + 0.02)
        sockets = await asyncio.gather(
            *(
                session.ws_connect(f"{app.url}/ws", headers={"Origin": ORIGIN}, autoping=False)
                for _ in range(10)
            )
        )
        pings = await asyncio.gather(*(pinged_at(ws) for ws in sockets))
        for ws in sockets:
            await ws.close()
    # ten draws across ~1.3 s at fewer than 4 moments 10 ms apart: a few in a million
    assert moments(pings) >= 4, sorted(pings)
