"""Web sockets are pinged each at its own moment, and one that leaves a ping unanswered goes.

Thousands of sockets open at once when a deploy makes every tab reconnect, and each ping and its
pong cost the loop ~0.1 ms: pinged in one pass, turns wait behind them (bench/many_bench.py).
aiohttp's heartbeat rounded an interval of over 5 s up to the next whole second of the loop's
clock, and sockets with the same interval keep the phase they opened in; not rounded, it spun
under uvloop (adapters/websocket/endpoint.py). The endpoint pings each socket itself, at an
interval the socket draws, and its receive timeout drops a socket that answers no ping.
"""

from __future__ import annotations

import asyncio
import math
from itertools import pairwise
from pathlib import Path

import aiohttp
import pytest

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


async def hello(ws: aiohttp.ClientWebSocketResponse, visitor: str) -> None:
    await ws.send_json({"type": "hello", "visitor_id": visitor})
    while (await ws.receive_json(timeout=10))["type"] != "ready":
        pass


async def test_a_socket_that_leaves_a_ping_unanswered_is_dropped_one_that_answers_stays(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    """A 1 s heartbeat: each socket is pinged every 0.8-1 s. One client answers (aiohttp's
    client does, inside `receive`); one pings the server (and is answered), then reads nothing,
    as a tab whose network went away: it is closed when its next ping is due, and the other is
    still open and answered."""
    config = make_config(tmp_path, channels={"websocket": {"heartbeat_s": 1}})
    async with App(config, base_dir=tmp_path) as app:
        url = f"{app.url}/ws"
        live = await session.ws_connect(url, headers={"Origin": ORIGIN})
        gone = await session.ws_connect(url, headers={"Origin": ORIGIN}, autoping=False)
        await hello(live, "visitor-live")
        await hello(gone, "visitor-gone")
        await gone.ping(b"are you there")
        with pytest.raises(TimeoutError):  # nothing but pings, answered inside `receive`
            async with asyncio.timeout(3.5):  # (its own timeout restarts with each ping)
                await live.receive()
        frames = [await gone.receive(timeout=10) for _ in range(3)]
        assert (frames[0].type, frames[0].data) == (aiohttp.WSMsgType.PONG, b"are you there")
        assert frames[1].type is aiohttp.WSMsgType.PING
        assert frames[2].type is aiohttp.WSMsgType.CLOSE, frames
        assert (frames[2].data, frames[2].extra) == (aiohttp.WSCloseCode.GOING_AWAY, "no pong")
        assert not live.closed
        await live.send_json({"type": "message", "text": "still here", "client_message_id": "c1"})
        while (await live.receive_json(timeout=10))["type"] != "message.completed":
            pass
        await live.close()
        await gone.close()


async def test_a_pong_goes_after_the_frames_queued_before_it(
    tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    """Pings and pongs with nothing queued are written at once (adapters/websocket/connection.py);
    one that comes while frames wait for the socket's writer goes after them. Here the client's
    ping follows its hello in one write: the server reads it while `ready` is still queued."""
    config = make_config(tmp_path, channels={"websocket": {"heartbeat_s": 60}})
    async with App(config, base_dir=tmp_path) as app:
        ws = await session.ws_connect(f"{app.url}/ws", headers={"Origin": ORIGIN}, autoping=False)
        await asyncio.gather(
            ws.send_json({"type": "hello", "visitor_id": "visitor-order"}), ws.ping(b"after ready")
        )
        kinds = []
        while (message := await ws.receive(timeout=10)).type is not aiohttp.WSMsgType.PONG:
            kinds.append(message.json()["type"])
        assert message.data == b"after ready"
        assert "ready" in kinds, kinds
        await ws.ping(b"idle")  # nothing queued now: answered at once, whole
        message = await ws.receive(timeout=10)
        assert (message.type, message.data) == (aiohttp.WSMsgType.PONG, b"idle")
        await ws.close()
