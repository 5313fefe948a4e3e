"""Each cyclic garbage collection's pause, for `/metrics` (`gateway_gc_pause_seconds`).

bot/runtime/heap.py keeps the collector's pauses short (start-up heap frozen, survivors frozen,
young collections spaced out, the sweep rare); this lets an operator see that they stay so in
production, by generation: young (0), middle (1) and full (2, the heap's sweep among them).

A `gc.callbacks` hook times each collection from its "start" to its "stop" call: wall time, what
the event loop waited. Hooks are process-wide, so only `bot serve` installs one (`watched`), for
the one app it serves; a process that runs many apps (the tests) would count each pause in all.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

Observe = Callable[[int, float], None]  # (generation, seconds)

# a young collection takes well under a millisecond; the sweep ~0.3 s with 10,000 conversations
BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class CollectionTimer:
    """The `gc.callbacks` hook: times each collection, reports it to `observe`."""

    def __init__(self, observe: Observe) -> None:
        self._observe = observe
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._observe(info["generation"], time.perf_counter() - self._started)


@contextmanager
def watched(observe: Observe) -> Iterator[None]:
    """Every collection in this process, while inside, reported to `observe`."""
    timer = CollectionTimer(observe)
    gc.callbacks.append(timer)
    try:
        yield
    finally:
        gc.callbacks.remove(timer)
