"""What `/metrics` costs a turn: the scripted load of bench/ws_bench.py with metrics on and off.

Each round starts a fresh gateway child with `BOT_METRICS=on`, then one with `off` (the order
alternates between rounds, so a slow spell of a shared machine hits both), runs N web socket
conversations flat out against it and reads its CPU per turn; the medians over the rounds and
their difference are printed. Run through `bench/ws_bench.py --metrics-overhead ROUNDS`.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time

import aiohttp

from bench.ws_load import Cores, gateway_conversation, pct, start_gateway


def counting_cost_us(turns: int = 50_000) -> float:
    """In this process: µs for the metric calls one scripted web socket turn makes (its
    placeholder, its one model call, its end), without the gateway around them."""
    from agent.providers.metered import ModelCall
    from bot.ops.metrics import Metrics

    metrics = Metrics()
    call = ModelCall("scripted", "scripted", "ok", 0.001, 0.0005, 10, 5)
    started = time.process_time()  # CPU, not wall: the machine may be shared
    for _ in range(turns):
        metrics.placeholder_shown("websocket", 0.002)
        metrics.model_call(call)
        metrics.turn_finished("websocket", "completed", 0.004)
    return (time.process_time() - started) / turns * 1e6


async def _one_run(
    metrics: str, conversations: int, turns: int, cores: Cores
) -> tuple[float, float]:
    """(gateway CPU ms per turn, turn latency p50 ms) of one flat-out run."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as data_dir:
        gateway = start_gateway(data_dir, cores.server, env={"BOT_METRICS": metrics})
        url = f"http://127.0.0.1:{gateway.port}/ws"
        try:
            async with aiohttp.ClientSession() as session:
                await gateway_conversation(session, url, 9999, 20, [], [])  # warm up
                placeholder: list[float] = []
                total: list[float] = []
                cpu_before = gateway.cpu()
                await _all(session, url, conversations, turns, placeholder, total)
                cpu = gateway.cpu() - cpu_before
        finally:
            gateway.stop()
    return cpu / len(total) * 1000, pct(total, 0.5)


async def _all(
    session: aiohttp.ClientSession,
    url: str,
    conversations: int,
    turns: int,
    placeholder: list[float],
    total: list[float],
) -> None:
    await asyncio.gather(
        *(
            gateway_conversation(session, url, i, turns, placeholder, total)
            for i in range(conversations)
        )
    )


async def run_metrics_overhead(conversations: int, turns: int, rounds: int, cores: Cores) -> None:
    cpu: dict[str, list[float]] = {"on": [], "off": []}
    latency: dict[str, list[float]] = {"on": [], "off": []}
    started = time.perf_counter()
    for round_no in range(rounds):
        for metrics in ("on", "off") if round_no % 2 == 0 else ("off", "on"):
            cpu_ms, p50 = await _one_run(metrics, conversations, turns, cores)
            cpu[metrics].append(cpu_ms)
            latency[metrics].append(p50)
            print(
                f"  round {round_no + 1} metrics {metrics:3}: {cpu_ms:6.3f} ms CPU/turn, p50 {p50:6.2f} ms"
            )
    on, off = statistics.median(cpu["on"]), statistics.median(cpu["off"])
    print(
        f"metrics overhead, scripted model, {conversations} conversations x {turns} turns, "
        f"{rounds} rounds each ({time.perf_counter() - started:.0f} s)"
    )
    print(f"  gateway CPU per turn, metrics on   {on:7.3f} ms (median)")
    print(f"  gateway CPU per turn, metrics off  {off:7.3f} ms (median)")
    print(
        f"  metrics cost per turn              {(on - off) * 1000:7.1f} µs ({(on - off) / off:+.1%})"
    )
    paired = statistics.median(a - b for a, b in zip(cpu["on"], cpu["off"], strict=True))
    spread = max(cpu["on"] + cpu["off"]) - min(cpu["on"] + cpu["off"])
    print(
        f"  on - off within a round (median)   {paired * 1000:7.1f} µs; the runs spread over "
        f"{spread * 1000:.0f} µs"
    )
    lat_on, lat_off = statistics.median(latency["on"]), statistics.median(latency["off"])
    print(f"  turn latency p50, on / off         {lat_on:7.2f} / {lat_off:.2f} ms")
    print(f"  the counting alone, in-process     {counting_cost_us():7.1f} µs CPU per turn")
