"""A watchdog of an event loop, for benchmarks: where the loop was when it stalled.

The loop stamps the time every 5 ms; a thread looks every 2 ms and, while the stamp is more than
`threshold_s` old, takes the loop thread's stack every 20 ms (`sys._current_frames`). Each
stall is written to `path` when it ends: its length and the stacks taken, innermost frames
last. A stall inside C code that holds the GIL (a collection) shows once the GIL is let go.

    BENCH_STALLS=/tmp/stalls.txt python bench/many_bench.py   # bench/many_child.py starts it
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from pathlib import Path


class StallWatch:
    def __init__(self, path: Path, threshold_s: float = 0.04) -> None:
        self.path = path
        self.threshold_s = threshold_s
        self.stamp = time.monotonic()
        self._loop_thread = threading.get_ident()

    def start(self) -> asyncio.Task[None]:
        """From the loop's thread: the stamping task; the watching thread starts too."""
        self._loop_thread = threading.get_ident()
        threading.Thread(target=self._watch, daemon=True, name="stall-watch").start()
        return asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        while True:
            self.stamp = time.monotonic()
            await asyncio.sleep(0.005)

    def _watch(self) -> None:
        stacks: list[str] = []
        last_take = began = 0.0
        with self.path.open("a", encoding="utf-8") as out:
            while True:
                time.sleep(0.002)
                now = time.monotonic()
                late = now - self.stamp
                if late > self.threshold_s:
                    if not stacks:
                        began = self.stamp
                    if now - last_take >= 0.02:
                        frame = sys._current_frames().get(self._loop_thread)
                        if frame is not None:
                            stacks.append("".join(traceback.format_stack(frame)[-14:]))
                        last_take = now
                elif stacks:
                    stalled = self.stamp - began  # the last stamp before it to the first after
                    out.write(
                        f"=== stall of {stalled * 1e3:.0f} ms, {len(stacks)} stacks, at {time.time():.3f}\n"
                    )
                    for stack in dict.fromkeys(stacks):  # each distinct stack once, in order
                        out.write(stack + "---\n")
                    out.flush()
                    stacks = []
