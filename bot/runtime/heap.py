"""The garbage collector of a serving gateway: start-up objects frozen, young collections rarer.

Why: CPython's cyclic collector pauses the event loop, and every turn waits behind it. A full
collection walks every tracked object; after start-up that is aiohttp, the model SDKs,
pydantic's schemas, the personas: about 85,000 objects (`bot serve`) that live as long as the
process. Measured with `gc.callbacks` on bench/ws_bench.py (50 web socket conversations, scripted
model), a full collection ran 70-95 ms of CPU (up to 250 ms of wall time on a busy machine) every
~2,000 turns: that was the p99 of time to placeholder. Frozen after start-up (`gc.freeze`, made
for this), those objects are never walked again, and a full collection walks only what turns
have kept since (the history caches): a few ms while they are small.

Young collections are made rarer too: a turn allocates thousands of short-lived containers,
most freed by reference counting before any collection sees them. Measured over ~4,000 turns
(CPU of the collector per turn; longest pause): frozen at the default threshold 700, 21 us and
16-20 ms (two full collections); at 2,000, 12 us and 2-5 ms; at 10,000, 5 us but every young
collection a 3-5 ms pause. Unfrozen at 700 (before): 62 us and 70-95 ms.

The price: a frozen object that later becomes cyclic garbage is never freed. What start-up
builds lives as long as the process, but for what a reload replaces (personas, knowledge files):
rare and small. Only a serving process calls `settle_heap` (`bot serve`, the benchmark's
gateway); a process that starts and stops many apps (the tests) must not.
"""

from __future__ import annotations

import gc
import logging
from typing import Final

log = logging.getLogger(__name__)

YOUNG_THRESHOLD: Final = 2_000  # allocations between young collections (CPython: 700)
OLDER_THRESHOLDS: Final = (10, 10)  # CPython's defaults


def settle_heap() -> int:
    """Once the app has started: collect, freeze what is left, space young collections out, and
    turn the collector on (`bot serve` starts with it off). Returns how many objects were frozen."""
    gc.collect()  # garbage of start-up must not be frozen: it would never be freed
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
    gc.enable()
    frozen = gc.get_freeze_count()
    log.info(
        "heap settled: %d start-up objects frozen, young collections every %d allocations",
        frozen,
        YOUNG_THRESHOLD,
    )
    return frozen
