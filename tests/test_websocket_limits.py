"""The web socket channel under floods: rate limits per conversation, caps, deadlines, origins."""

from __future__ import annotations

import json
import logging
from typing import Any

import aiohttp
import pytest

from adapters.hub import MemoryEventHub
from adapters.rates import RateLimiter
from adapters.websocket.accept_errors import ACCEPT_ERROR, AcceptErrorFilter
from tests.test_websocket_channel import (
    ORIGIN,
    Harness,
    MakeHarness,
    hello,
    receive,
    receive_close,
    turn,
)
from tests.test_websocket_channel import harness as harness  # fixtures
from tests.test_websocket_channel import make_harness as make_harness


async def test_many_sockets_of_one_visitor_share_one_rate_limit(
    make_harness: MakeHarness,
) -> None:
    harness = await make_harness(rate_limit_per_minute=3)
    sockets = [await harness.session.ws_connect(harness.url, origin=ORIGIN) for _ in range(6)]
    try:
        for ws in sockets:
            await hello(ws, visitor_id="one-visitor")
        for n, ws in enumerate(sockets):
            await ws.send_json({"type": "message", "text": f"m{n}"})
        errors = []
        for ws in sockets[3:]:
            frame = await receive(ws)  # every socket of the visitor sees the echoes too
            while frame["type"] != "error":
                frame = await receive(ws)
            errors.append(frame)
    finally:
        for ws in sockets:
            await ws.close()
    assert [m.text for m in harness.received] == ["m0", "m1", "m2"]
    assert [e["code"] for e in errors] == ["rate_limited"] * 3
    assert "all its sockets" in errors[0]["message"]


async def test_another_visitor_has_its_own_budget(make_harness: MakeHarness) -> None:
    harness = await make_harness(rate_limit_per_minute=1)
    async with harness.connect() as first, harness.connect() as second:
        await hello(first, visitor_id="visitor-one")
        await hello(second, visitor_id="visitor-two")
        await turn(first, "a")
        await turn(second, "b")
    assert [m.text for m in harness.received] == ["a", "b"]


def test_rate_buckets_of_quiet_identities_are_forgotten() -> None:
    now = [0.0]
    limiter = RateLimiter(30, max_identities=500, clock=lambda: now[0])
    for n in range(3000):
        limiter.take(f"v:{n}")
    assert len(limiter) == 500  # bounded while all of them are active
    now[0] += 20  # 10 tokens at 30 a minute: refilled after 20 s
    assert limiter.take("v:late")
    assert len(limiter) == 1


def test_a_refilled_bucket_is_the_same_as_a_new_one() -> None:
    now = [0.0]
    limiter = RateLimiter(6, clock=lambda: now[0])
    assert [limiter.take("v:a") for _ in range(7)] == [True] * 6 + [False]
    now[0] += 10  # one token back
    assert [limiter.take("v:a") for _ in range(2)] == [True, False]


async def test_a_burst_is_answered_with_one_error_and_the_socket_stays_open(
    make_harness: MakeHarness,
) -> None:
    harness = await make_harness(rate_limit_per_minute=1)
    async with harness.connect() as ws:
        await hello(ws)
        burst = json.dumps({"type": "message", "text": "flood"})
        for _ in range(400):
            await ws.send_str(burst)
        await ws.send_str('{"type": "dance"}')
        frames: list[dict[str, Any]] = []
        while not frames or frames[-1].get("code") != "unknown_type":
            frames.append(await receive(ws))  # a close (1013) would fail here
    errors = [f["code"] for f in frames if f["type"] == "error"]
    assert errors == ["rate_limited", "unknown_type"]
    assert [m.text for m in harness.received] == ["flood"]


async def test_a_socket_that_never_says_hello_is_closed(make_harness: MakeHarness) -> None:
    harness = await make_harness(hello_timeout_s=0.05)
    async with harness.connect() as ws:
        assert await receive_close(ws) == 4008
    async with harness.connect() as ws:
        await hello(ws)
        frames = await turn(ws, "a hello in time keeps it open")
    assert frames[-1]["type"] == "message.completed"


