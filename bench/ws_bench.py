"""Benchmark: N concurrent web socket conversations against the real gateway, model at 0 ms.

The gateway runs in a child process pinned to its own core; this process (the load) and the fake
LLM server share the other core(s).

`--provider scripted` (the default) uses the in-process scripted model and prints turns/s,
time-to-placeholder and turn latency (p50/p99), the gateway's CPU per turn, and, measured in the
same run as the ceiling, a raw aiohttp web socket echo server's rate and latency, and the
server memory per idle connection. The paced run goes at half the flat-out rate unless `--rate`
says otherwise, and prints how long the gateway waited for its core (other processes on it):
on a shared machine that, not the gateway, is most of a latency tail.

`--provider openai|anthropic|all` runs the same load through the real `openai` / `anthropic` SDK
against bench/fake_llm_server.py (its own process, 0 ms, streamed answer) and prints, beside the
scripted model answering the same text: CPU per turn at the first and last 100 turns of one long
conversation, turns/s of N conversations flat out, and latency paced at half that rate.
`--profile DIR` records the gateway with py-spy during each vendor's long conversation and
paced run and prints the event loop's frames with the largest inclusive and self shares.

The gateway logs as `bot serve` does, at its default level (INFO: a line per turn) into a file in
its data folder: a default deployment pays for its log. `BENCH_LOG=WARNING` (or DEBUG) sets
another level.

    python bench/ws_bench.py [--conversations 50] [--turns 40] [--rate TURNS_PER_S]
    python bench/ws_bench.py --provider all [--long-turns 1000] [--profile /tmp/prof]
    python bench/ws_bench.py --memory-only [--help-visitors 3000]   # the /help memory line only
    python bench/ws_bench.py --metrics-overhead 5   # CPU per turn with BOT_METRICS on vs off
    python bench/ws_bench.py --instructions [--provider openai] [--conversations 1 --turns 100]

`--instructions` counts instead, with callgrind, the gateway's instructions per turn (the load
does not change them: bench/ws_instructions.py), for the scripted model and the vendor(s).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ws_instructions import run_instructions
from bench.ws_load import (
    LOOP_ENV,
    Cores,
    echo_conversation,
    gateway_conversation,
    help_visitor_cost,
    idle_cost,
    pct,
    pin_cores,
    rss_bytes,
    run_queue_wait,
    start_echo,
    start_gateway,
)
from bench.ws_metrics import run_metrics_overhead
from bench.ws_providers import run_providers


async def memory_only(visitors: int, cores: Cores) -> None:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as data_dir:
        gateway = start_gateway(data_dir, cores.server)
        port = gateway.port
        try:
            async with aiohttp.ClientSession() as session:
                before = rss_bytes(gateway.pid)
                cost = await help_visitor_cost(
                    session, f"http://127.0.0.1:{port}/ws", gateway.pid, visitors
                )
                after = rss_bytes(gateway.pid)
        finally:
            gateway.stop()
    print(
        f"memory per idle visitor after /help, {visitors} visitors gone: {cost / 1024:.1f} KiB "
        f"each (server RSS {before / 2**20:.0f} -> {after / 2**20:.0f} MiB)"
    )


async def run_scripted(
    conversations: int,
    turns: int,
    solo_turns: int,
    idle_count: int,
    rate: float | None,
    help_visitors: int,
    cores: Cores,
) -> None:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as data_dir:
        gateway = start_gateway(data_dir, cores.server)
        echo = start_echo(cores.server)
        gateway_port, echo_port = gateway.port, echo.port
        try:
            async with aiohttp.ClientSession() as session:
                # warm up: imports, the persona, the SQLite file
                await gateway_conversation(
                    session, f"http://127.0.0.1:{gateway_port}/ws", 9999, 3, [], []
                )
                solo_placeholder: list[float] = []
                solo: list[float] = []
                await gateway_conversation(
                    session,
                    f"http://127.0.0.1:{gateway_port}/ws",
                    5000,
                    solo_turns,
                    solo_placeholder,
                    solo,
                )
                placeholder: list[float] = []
                total: list[float] = []
                cpu_before = gateway.cpu()
                started = time.perf_counter()
                await asyncio.gather(
                    *(
                        gateway_conversation(
                            session,
                            f"http://127.0.0.1:{gateway_port}/ws",
                            i,
                            turns,
                            placeholder,
                            total,
                        )
                        for i in range(conversations)
                    )
                )
                wall = time.perf_counter() - started
                cpu = gateway.cpu() - cpu_before
                rate = rate or len(total) / wall / 2  # half of saturation
                paced_placeholder: list[float] = []
                paced: list[float] = []
                waited = run_queue_wait(gateway.pid)
                await asyncio.gather(
                    *(
                        gateway_conversation(
                            session,
                            f"http://127.0.0.1:{gateway_port}/ws",
                            1000 + i,
                            turns,
                            paced_placeholder,
                            paced,
                            period_s=conversations / rate,
                        )
                        for i in range(conversations)
                    )
                )
                waited = run_queue_wait(gateway.pid) - waited
                echo_total: list[float] = []
                echo_started = time.perf_counter()
                await asyncio.gather(
                    *(
                        echo_conversation(
                            session, f"http://127.0.0.1:{echo_port}/ws", turns * 3, echo_total
                        )
                        for _ in range(conversations)
                    )
                )
                echo_wall = time.perf_counter() - echo_started
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as unlimited:
                idle = await idle_cost(
                    unlimited, f"http://127.0.0.1:{gateway_port}/ws", gateway.pid, idle_count
                )
                help_cost = await help_visitor_cost(
                    unlimited, f"http://127.0.0.1:{gateway_port}/ws", gateway.pid, help_visitors
                )
        finally:
            gateway.stop()
            echo.stop()
    first, last = solo[:100], solo[-100:]
    print(
        f"gateway: one conversation of {solo_turns} turns, scripted model at 0 ms (unloaded latency)"
    )
    print(
        f"  time to placeholder  p50  {pct(solo_placeholder, 0.5):8.2f} ms   p99 {pct(solo_placeholder, 0.99):8.2f} ms"
    )
    print(f"  turns 1-100          p50  {pct(first, 0.5):8.2f} ms   p99 {pct(first, 0.99):8.2f} ms")
    print(f"  last 100 turns       p50  {pct(last, 0.5):8.2f} ms   p99 {pct(last, 0.99):8.2f} ms")
    count = len(total)
    print(f"gateway: {conversations} conversations x {turns} turns, scripted model at 0 ms")
    print(f"  turns/s                   {count / wall:8.0f}")
    print(
        f"  time to placeholder  p50  {pct(placeholder, 0.5):8.2f} ms   p99 {pct(placeholder, 0.99):8.2f} ms"
    )
    print(f"  turn latency         p50  {pct(total, 0.5):8.2f} ms   p99 {pct(total, 0.99):8.2f} ms")
    print(f"  gateway CPU per turn      {cpu / count * 1000:8.2f} ms")
    print(f"gateway: the same {conversations} conversations paced at {rate:.0f} turns/s in all")
    print(
        f"  time to placeholder  p50  {pct(paced_placeholder, 0.5):8.2f} ms   p99 {pct(paced_placeholder, 0.99):8.2f} ms"
    )
    print(f"  turn latency         p50  {pct(paced, 0.5):8.2f} ms   p99 {pct(paced, 0.99):8.2f} ms")
    print(f"  waiting for its core      {waited / len(paced) * 1000:8.2f} ms per turn (run queue)")
    echo_count = len(echo_total)
    print(f"raw aiohttp echo (ceiling), same clients, {echo_count} round trips")
    print(f"  round trips/s             {echo_count / echo_wall:8.0f}")
    print(
        f"  latency              p50  {pct(echo_total, 0.5):8.2f} ms   p99 {pct(echo_total, 0.99):8.2f} ms"
    )
    print(
        f"idle connection (after hello), {idle_count} sockets: {idle / 1024:.1f} KiB each (server RSS)"
    )
    print(
        f"memory per idle visitor after /help, {help_visitors} visitors gone: "
        f"{help_cost / 1024:.1f} KiB each (server RSS)"
    )
    overhead_50 = pct(total, 0.5) - pct(echo_total, 0.5)
    overhead_99 = pct(total, 0.99) - pct(echo_total, 0.99)
    print(f"gateway overhead over echo  p50  {overhead_50:8.2f} ms   p99 {overhead_99:8.2f} ms")
    print(
        f"  (a turn is ~3 frames out, 1 in; the echo is 1 out, 1 in)  mean {statistics.mean(total) * 1000:.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--provider",
        choices=["scripted", "openai", "anthropic", "all"],
        default="scripted",
        help="scripted: the in-process model only; a vendor: its real SDK against a fake server",
    )
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--solo-turns", type=int, default=500)
    parser.add_argument(
        "--rate", type=float, help="turns/s for the paced run (default: half of flat out)"
    )
    parser.add_argument(
        "--long-turns", type=int, default=1000, help="turns of the long conversation (providers)"
    )
    parser.add_argument("--deltas", type=int, default=5, help="text pieces in a streamed answer")
    parser.add_argument("--profile", metavar="DIR", help="py-spy the gateway, files in DIR")
    parser.add_argument(
        "--idle", type=int, default=1000, help="idle connections for the memory figure"
    )
    parser.add_argument(
        "--help-visitors", type=int, default=3000, help="visitors for the /help memory figure"
    )
    parser.add_argument("--memory-only", action="store_true", help="only the /help memory figure")
    parser.add_argument(
        "--loop",
        choices=["auto", "asyncio", "uvloop"],
        default="auto",
        help="the gateway's event loop (auto: as `bot serve`'s server.event_loop: uvloop)",
    )
    parser.add_argument(
        "--metrics-overhead",
        type=int,
        metavar="ROUNDS",
        help="only the cost of /metrics: CPU per turn with BOT_METRICS on and off, ROUNDS each",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count the gateway's instructions per turn with callgrind (valgrind) instead",
    )
    args = parser.parse_args()
    os.environ[LOOP_ENV] = args.loop  # the gateway children read it
    cores = pin_cores()
    if args.memory_only:
        asyncio.run(memory_only(args.help_visitors, cores))
    elif args.metrics_overhead:
        asyncio.run(
            run_metrics_overhead(args.conversations, args.turns, args.metrics_overhead, cores)
        )
    elif args.instructions:
        vendors = {"scripted": [], "all": ["openai", "anthropic"]}.get(
            args.provider, [args.provider]
        )
        asyncio.run(run_instructions(vendors, args, cores))
    elif args.provider == "scripted":
        asyncio.run(
            run_scripted(
                args.conversations,
                args.turns,
                args.solo_turns,
                args.idle,
                args.rate,
                args.help_visitors,
                cores,
            )
        )
    else:
        vendors = ["openai", "anthropic"] if args.provider == "all" else [args.provider]
        asyncio.run(run_providers(vendors, args, cores))


if __name__ == "__main__":
    main()
