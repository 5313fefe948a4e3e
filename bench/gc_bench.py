"""Garbage-collector pauses with many conversations in the store's history cache (CLI benchmark).

A full collection walks every object the cyclic collector tracks, and the history cache keeps its
messages alive: what it keeps tracked is paid in every full collection (issue 29: 118 ms after
33,000 turns). This fills a SqliteStore's cache through the store's own API with N conversations
of `--turns` turns each (a user's message and an answer with its usage, as the gateway appends
them), settles the heap as `bot serve` does (bot/runtime/heap.py), then prints for each N:

- a full `gc.collect()` timed by a `gc.callbacks` probe, and the tracked objects
  (`len(gc.get_objects())`, the frozen start-up heap not counted) and RSS per conversation;
- `--load` more turns on random conversations (load, append, as a turn does), recording
  every collection's pause: how many, the longest, and the longest full one; and the loop's
  CPU per turn (a history no longer kept as objects is read back from its bytes).

    python bench/gc_bench.py [--conversations 250,2500,10000] [--turns 50] [--load 3000]

Run from a checkout before this change (copy the script there), it measures the cache that
was: bounded by sessions, asked to hold all N (or `--old-cache-sessions 256`, its default).

The cache alone: no web sockets, no model, no gateway (bench/ws_bench.py runs those).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # runnable from a checkout

from agent.types import Message, Usage  # noqa: E402
from bot.runtime import heap  # noqa: E402
from bot.runtime.heap import settle_heap  # noqa: E402
from bot.storage import SqliteStore  # noqa: E402

ANSWER = "an answer of a usual length from the model, " * 6


class Probe:
    """Every collection's pause (wall time between its start and stop callbacks), by generation,
    and its CPU (the wall time of a loaded machine holds other processes' time slices too)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self.cpu: list[float] = []
        self._start = self._cpu = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start, self._cpu = time.perf_counter(), time.thread_time()
        else:
            self.pauses.append((info["generation"], time.perf_counter() - self._start))
            self.cpu.append(time.thread_time() - self._cpu)


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def open_store(path: Path, conversations: int, sessions: int | None) -> SqliteStore:
    """The store with a cache that holds all N: the code before this bench bounded it by
    sessions, 256 by default, and is asked for N (or `--old-cache-sessions`)."""
    knobs = inspect.signature(SqliteStore.__init__).parameters
    if "history_cache_size" in knobs:
        size = sessions or conversations
        return SqliteStore(path, history_cache_size=size)  # type: ignore[call-arg]
    return SqliteStore(path)


async def turn(store: SqliteStore, session_id: str, n: int) -> None:
    await store.load_history(session_id)
    question = Message("user", f"question number {n}, asked by a user")
    answer = Message("assistant", f"{ANSWER}{n}", usage=Usage(1200 + n, 80, "openai", "m"))
    await store.append_messages(session_id, f"turn-{n}", [question, answer])


async def one_size(
    directory: Path, conversations: int, turns: int, load: int, old_sessions: int | None
) -> None:
    path = directory / f"gc-{conversations}.db"
    async with open_store(path, conversations, old_sessions) as store:
        settle_heap()  # as `bot serve` does once started
        # but the cache's own layout is measured: as full collections would walk it unfrozen
        # (`bot serve` freezes what survives one: bot/runtime/heap.py)
        if getattr(heap, "freeze_survivors", None) in gc.callbacks:
            gc.callbacks.remove(heap.freeze_survivors)
        base_objects, base_rss = len(gc.get_objects()), rss_kib()
        sessions = []
        for c in range(conversations):
            session_id = await store.active_session(
                channel="websocket", conversation_key=f"conv-{c}", user_id=f"user-{c}"
            )
            sessions.append(session_id)
            for n in range(turns):
                await turn(store, session_id, n)
        gc.collect()  # what the fill left is live: the cache
        tracked = len(gc.get_objects()) - base_objects
        per_conv = (rss_kib() - base_rss) / conversations
        probe = Probe()
        gc.callbacks.append(probe)
        try:
            for _ in range(5):
                gc.collect()
            full = sorted(pause for _, pause in probe.pauses)
            full_cpu = sorted(probe.cpu)
            probe.pauses.clear()
            probe.cpu.clear()
            rng = random.Random(conversations)
            cpu = time.thread_time()
            for n in range(load):
                await turn(store, rng.choice(sessions), turns + n)
            cpu = (time.thread_time() - cpu) / load
        finally:
            gc.callbacks.remove(probe)
        fulls = [pause for generation, pause in probe.pauses if generation == 2]
        longest = max((pause for _, pause in probe.pauses), default=0.0)
        print(
            f"{conversations:>6} conversations x {turns} turns: gc.collect() x5 {full[0] * 1e3:.1f}-{full[-1] * 1e3:.1f} ms"
            f" (CPU {full_cpu[0] * 1e3:.1f}-{full_cpu[-1] * 1e3:.1f}),"
            f" tracked objects {tracked:,} ({tracked / conversations:.1f}/conversation),"
            f" RSS {per_conv:.1f} KiB/conversation; {load} turns: {len(probe.pauses)}"
            f" collections, longest {longest * 1e3:.1f} ms (CPU {max(probe.cpu, default=0.0) * 1e3:.1f}),"
            f" {len(fulls)} full"
            f" (longest {max(fulls, default=0.0) * 1e3:.1f} ms); store CPU {cpu * 1e6:.0f} us/turn"
        )
    path.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--conversations", default="250,2500,10000", help="N, comma-separated")
    parser.add_argument("--turns", type=int, default=50, help="turns per conversation")
    parser.add_argument("--load", type=int, default=3000, help="turns measured after the fill")
    parser.add_argument("--dir", type=Path, help="where the database files go (default: temporary)")
    parser.add_argument(
        "--old-cache-sessions", type=int, help="the code before: its cache's sessions (default: N)"
    )
    args = parser.parse_args()
    sizes = args.conversations.split(",")
    if len(sizes) > 1:  # each size in a process of its own: RSS and the heap start alike
        for size in sizes:
            argv = [sys.executable, __file__, "--conversations", size, "--turns", str(args.turns)]
            argv += ["--load", str(args.load)] + (["--dir", str(args.dir)] if args.dir else [])
            if args.old_cache_sessions:
                argv += ["--old-cache-sessions", str(args.old_cache_sessions)]
            subprocess.run(argv, check=True)
        return
    with tempfile.TemporaryDirectory() as tmp:
        directory, size = args.dir or Path(tmp), int(sizes[0])
        asyncio.run(one_size(directory, size, args.turns, args.load, args.old_cache_sessions))


if __name__ == "__main__":
    main()