async def test_sockets_per_address_and_in_all_are_capped(make_harness: MakeHarness) -> None:
    harness = await make_harness(max_connections_per_address=2)
    async with harness.connect(), harness.connect():
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await harness.session.ws_connect(harness.url, origin=ORIGIN)
    assert refused.value.status == 429
    capped = await make_harness(max_connections=1)
    async with capped.connect() as ws:
        await hello(ws)
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await capped.session.ws_connect(capped.url, origin=ORIGIN)
    assert refused.value.status == 503


async def test_an_origin_matching_only_the_host_header_is_refused(harness: Harness) -> None:
    """DNS rebinding: evil.example resolves to us, so the browser sends a matching Host."""
    port = harness.runner.addresses[0][1]
    rebound = f"evil.example:{port}"
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await harness.session.ws_connect(
            harness.url, headers={"Origin": f"http://{rebound}", "Host": rebound}
        )
    assert refused.value.status == 403
    for scheme_only in (f"https://127.0.0.1:{port}", "https://127.0.0.1:8080"):
        with pytest.raises(aiohttp.WSServerHandshakeError):
            await harness.session.ws_connect(harness.url, origin=scheme_only)
    for own in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", ORIGIN):
        async with harness.session.ws_connect(harness.url, origin=own) as ws:
            await hello(ws)


async def test_the_public_url_is_an_allowed_origin(make_harness: MakeHarness) -> None:
    harness = await make_harness(public_url="https://bot.example.com/chat")
    async with harness.connect(origin="https://bot.example.com") as ws:
        await hello(ws)


async def test_a_frame_of_exactly_max_frame_bytes_is_taken(make_harness: MakeHarness) -> None:
    harness = await make_harness(max_frame_bytes=1024)
    head = '{"type": "message", "text": "'
    exact = head + "x" * (1024 - len(head) - 2) + '"}'
    assert len(exact.encode()) == 1024
    async with harness.connect() as ws:
        await hello(ws)
        await ws.send_str(exact)
        assert (await receive(ws))["type"] == "message.user"  # taken: its echo comes back
    async with harness.connect() as ws:
        await hello(ws)
        await ws.send_str(exact[:-2] + 'x"}')
        assert await receive_close(ws) == 1009


def test_accept_errors_are_logged_once_per_interval() -> None:
    now = [0.0]
    log_filter = AcceptErrorFilter(interval_s=10, clock=lambda: now[0])

    def record(message: str) -> bool:
        error = OSError(24, "Too many open files")
        item = logging.LogRecord("asyncio", 40, __file__, 1, message, None, (OSError, error, None))
        return log_filter.filter(item)

    assert record(ACCEPT_ERROR + "\nsocket: <fd=12>")
    assert [record(ACCEPT_ERROR) for _ in range(1000)] == [False] * 1000
    assert record("some other asyncio error")
    now[0] += 10
    assert record(ACCEPT_ERROR) and log_filter.suppressed == 0


class Sink:
    def __init__(self) -> None:
        self.frames: list[str] = []

    def push(self, frame: str) -> bool:
        self.frames.append(frame)
        return True


async def test_idle_conversations_keep_a_bounded_amount_of_frames() -> None:
    hub = MemoryEventHub(replay_events=200, max_idle_bytes=100_000)
    answer = {"text": "x" * 5_000, "display": []}
    for n in range(1_000):
        await hub.publish(f"v:{n}", "message.completed", {"message_id": f"m{n}", **answer})
    kept = hub.footprint()
    assert kept["idle_bytes"] <= 100_000 and kept["idle"] <= 20, kept
    _, replay, _ = await hub.attach("v:999", Sink(), 0)  # the most recent ones are still there
    assert len(replay) == 1
    _, replay, _ = await hub.attach("v:0", Sink(), 0)  # the oldest were forgotten
    assert replay == []
    assert hub.footprint()["idle_bytes"] <= kept["idle_bytes"] - 5_000
