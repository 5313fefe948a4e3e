"""Takeover time after a kill, for bench/scaleout_bench.py: two gateway processes on one Redis.

A tab on each process, both in one conversation. The message is sent on A, whose model holds
the turn open (`BENCH_HOLD_S`); once B's tab sees A's placeholder, A is killed with SIGKILL, and
the clock runs until B's tab sees the answer completed, by B, in that same placeholder.
"""

from __future__ import annotations

import json
import time
from typing import Any

import aiohttp

from bench.ws_load import ORIGIN, Server, _until

LEASE_S = 2.0


async def takeover(script: str, data_dir: str, redis: dict[str, Any], cores: list[str]) -> None:
    config = json.dumps({**redis, "lease_s": LEASE_S})

    def child(core: str, hold_s: str) -> Server:
        argv = (script, "--serve", data_dir, "--redis-json", config, "--cpu", core)
        return Server(*argv, env={"BENCH_HOLD_S": hold_s})

    a, b = child(cores[0], "600"), child(cores[1], "0")
    try:
        async with aiohttp.ClientSession() as session:
            urls = [f"http://127.0.0.1:{s.port}/ws" for s in (a, b)]
            on_a = await session.ws_connect(urls[0], headers={"Origin": ORIGIN})
            on_b = await session.ws_connect(urls[1], headers={"Origin": ORIGIN})
            for ws in (on_a, on_b):
                await ws.send_str(json.dumps({"type": "hello", "visitor_id": "bench-takeover"}))
                await _until(ws, "ready")
            message = {"type": "message", "text": "slow", "client_message_id": "takeover-1"}
            await on_a.send_str(json.dumps(message))
            placeholder = await _until(on_b, "message.created")
            killed = time.perf_counter()
            a.process.kill()
            a.process.wait()
            completed = await _until(on_b, "message.completed")
            elapsed = time.perf_counter() - killed
            await on_b.close()
            same = completed["message_id"] == placeholder["message_id"]
    finally:
        b.stop()
        if a.process.poll() is None:
            a.process.kill()
    print(
        f"takeover   kill -9 of the process running a turn -> its answer completed by the"
        f" other: {elapsed:.2f} s (lease_s {LEASE_S:g}; same placeholder: {same})",
        flush=True,
    )


__all__ = ["takeover"]
