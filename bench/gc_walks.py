"""What each collection walked, for benchmarks: its generation, its objects, its pause.

A collection's pause is the objects it walks, and on a large heap each costs ~0.5 us (its
references reach objects cold in the CPU's cache). CPython's count of the young generation is
objects made minus objects freed, so a churn that frees old objects as it makes new ones (the
history cache's, before 47f2bbe) lets the young generation grow far past the threshold: this is
how that was found (22,000 objects in young collections). Each collection is written as one
line, `<unix time> <generation> <objects walked> <wall ms> <CPU ms>`; a full collection's
objects are not counted (-1: that would walk the whole heap again).

    BENCH_GC_WALKS=/tmp/walks.txt python bench/many_bench.py   # bench/many_child.py adds it

Counting takes time of its own (`gc.get_objects(generation)`), before the pause is timed: the
figures are for finding what a collection walks, not for the README's pauses.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any


class GcWalks:
    """A `gc.callbacks` entry; put it first, so its counting is not timed as the pause."""

    def __init__(self, path: Path) -> None:
        self.out = path.open("a", encoding="utf-8", buffering=1)
        self._objects = 0
        self._wall = self._cpu = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        generation = info["generation"]
        if phase == "start":
            walked = range(generation + 1) if generation < 2 else ()
            self._objects = sum(len(gc.get_objects(g)) for g in walked) if walked else -1
            self._wall, self._cpu = time.perf_counter(), time.thread_time()
            return
        wall = (time.perf_counter() - self._wall) * 1e3
        cpu = (time.thread_time() - self._cpu) * 1e3
        self.out.write(f"{time.time():.3f} {generation} {self._objects} {wall:.3f} {cpu:.3f}\n")
