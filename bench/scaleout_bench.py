"""Benchmark: one gateway process vs two over Redis, under bench/ws_bench.py's web socket load.

Three runs of the same closed-loop load (N conversations, T turns each, the in-process scripted
model at 0 ms): `embedded` (one process, no Redis), `redis x1` (one process, `redis.url` set) and
`redis x2` (two processes on one SQLite file and one Redis, half the sockets on each). Each
gateway child is pinned with `sched_setaffinity` (as taskset does) to its own core; the load runs
in this process on whatever cores are left (on a 2-core machine it shares them: say so when
reading the x2 figure). Printed per run: turns/s, CPU per turn of the gateway children (all of
them) and of the Redis server (`INFO cpu`, user + sys: the whole server's, so another user of
that Redis inflates it), time to placeholder p50/p99 (message sent → `message.created`), and
turn latency p50/p99.

Then a scaling bound: the turns/s one process, and two processes on a core each, could reach if
CPU were all that limits them (each gateway 1 / its CPU per turn, Redis's one thread 1 / its CPU
per turn for all). It is computed, not measured: on 2 cores the load generator, Redis and two
gateways share the cores, so the measured x2 throughput cannot show what two machines would.

`--cores N` measures it instead, where the machine has the cores: 1 … N gateway processes on a
core each, Redis, the fake model and the load on others (bench/scaleout_cores.py). On a machine
with fewer than N + 2 cores it says so and prints the computed bound.

Last, the takeover time (bench/takeover.py): the process running a turn is killed with SIGKILL,
and the clock runs until the other process has finished that turn in the same placeholder (bound
by `redis.lease_s`); beside it, the start of the surviving process, and a takeover by a process
started only after the kill.

The gateways log at their default level (`log.level` INFO, as `bot serve`), to a file each;
`BENCH_LOG=WARNING` sets another.

    python bench/scaleout_bench.py [--conversations 40] [--turns 30] [--redis redis://127.0.0.1:6379/0]
    python bench/scaleout_bench.py --cores 2      # measured where the machine has 4+ cores
    python bench/scaleout_bench.py --instructions --conversations 4 --turns 50   # callgrind
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scaleout_cores import layout, measured
from bench.takeover import takeover
from bench.ws_load import Server, gateway_conversation, loop_factory, pct, pin_self


def child_config(data_dir: str, redis: dict[str, Any] | None, llm: dict[str, Any] | None) -> Path:
    config: dict[str, Any] = {
        "server": {"port": 0},
        "storage": {"path": str(Path(data_dir) / "bench.db")},
        "personas": {"dirs": [str(ROOT / "personas")]},
        "channels": {
            "websocket": {
                "rate_limit_per_minute": 1_000_000,
                "max_connections_per_address": 100_000,
            }
        },
    }
    if "BENCH_LOG" in os.environ:
        config["log"] = {"level": os.environ["BENCH_LOG"]}
    if llm is not None:
        config["llm"] = llm
    if redis is not None:  # the URL from the environment, as an operator writes it
        os.environ["BENCH_REDIS_URL"] = redis["url"]
        config["redis"] = {**redis, "url": "${BENCH_REDIS_URL}"}
    path = Path(data_dir) / f"config-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(json.dumps(config))
    return path


async def serve(data_dir: str, redis_json: str, llm_json: str) -> None:
    """A gateway child: the real app, the scripted model echoing the message (`llm_json`: that
    `llm` section instead, bench/fake_llm_server.py through its SDK)."""
    import threading

    from agent.providers.scripted import Reply, ScriptedProvider
    from bench.ws_load import _answer_cpu_probes, _Discard
    from bot.runtime.app import App
    from bot.runtime.config import load_config
    from bot.runtime.logs import setup_logging

    redis = json.loads(redis_json) if redis_json else None
    llm = json.loads(llm_json) if llm_json else None
    path = child_config(data_dir, redis, llm)  # sets BENCH_REDIS_URL
    config = load_config(path, env={**os.environ, "BENCH_LLM_KEY": "bench-key"})
    log_file = Path(data_dir) / f"gateway-{os.getpid()}.log"
    setup_logging(config.log.level, config.log.format, file=log_file)  # as `bot serve` does
    hold_s = float(os.environ.get("BENCH_HOLD_S", "0"))  # bench/takeover.py: "slow" is held

    def answer(request: Any) -> Reply:
        text = str(request.messages[-1].content)
        return Reply("ok: " + text[:40], delay_s=hold_s if text == "slow" else 0.0)

    scripted = ScriptedProvider(answer)
    scripted.requests = _Discard()
    probes = _answer_cpu_probes
    if os.environ.get("BENCH_CALLGRIND"):  # --instructions: the probes switch the count
        from bench.scaleout_instructions import counted_probes as probes
    threading.Thread(target=probes, daemon=True).start()
    provider = scripted if llm is None else None
    async with App(config, base_dir=Path(data_dir), provider=provider) as app:
        print(f"PORT {app.port}", flush=True)
        await app.wait()


async def run(
    label: str,
    data_dir: str,
    cores: list[str],
    redis: dict[str, Any] | None,
    args: Any,
    llm: str = "",
) -> dict[str, float]:
    redis_json = json.dumps(redis) if redis is not None else ""
    children = [
        Server(
            __file__, "--serve", data_dir, "--redis-json", redis_json, "--llm", llm, "--cpu", core
        )
        for core in cores
    ]
    placeholder: list[float] = []
    total: list[float] = []
    try:
        async with aiohttp.ClientSession() as session:
            urls = [f"http://127.0.0.1:{c.port}/ws" for c in children]
            cpu = [c.cpu() for c in children]
            redis_cpu = await redis_server_cpu(redis["url"]) if redis is not None else 0.0
            began = time.perf_counter()
            await asyncio.gather(
                *(
                    gateway_conversation(
                        session, urls[n % len(urls)], n, args.turns, placeholder, total
                    )
                    for n in range(args.conversations)
                )
            )
            elapsed = time.perf_counter() - began
            used = sum(c.cpu() - before for c, before in zip(children, cpu, strict=True))
            if redis is not None:
                redis_cpu = await redis_server_cpu(redis["url"]) - redis_cpu
    finally:
        for child in children:
            child.stop()
    turns = args.conversations * args.turns
    figures = {
        "turns/s": turns / elapsed,
        "cpu_ms/turn": used / turns * 1000,
        "redis_cpu_ms/turn": redis_cpu / turns * 1000,
        "placeholder_p50_ms": pct(placeholder, 0.50),
        "placeholder_p99_ms": pct(placeholder, 0.99),
        "turn_p50_ms": pct(total, 0.50),
        "turn_p99_ms": pct(total, 0.99),
    }
    redis_part = f" + Redis {figures['redis_cpu_ms/turn']:4.2f}" if redis is not None else " " * 13
    print(
        f"{label:<10} {figures['turns/s']:6.0f} turns/s  CPU/turn: gateway"
        f" {figures['cpu_ms/turn']:4.2f}{redis_part} ms"
        f"  placeholder p50 {figures['placeholder_p50_ms']:6.1f} p99 {figures['placeholder_p99_ms']:6.1f} ms"
        f"  turn p50 {figures['turn_p50_ms']:6.1f} p99 {figures['turn_p99_ms']:6.1f} ms",
        flush=True,
    )
    return figures


async def redis_server_cpu(url: str) -> float:
    """CPU seconds the Redis server has used (user + system, all its threads). The whole
    server's: anything else using this Redis meanwhile is counted too."""
    from bot.redis.client import connect

    client = connect(url)
    try:
        info = await client.info("cpu")
    finally:
        await client.aclose()
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def report(results: dict[str, dict[str, float]]) -> None:
    """The ratios, and what two processes could do on a core each, from CPU per turn.

    On a machine with fewer cores than gateways + Redis + the load, the measured x2 throughput
    says little (they share cores), so the bound is computed: each gateway can do at most
    1 / (its CPU per turn) turns a second on its own core, and the one Redis thread at most
    1 / (its CPU per turn) for all of them.
    """
    x1, x2, embedded = results["redis x1"], results["redis x2"], results["embedded"]

    def bound(figures: dict[str, float], processes: int) -> float:
        gateways = processes * 1000 / figures["cpu_ms/turn"]
        redis = 1000 / figures["redis_cpu_ms/turn"] if figures["redis_cpu_ms/turn"] else gateways
        return min(gateways, redis)

    one, two = bound(x1, 1), bound(x2, 2)
    print(
        f"redis x1 vs embedded, gateway CPU/turn: {x1['cpu_ms/turn'] / embedded['cpu_ms/turn']:.2f}x"
        f";  measured two processes vs one: {x2['turns/s'] / x1['turns/s']:.2f}x"
        " (they share the cores with the load and Redis here)"
    )
    print(
        f"scaling bound, computed from CPU per turn (not measured: too few cores): one process"
        f" {one:.0f} turns/s, two processes on a core each {two:.0f} turns/s = {two / one:.2f}x"
        f" (Redis, one thread, caps them at {1000 / max(x2['redis_cpu_ms/turn'], 1e-9):.0f})"
    )


