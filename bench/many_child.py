"""The gateway child of bench/many_bench.py, and the database fill it starts on.

The child is the real app as `bot serve` runs it (the heap settled after start, the log set up
at the config's default level, INFO, written to `gateway.log` in the data folder), its model the
real `openai` SDK against bench/fake_llm_server.py. A `gc.callbacks` probe records every
collection inside it. It answers one line at a time on its stdin:

- an empty line: `CPU <process seconds>` (as bench/ws_load.py's gateway child does);
- `gc`: `GC <collections> <full> <longest pause ms> <its CPU ms> <longest full ms>
  <CPU of all pauses ms> <tracked objects> <objects freed>`, the figures since the last `gc`, then clears them;
- `types`: `TYPES <tracked objects> <type> <count>, ...`, the 15 types it tracks most of;
- `sweep`: `SWEEP <objects freed> <pause ms> <garbage> <fork ms> <copy ms> <copy MiB>`: `bot
  serve`'s look at the frozen heap, now: a forked copy's count of its garbage (the fork's pause
  of the loop, the copy's time to answer, the memory it took), then the sweep, run whatever the
  count (its pause);
- `garbage`: `GARBAGE <objects> <type> <count>, ...`: what a full collection frees now (kept
  with `gc.DEBUG_SAVEALL` to be counted, then let go of).

BENCH_LOOKS_EVERY_S=N: the heap's look (a forked copy's count, as `bot serve` makes it once a
day) every N seconds, whatever runs, each logged to `gateway.log` (`look: ...`).

    python bench/many_child.py --serve-gateway DIR --llm JSON [--cpu N]   # prints "PORT <n>"
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import resource
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gc_walks import GcWalks  # noqa: E402
from bench.stall_watch import StallWatch  # noqa: E402
from bench.ws_load import loop_factory, pin_self  # noqa: E402
from bot.runtime.heap import resident_bytes, sweep_frozen  # noqa: E402
from bot.runtime.heap_copy import garbage_in_a_copy  # noqa: E402

ANSWER = "an answer of a usual length from the model, " * 6


class Probe:
    """Every collection's pause (wall time from its start to its stop callback) and CPU."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float, float]] = []  # generation, wall s, CPU s
        self.collected = 0  # objects the collections freed (cyclic garbage)
        self._start = self._cpu = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start, self._cpu = time.perf_counter(), time.thread_time()
        else:
            wall, cpu = time.perf_counter() - self._start, time.thread_time() - self._cpu
            self.pauses.append((info["generation"], wall, cpu))
            self.collected += info["collected"]

    def report(self) -> str:
        pauses, self.pauses = self.pauses, []
        collected, self.collected = self.collected, 0
        longest = max(pauses, key=lambda p: p[1], default=(0, 0.0, 0.0))
        fulls = [wall for generation, wall, _ in pauses if generation == 2]
        cpu = sum(p[2] for p in pauses)
        tracked = len(gc.get_objects())  # the frozen start-up heap is not counted
        return (
            f"GC {len(pauses)} {len(fulls)} {longest[1] * 1e3:.3f} {longest[2] * 1e3:.3f}"
            f" {max(fulls, default=0.0) * 1e3:.3f} {cpu * 1e3:.3f} {tracked} {collected}"
            f" {longest[0]}"
        )


def config_file(data_dir: str, llm: dict[str, Any]) -> Path:
    """The gateway's config: no `log` section (the default level), one address for all."""
    config = {
        "server": {"port": 0},
        "storage": {"path": str(Path(data_dir) / "bench.db")},
        "personas": {"dirs": [str(ROOT / "personas")]},
        "llm": llm,
        "channels": {
            "websocket": {
                "rate_limit_per_minute": 1_000_000,
                "max_connections_per_address": 100_000,
            }
        },
    }
    path = Path(data_dir) / "config.yaml"
    path.write_text(json.dumps(config))
    return path


