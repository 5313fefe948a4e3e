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
collection a 3-5 ms pause. Unfrozen at 700 (before): 62 us and 70-95 ms. With 10,000
conversations cached, old histories freed as new ones come lower CPython's young count (made
minus freed), so at 2,000 the young collections came late and big (up to 13,200 objects, the
middle generation's up to 19,500; the paced load's longest pause 8.3-15.7 ms in six runs of
bench/many_bench.py --load-turns 200), and for a while the threshold was 1,000 (4.3-7.3 ms in
three). What fixed the cause is that a young collection now comes at least every 0.1 s
(`collect_young_periodically`, `bot serve`): what replaces old objects is not counted at all,
and 5,000 idle web sockets' pongs alone replace ~3,000 a second; bounded so, the paced load's
longest pause beside them was 5.6 ms (CPU 3.5) instead of 7.1-10.7 (CPU 6.9-10.7) in three runs
on a slower machine. With that, 2,000 again: in the paced load the timer's collections are most
of them (224-266 in ~25 s at either threshold), and the longest pause in three many_bench runs
was 2.1-2.5 ms (1,000: 2.6-6.5 in four), while warming 3.6-4.4 ms; but a gateway flat out has half
as many collections: 3.91 M instructions a turn against 3.99 M (bench/ws_bench.py
--instructions, openai, 50 conversations).