async def main(args: Any) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if args.instructions:
        from bench.scaleout_instructions import instructions

        await instructions(__file__, args, str(allowed[-1]))
        return
    if args.cores:
        planned = layout(allowed, args.cores)
        if planned is not None:
            await measured(args, run, *planned)
            return
        print(
            f"--cores {args.cores}: this machine has {len(allowed)} cores, and {args.cores}"
            f" gateways need {args.cores + 2} (one each, Redis, the load and the model);"
            " the scaling below is computed from CPU per turn"
        )
    if len(allowed) < 2:
        raise SystemExit("needs 2 cores: one per gateway process")
    a, b = str(allowed[-1]), str(allowed[-2])
    # a prefix per run: the load reuses visitor ids and client_message_ids, which the Redis
    # dedup of an earlier run would (rightly) drop as already answered
    prefixes = [f"bench:{uuid.uuid4().hex[:8]}:" for _ in range(3)]
    x1, x2, killed = ({"url": args.redis, "prefix": prefix} for prefix in prefixes)
    print(f"{args.conversations} conversations x {args.turns} turns; gateways on cores {a} / {b}")
    results = {}
    runs = (("embedded", [a], None), ("redis x1", [a], x1), ("redis x2", [a, b], x2))
    for label, cores, shared in runs:
        if args.only and label != args.only:
            continue
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as data_dir:
            results[label] = await run(label, data_dir, cores, shared, args)
    if not args.only:
        report(results)
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as data_dir:
            await takeover(__file__, data_dir, killed, [a, b])
    from bot.redis.client import connect

    client = connect(args.redis)
    for prefix in prefixes:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
    await client.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--conversations", type=int, default=40)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--only", choices=["embedded", "redis x1", "redis x2"])
    parser.add_argument(
        "--cores", type=int, default=0, help="measure 1..N processes, a core each (N + 2 cores)"
    )
    parser.add_argument("--serve", metavar="DATA_DIR", help=argparse.SUPPRESS)
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="callgrind's instructions per turn, embedded and redis x1 (use --conversations 4)",
    )
    parser.add_argument("--redis-json", default="", help=argparse.SUPPRESS)
    parser.add_argument("--llm", default="", help=argparse.SUPPRESS)
    parser.add_argument("--cpu", default="", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve:
        pin_self(options.cpu)
        with asyncio.Runner(loop_factory=loop_factory()) as runner:  # as `bot serve`'s
            runner.run(serve(options.serve, options.redis_json, options.llm))
    else:
        asyncio.run(main(options))