async def serve(data_dir: str, llm: dict[str, Any]) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    from bot.runtime.app import App
    from bot.runtime.config import load_config
    from bot.runtime.heap import collect_young_periodically, settle_heap
    from bot.runtime.logs import secret_values, setup_logging

    config = load_config(config_file(data_dir, llm), env={"BENCH_LLM_KEY": "bench-key"})
    log = (Path(data_dir) / "gateway.log").open("a", encoding="utf-8")
    setup_logging(config.log.level, config.log.format, secrets=secret_values(config), stream=log)
    probe = Probe()
    loop = asyncio.get_running_loop()
    threading.Thread(target=_answer, args=(probe, loop), daemon=True).start()
    gc.disable()  # as `bot serve` starts
    async with App(config, base_dir=Path(data_dir)) as app:
        settle_heap()
        young = asyncio.create_task(collect_young_periodically())  # as `bot serve` does
        gc.callbacks.append(probe)
        if os.environ.get("BENCH_GC_WALKS"):  # what each collection walked (bench/gc_walks.py)
            gc.callbacks.insert(0, GcWalks(Path(os.environ["BENCH_GC_WALKS"])))
        if os.environ.get("BENCH_STALLS"):  # where the loop was when it stalled (a file)
            # BENCH_STALL_MS: how late the loop must be to count as stalled (default 40)
            late_s = float(os.environ.get("BENCH_STALL_MS", "40")) / 1000
            watch = StallWatch(Path(os.environ["BENCH_STALLS"]), late_s).start()  # noqa: F841
        every_s = float(os.environ.get("BENCH_LOOKS_EVERY_S", "0"))  # the heap's look, in loads
        looks = asyncio.create_task(_look_every(every_s)) if every_s else None
        print(f"PORT {app.port}", flush=True)
        with app.ops.collections_watched():  # as `bot serve` does
            await app.wait()
        young.cancel()
        if looks is not None:
            looks.cancel()


async def _look_every(seconds: float) -> None:
    """`bot serve`'s look at its heap (a forked copy's count) every `seconds`, whatever runs,
    each logged to gateway.log: what it costs the turns beside it shows in their p99s."""
    while True:
        await asyncio.sleep(seconds)
        counted = await garbage_in_a_copy(needs=resident_bytes())
        if counted is not None:
            garbage, fork_s, copy_s, copied = counted
            logging.getLogger("bench").warning(
                "look: %d garbage, fork %.1f ms, copy %.0f ms, %d MiB",
                *(garbage, fork_s * 1e3, copy_s * 1e3, copied >> 20),
            )


def _answer(probe: Probe, loop: asyncio.AbstractEventLoop) -> None:
    for line in sys.stdin:
        if line.strip() == "gc":
            print(probe.report(), flush=True)
        elif line.strip() == "types":  # what the collector tracks, by type
            print(_census("TYPES", gc.get_objects()), flush=True)
        elif line.strip() == "sweep":  # bot serve's look and sweep (bot/runtime/heap.py), now
            copying = garbage_in_a_copy(needs=resident_bytes())
            garbage, fork_s, copy_s, copied = asyncio.run_coroutine_threadsafe(
                copying, loop
            ).result() or (-1, 0.0, 0.0, 0)
            freed, paused = sweep_frozen()
            print(
                f"SWEEP {freed} {paused * 1e3:.1f} {garbage} {fork_s * 1e3:.2f} {copy_s * 1e3:.0f}"
                f" {copied >> 20}",
                flush=True,
            )
        elif line.strip() == "garbage":  # a full collection, keeping what it would free
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            print(_census("GARBAGE", gc.garbage), flush=True)
            gc.garbage.clear()
            gc.set_debug(0)
        else:
            print(f"CPU {time.process_time()}", flush=True)


def _census(title: str, objects: list[Any]) -> str:
    """`<title> <how many> <type> <count>, ...`: the 15 most frequent types."""
    counts = Counter(type(o).__qualname__ for o in objects)
    top = ", ".join(f"{name} {n}" for name, n in counts.most_common(15))
    return f"{title} {len(objects)} {top}"


async def fill(
    db: Path, keys: list[tuple[str, str]], template: tuple[str, str | None], turns: int
) -> None:
    """`turns` turns in each conversation, through the store's own API (as gc_bench does):
    `keys` (conversation key, user id), `template` (agent id, persona version) as the gateway
    wrote its own first session."""
    from agent.types import Message, Usage
    from bot.storage import SqliteStore

    agent_id, version = template
    async with SqliteStore(db, history_cache_bytes=1 << 20) as store:
        for c, (key, user) in enumerate(keys):
            session_id = await store.active_session(
                channel="websocket",
                conversation_key=key,
                user_id=user,
                agent_id=agent_id,
                persona_version=version,
            )
            for n in range(turns):
                question = Message("user", f"question number {n}, asked by a user")
                usage = Usage(1200 + n, 80, "openai", "bench-model")
                answer = Message("assistant", f"{ANSWER}{n}", usage=usage)
                await store.append_messages(session_id, f"fill-{c}-{n}", [question, answer])


def main() -> None:
    parser = argparse.ArgumentParser(description="the gateway child of bench/many_bench.py")
    parser.add_argument("--serve-gateway", metavar="DIR", required=True)
    parser.add_argument("--llm", required=True, help="the llm config section as JSON")
    parser.add_argument("--cpu", default="", help="comma-separated CPUs to pin this process to")
    args = parser.parse_args()
    pin_self(args.cpu)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    with asyncio.Runner(loop_factory=loop_factory()) as runner:  # as `bot serve`'s: uvloop
        runner.run(serve(args.serve_gateway, json.loads(args.llm)))


if __name__ == "__main__":
    main()