The middle generation is collected at every other collection (its threshold 0: CPython
collects it once more young collections than its threshold have run; CPython's is 10). Each
collection's pause is the objects it walks, and on a large heap each costs ~0.5-0.9 us (its
references reach objects cold in the CPU's cache): with 10,000 conversations cached, the middle
generation held up to 36,000 objects at 10 (25 ms while the conversations warmed), ~11,500 at 2
(the longest pause while they warmed 9.2-13.0 ms in four runs with 128,000 messages hot in the
history cache), ~7,000 at 0 (6.0, 6.7 and, 930 ms stolen in that run, 9.3 ms; bench/
many_bench.py, BENCH_GC_WALKS counted the objects). What it walks
is walked once either way (then frozen), so the collector's CPU a turn stayed the same (7-11 us).

What outlives start-up is frozen too, after each collection of the middle or the oldest
generation (`freeze_survivors`): what survived it is live (or held by old garbage), and a full
collection would otherwise walk it again each time. Idle web sockets are most of it: ~74
tracked objects each (aiohttp's handler task and its coroutines, the reader's queue, the
heartbeat's timer; bench/many_census.py), so 5,000 of them made every full collection walk
~370,000 objects, 80-90 ms of CPU (bench/many_bench.py, loaded machine). Frozen after full
collections only, the first full collection after a burst still walked the newcomers once
(27-75 ms with 10,000 conversations warming and 5,000 sockets opening, quiet machine); frozen
after the middle generation's, they are frozen before a full collection ever comes, and no
pause left is longer than a young collection's. A frozen object is still freed by reference
counting when it is let go of, and the gateway's turns leave no cyclic garbage (many_bench
counts what collections free during its paced load: 0.0 objects a turn), nor do closed
connections since bot/runtime/listener.py breaks their cycles (29 objects each before).

The price: a frozen object that later becomes cyclic garbage is not freed by collections, and
neither is what only old garbage held when it was frozen. So that such garbage cannot grow for
the life of the process, `sweep_frozen` unfreezes everything and collects (`bot serve`): a full
pause (all the heap is walked: ~0.3-0.5 s with 10,000 conversations and 5,000 sockets), and the
log says what it freed. It was hourly; it is now looked at when it can matter (`sweep_due`,
asked hourly): once the process's resident memory has grown by a quarter since the last look,
and at least once a day. At a moment when no turn is running in this process (`bot serve` gives
`sweep_periodically` the gateway's `busy_here`; up to SWEEP_WAIT_IDLE_S), a forked copy of the
process first counts the frozen heap's garbage on its own (bot/runtime/heap_copy.py: the
fork holds the loop 7-13 ms at 516 MiB, the copy's walk holds up nothing), and the sweep runs
only when the copy found SWEEP_GARBAGE_MIN objects or more (a leak: the sweep's log line is then a
warning past 10,000) or where no copy can be made. A gateway whose turns leave no cyclic garbage
(above) then never pauses for the sweep, and what it strands is swept once a look finds
SWEEP_GARBAGE_MIN objects of it (under a MiB). Only a serving process calls `settle_heap` (`bot
serve`, the benchmark's gateway); a process that starts and stops many apps (the tests) must not.
In production, `bot serve`'s /metrics shows each pause (`gateway_gc_pause_seconds`, by
generation: bot/ops/gc_pauses.py).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from collections.abc import Callable
from typing import Final

from bot.runtime.heap_copy import garbage_in_a_copy

log = logging.getLogger(__name__)

YOUNG_THRESHOLD: Final = 2_000  # allocations between young collections (CPython: 700)
OLDER_THRESHOLDS: Final = (0, 10)  # CPython: (10, 10)
# a young collection at least this often (`collect_young_periodically`)
YOUNG_AT_LEAST_S: Final = 0.1
SWEEP_CHECK_S: Final = 3600.0  # how often `sweep_due` is asked
SWEEP_GROWTH: Final = 1.25  # resident memory, as a multiple of what it was after the last sweep
SWEEP_AT_LEAST_S: Final = 86_400.0
SWEEP_WAIT_IDLE_S: Final = 600.0  # a due sweep waits at most this long for no turn to be running
SWEEP_IDLE_POLL_S: Final = 0.5  # how often it looks meanwhile
SWEEP_GARBAGE_MIN: Final = 1_000  # frozen garbage a copy must find for the sweep to run


def settle_heap() -> int:
    """Once the app has started: collect, freeze what is left, space young collections out, and
    turn the collector on (`bot serve` starts with it off). Returns how many objects were frozen."""
    gc.collect()  # garbage of start-up must not be frozen: it would never be freed
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
    if freeze_survivors not in gc.callbacks:
        gc.callbacks.append(freeze_survivors)
    gc.enable()
    frozen = gc.get_freeze_count()
    log.info(
        "heap settled: %d start-up objects frozen, young collections every %d allocations",
        frozen,
        YOUNG_THRESHOLD,
    )
    return frozen


def freeze_survivors(phase: str, info: dict[str, int]) -> None:
    """After a collection of the middle or oldest generation, what survived it joins the frozen
    heap: a full collection walks only what has come since (so, nearly never anything)."""
    if phase == "stop" and info["generation"] >= 1:
        gc.freeze()


def collect_young() -> None:
    """A young collection, the middle generation's with it when due (as CPython would: an
    explicit young collection does not start one, and the middle one would fill for as long)."""
    gc.collect(1 if gc.get_count()[1] > gc.get_threshold()[1] else 0)


async def collect_young_periodically(every_s: float = YOUNG_AT_LEAST_S) -> None:
    """A young collection every `every_s` in which none ran, until cancelled.

    CPython starts one when objects made minus objects freed pass the threshold, and an object
    that replaces an old one counts as nothing: each pong of an idle web socket freed its read's
    and its heartbeat's objects of ~18 s ago (frozen long since) and made ~11 new ones (aiohttp's
    read and its future, the timers, the message; measured with aiohttp's heartbeat, before
    adapters/websocket/heartbeat.py, whose pings leave no timers: the reads remain). With 5,000
    idle sockets that was ~3,000 objects a second the count never saw, so the young collections
    came as the turns' objects made them and walked the sockets' too: up to 9,500 objects in a young collection and 13,800
    in a middle one (7-11 ms) with the threshold at 1,000 (bench/many_bench.py, a census of what
    each walked). Collected at least every `every_s`, what the count misses is bounded by what
    comes in that time, whatever makes it."""
    collections = _collections()
    while True:
        await asyncio.sleep(every_s)
        now = _collections()
        if now == collections:
            collect_young()
            now += 1
        collections = now


def _collections() -> int:
    return sum(generation["collections"] for generation in gc.get_stats())


def sweep_frozen() -> tuple[int, float]:
    """Walk the whole heap once: unfreeze, collect, freeze again. Frees cyclic garbage that was
    frozen (alive at a full collection, let go of since); returns how many objects were freed
    and the pause in seconds."""
    started = time.perf_counter()
    gc.unfreeze()
    freed = gc.collect()
    gc.freeze()
    return freed, time.perf_counter() - started


def sweep_due(resident: int, after_last: int, since_last_s: float) -> str | None:
    """Why the frozen heap should be looked over now (`resident`: bytes of memory now,
    `after_last`: right after the last look or the start, 0 where unknown), or None."""
    if after_last and resident >= after_last * SWEEP_GROWTH:
        return f"memory grew {resident / after_last:.2f}x since the last look"
    if since_last_s >= SWEEP_AT_LEAST_S:
        return f"{since_last_s / 3600:.0f} h since the last look"
    return None


def resident_bytes() -> int:
    """This process's resident memory (Linux: /proc/self/statm); 0 where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0  # then a sweep comes once a day only


async def sweep_periodically(
    check_s: float = SWEEP_CHECK_S,
    busy: Callable[[], bool] = lambda: False,
    wait_idle_s: float = SWEEP_WAIT_IDLE_S,
    garbage_min: int = SWEEP_GARBAGE_MIN,
) -> None:
    """Whenever `sweep_due` says so (asked every `check_s` seconds), until cancelled: at a
    moment when `busy()` (a turn is running here) is false, looked for every SWEEP_IDLE_POLL_S,
    or after `wait_idle_s` if none comes, a forked copy counts the frozen heap's garbage
    (bot/runtime/heap_copy.py), and `sweep_frozen` runs only if it found `garbage_min` objects or
    more, or where there is no copy. Each step logged."""
    after_last, last = resident_bytes(), time.monotonic()
    while True:
        await asyncio.sleep(check_s)
        why = sweep_due(resident_bytes(), after_last, time.monotonic() - last)
        if why is None:
            continue
        why += await _idle_moment(busy, wait_idle_s)
        counted = await garbage_in_a_copy(needs=resident_bytes())
        if counted is not None and counted.garbage < garbage_min:
            after_last, last = resident_bytes(), time.monotonic()
            log.info(
                "heap looked over in a copy (%s): %d frozen objects were garbage, fewer than %d:"
                " not swept (the fork held the loop %.1f ms; the copy answered in %.0f ms and"
                " took %d MiB)",
                why,
                counted.garbage,
                garbage_min,
                counted.fork_s * 1e3,
                counted.copy_s * 1e3,
                counted.copied >> 20,
            )
            continue
        if counted is not None:  # turns may have started while the copy counted
            why += f"; a copy found {counted.garbage} garbage objects"
            why += await _idle_moment(busy, wait_idle_s)
        freed, paused = sweep_frozen()
        after_last, last = resident_bytes(), time.monotonic()
        level = logging.WARNING if freed > 10_000 else logging.INFO
        log.log(
            level,
            "heap swept (%s): %d frozen objects were garbage, %.0f ms",
            why,
            freed,
            paused * 1e3,
        )


async def _idle_moment(busy: Callable[[], bool], wait_idle_s: float) -> str:
    """Returns once `busy()` is false (looked at every SWEEP_IDLE_POLL_S) or `wait_idle_s` has
    passed: then with what the log line should say about it."""
    waited_since = time.monotonic()
    while busy():
        if time.monotonic() - waited_since >= wait_idle_s:
            return f"; no moment without a turn in {wait_idle_s:g} s"
        await asyncio.sleep(min(SWEEP_IDLE_POLL_S, wait_idle_s))
    return ""
