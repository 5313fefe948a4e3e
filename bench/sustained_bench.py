"""Benchmark: a gateway flat out for as long as it takes N conversations to talk T turns each.

What the short runs of bench/ws_bench.py cannot show: what grows while a busy gateway keeps
going. The gateway child (pinned to its own core, the default log level into a file) serves N
web socket conversations that each send T turns one after another, all at once; every
`--every` seconds this prints the turns done, the gateway's CPU per turn over that window and
the size of its SQLite WAL file. Per turn the CPU should stay flat and the WAL bounded.

What it found (issue 29):
- the WAL grew by every page a turn wrote (~100 KB a turn, 1 GB after 10,000 turns), since a
  PASSIVE checkpoint never caught up with writes that never paused (bot/storage/connection.py);
- with 50 conversations of ~200 turns talking at once, their histories (20,000 messages) were
  more than the history cache kept as objects (8,000), so each turn read its conversation's
  history back from bytes, up to three times: CPU per turn rose from 1.4 to 5.9 ms
  (bot/storage/history_cache.py);
- with 50 conversations of 1,000 turns (100,000 messages) past the 32,000 it then kept, least
  recently used out first: conversations taking turns each came back just after theirs was
  pushed out, so every turn read its history back (and `marshal.load` read the bytes a few at a
  time): 0.6 ms a turn became 8-10 ms. Now 128,000 are kept, and past that the hot ones stay
  hot (`HistoryCache._admits`).

    python bench/sustained_bench.py [--conversations 50] [--turns 200] [--every 3]
                                    [--provider scripted|openai|anthropic]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.ws_load import Server, gateway_conversation, pin_cores, start_gateway
from bench.ws_providers import vendor_llm


async def watch(gateway: Server, wal: Path, done: list[float], every_s: float) -> None:
    """A line every `every_s`: turns so far, CPU per turn in the window, the WAL's size."""
    turns, cpu, started = 0, gateway.cpu(), time.perf_counter()
    print(f"{'s':>6} {'turns':>7} {'CPU/turn':>9} {'WAL':>9}")
    while True:
        await asyncio.sleep(every_s)
        now_turns, now_cpu = len(done), gateway.cpu()
        per_turn = (now_cpu - cpu) / max(1, now_turns - turns) * 1000
        size = wal.stat().st_size / 1e6 if wal.exists() else 0.0
        elapsed = time.perf_counter() - started
        print(f"{elapsed:6.0f} {now_turns:7d} {per_turn:6.2f} ms {size:6.1f} MB", flush=True)
        turns, cpu = now_turns, now_cpu


async def run(args: argparse.Namespace) -> None:
    cores = pin_cores()
    fake = None
    llm = ""
    if args.provider != "scripted":
        script = str(Path(__file__).parent / "fake_llm_server.py")
        fake = Server(script, "--deltas", str(args.deltas), "--cpus", cores.others)
        llm = vendor_llm(args.provider, f"http://127.0.0.1:{fake.port}")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as data_dir:
        gateway = start_gateway(data_dir, cores.server, llm, args.deltas)
        url = f"http://127.0.0.1:{gateway.port}/ws"
        done: list[float] = []
        try:
            async with aiohttp.ClientSession() as session:
                watcher = asyncio.create_task(
                    watch(gateway, Path(data_dir) / "bench.db-wal", done, args.every)
                )
                cpu, started = gateway.cpu(), time.perf_counter()
                await asyncio.gather(
                    *(
                        gateway_conversation(session, url, i, args.turns, [], done)
                        for i in range(args.conversations)
                    )
                )
                wall = time.perf_counter() - started
                watcher.cancel()
                per_turn = (gateway.cpu() - cpu) / len(done) * 1000
                print(
                    f"{len(done)} turns in {wall:.1f} s ({len(done) / wall:.0f}/s), "
                    f"{per_turn:.2f} ms of gateway CPU a turn ({args.provider})"
                )
        finally:
            gateway.stop()
            if fake is not None:
                fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--turns", type=int, default=200, help="turns of each conversation")
    parser.add_argument("--every", type=float, default=3.0, help="seconds between lines")
    parser.add_argument(
        "--provider", choices=["scripted", "openai", "anthropic"], default="scripted"
    )
    parser.add_argument("--deltas", type=int, default=5, help="pieces of each streamed answer")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
