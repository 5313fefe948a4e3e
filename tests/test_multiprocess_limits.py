"""Users' message limits on two real `bot serve` processes over one Redis: counted together.

Counted per process, a user behind a round-robin balancer (or reconnecting until they land on
another process) got N times `rate_limit_per_minute`. Here messages go alternately to two
processes and the limit holds for their sum. The rate is 2 a minute, a burst of 2: the next
one is allowed 30 s later, far longer than the test takes to send its handful of messages.
"""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from adapters.api.keys import hash_key
from tests.api_kit import KEY_A
from tests.processes import gateways, write_config
from tests.redis_kit import URL, prefix

__all__ = ["prefix"]
pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]
ORIGIN = "http://127.0.0.1:8080"
PER_MINUTE = 2
SENT = 8  # alternately to two processes: 2 go, 6 are refused (per process: 4 went)


def _config(folder: Path, prefix: str) -> Path:
    api = {
        "enabled": True,
        "keys": [{"id": "a", "sha256": hash_key(KEY_A)}],
        "rate_limit_per_minute": PER_MINUTE,
    }
    return write_config(
        folder,
        redis={"url": "${REDIS_URL}", "prefix": prefix},
        channels={"api": api, "websocket": {"rate_limit_per_minute": PER_MINUTE}},
    )


async def _handled(ws: aiohttp.ClientWebSocketResponse) -> None:
    """Until the server has handled every frame sent on `ws` so far: a binary frame (refused
    at once, never rate limited) is answered after them. A refused message may get no frame of
    its own (one `rate_limited` error a quiet period), so its absence is what is counted."""
    await ws.send_bytes(b"barrier")
    while True:
        frame = await ws.receive_json(timeout=30)
        if frame["type"] == "error" and frame["code"] == "binary_not_supported":
            return


async def _taken(session: aiohttp.ClientSession, url: str, visitor: str) -> set[str]:
    """The ids of the visitor's messages the conversation took, from a new socket's replay."""
    ws = await session.ws_connect(f"{url}/ws", headers={"Origin": ORIGIN})
    try:
        await ws.send_json({"type": "hello", "visitor_id": visitor, "resume_after": 0})
        ready = await ws.receive_json(timeout=30)
        assert ready["type"] == "ready", ready
        taken: set[str] = set()
        while True:
            frame = await ws.receive_json(timeout=30)
            if frame["type"] == "message.user":
                taken.add(frame["message_id"])
            if frame.get("seq", 0) >= ready["seq"]:
                return taken
    finally:
        await ws.close()


async def test_messages_sent_alternately_to_two_processes_are_limited_in_total(
    prefix: str, tmp_path: Path, session: aiohttp.ClientSession
) -> None:
    async with gateways(2, _config(tmp_path, prefix), {"REDIS_URL": URL}) as processes:
        # The web socket: one visitor, a tab on each process.
        tabs = []
        for gateway in processes:
            ws = await session.ws_connect(f"{gateway.url}/ws", headers={"Origin": ORIGIN})
            await ws.send_json({"type": "hello", "visitor_id": "visitor-limits"})
            assert (await ws.receive_json(timeout=30))["type"] == "ready"
            tabs.append(ws)
        for n in range(SENT):
            tab = tabs[n % 2]
            await tab.send_json(
                {"type": "message", "text": f"hi {n}", "client_message_id": f"w{n}"}
            )
            await _handled(tab)
        for tab in tabs:
            await tab.close()
        taken = await _taken(session, processes[0].url, "visitor-limits")
        # The sessions API: one session, its requests to each process in turn.
        headers = {"Authorization": f"Bearer {KEY_A}"}
        first = f"{processes[0].url}/api/v1/sessions"
        async with session.post(first, headers=headers) as response:
            sid = (await response.json())["id"]
        statuses = []
        for n in range(SENT):
            url = f"{processes[n % 2].url}/api/v1/sessions/{sid}/stop"
            async with session.post(url, headers=headers) as response:
                statuses.append(response.status)
    assert taken == {"w0", "w1"}  # the first two, one on each process
    assert statuses.count(202) == PER_MINUTE, statuses
    assert statuses.count(429) == SENT - PER_MINUTE, statuses
