"""Takeover time after a kill, for bench/scaleout_bench.py: two gateway processes on one Redis.

A tab on each process, both in one conversation. The message is sent on A, whose model holds
the turn open (`BENCH_HOLD_S`); once B's tab sees A's placeholder, A is killed with SIGKILL, and
the clock runs until B's tab sees the answer completed, by B, in that same placeholder. B was
running already, so that time is bound by `redis.lease_s` (the lease lapses, then B's next
look for idle entries claims it), not by a start.

Beside it, the start of the surviving process (spawn to listening), and a takeover with no other
process running: A alone is killed the same way and a new process started at once (as an
orchestrator restarts one); the clock runs until the conversation has no work left in Redis.
That one is bound by the later of the start and the lease.
"""

from __future__ import annotations

import asyncio
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

    a = child(cores[0], "600")
    began = time.perf_counter()
    b = child(cores[1], "0")
    start_s = time.perf_counter() - began
    try:
        async with aiohttp.ClientSession() as session:
            urls = [f"http://127.0.0.1:{s.port}/ws" for s in (a, b)]
            on_a = await _tab(session, urls[0], "bench-takeover")
            on_b = await _tab(session, urls[1], "bench-takeover")
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
        f" other, running already: {elapsed:.2f} s (bound by redis.lease_s {LEASE_S:g};"
        f" same placeholder: {same})",
        flush=True,
    )
    restarted, started_s = await _restart(child, cores, redis)
    print(
        f"takeover   start of the surviving process (spawn -> listening): {start_s:.2f} s;"
        f" with no other process, one started after the kill finished the turn"
        f" {restarted:.2f} s after it (its start {started_s:.2f} s, the lease {LEASE_S:g} s)",
        flush=True,
    )


async def _tab(session: aiohttp.ClientSession, url: str, visitor: str) -> Any:
    ws = await session.ws_connect(url, headers={"Origin": ORIGIN})
    await ws.send_str(json.dumps({"type": "hello", "visitor_id": visitor}))
    await _until(ws, "ready")
    return ws


async def _restart(child: Any, cores: list[str], redis: dict[str, Any]) -> tuple[float, float]:
    """Kill the only process mid-turn, start another at once: seconds until the conversation
    has no work left (`<prefix>q:busy` empty), and the new process's start."""
    from bot.redis.client import connect

    client = connect(redis["url"])
    busy = f"{redis['prefix']}q:busy"
    a = child(cores[0], "600")
    c: Server | None = None
    try:
        async with aiohttp.ClientSession() as session:
            on_a = await _tab(session, f"http://127.0.0.1:{a.port}/ws", "bench-restart")
            message = {"type": "message", "text": "slow", "client_message_id": "restart-1"}
            await on_a.send_str(json.dumps(message))
            await _until(on_a, "message.created")
            killed = time.perf_counter()
            a.process.kill()
            a.process.wait()
            c = child(cores[1], "0")
            started_s = time.perf_counter() - killed
            async with asyncio.timeout(60):
                while await client.zcard(busy):  # noqa: ASYNC110  # state in another process
                    await asyncio.sleep(0.01)
            return time.perf_counter() - killed, started_s
    finally:
        await client.aclose()
        if c is not None:
            c.stop()
        if a.process.poll() is None:
            a.process.kill()


__all__ = ["takeover"]
