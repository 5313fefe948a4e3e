"""`--cores N` of bench/scaleout_bench.py: 1, 2 … N gateway processes, each pinned to a core of
its own, while Redis (a `redis-server` this bench starts, on a core of its own), the fake model
(bench/fake_llm_server.py, through the real `openai` SDK) and the load generator run on the cores
left. The load grows with the processes (`--conversations` per process), and the throughput of
each count is measured, so the scaling printed is what the processes did, not a bound.

That needs N + 2 cores at least (N gateways, Redis, the load and the model). A machine with fewer
gets the computed bound instead (bench/scaleout_bench.py's `report`), labelled so.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.ws_load import Server

RunOne = Callable[
    [str, str, list[str], dict[str, Any] | None, Any, str], Awaitable[dict[str, float]]
]


def layout(allowed: list[int], gateways: int) -> tuple[list[str], str, str] | None:
    """Cores for the gateways, for Redis, and for the load and the model; None: too few."""
    if len(allowed) < gateways + 2:
        return None
    cores = [str(core) for core in allowed]
    return cores[:gateways], cores[gateways], ",".join(cores[gateways + 1 :])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_redis(core: str) -> tuple[subprocess.Popen[bytes], str]:
    """A redis-server of this bench's own, on `core`, keeping nothing on disk."""
    port = _free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        + ["--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        preexec_fn=lambda: os.sched_setaffinity(0, {int(core)}),
    )
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, url
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("redis-server did not start")


async def measured(
    args: Any, run: RunOne, gateway_cores: list[str], redis_core: str, rest: str
) -> None:
    """Each count of processes under a load that grows with it; the scaling, measured."""
    os.sched_setaffinity(0, {int(core) for core in rest.split(",")})  # the load
    redis, url = start_redis(redis_core)
    fake = Server(str(Path(__file__).parent / "fake_llm_server.py"), "--cpus", rest)
    llm = {
        "provider": "openai",
        "base_url": f"http://127.0.0.1:{fake.port}/v1",
        "api_key": "${BENCH_LLM_KEY}",
        "model": "bench-model",
    }
    per_process = args.conversations
    print(
        f"measured: gateways on cores {','.join(gateway_cores)}, Redis on {redis_core},"
        f" the load and the fake model (openai SDK) on {rest};"
        f" {per_process} conversations x {args.turns} turns per process"
    )
    results: dict[int, dict[str, float]] = {}
    try:
        for n in range(1, len(gateway_cores) + 1):
            args.conversations = per_process * n
            shared = {"url": url, "prefix": f"bench:{uuid.uuid4().hex[:8]}:"}
            with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as data_dir:
                results[n] = await run(
                    f"redis x{n}", data_dir, gateway_cores[:n], shared, args, json.dumps(llm)
                )
    finally:
        args.conversations = per_process
        fake.stop()
        redis.terminate()
        redis.wait(10)
    one = results[1]["turns/s"]
    for n, figures in results.items():
        print(
            f"measured scaling: {n} process(es) {figures['turns/s']:6.0f} turns/s ="
            f" {figures['turns/s'] / one:.2f}x one process ({figures['turns/s'] / one / n:.0%}"
            " of linear)"
        )
