"""A serving gateway freezes its start-up heap (bot/runtime/heap.py), so full collections stay short.

Both run in child processes: a frozen object is never freed, which the test process must not do.
"""

from __future__ import annotations

import asyncio
import gc
import re
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import cast

import aiohttp
import pytest

from bot.ops.gc_pauses import watched
from bot.ops.metrics import Metrics
from bot.runtime.heap import sweep_due
from tests.heap_logged import LOGGED
from tests.processes import ROOT, SERVING, Gateway, logging_serve, open_tab, write_config

pytestmark = pytest.mark.process

SETTLED = re.compile(r"heap settled: (\d+) start-up objects frozen")


async def test_bot_serve_freezes_its_start_up_heap(tmp_path: Path) -> None:
    async with logging_serve(SETTLED, "--port", "0", cwd=tmp_path) as found:
        # aiohttp, the SDKs, pydantic: far more than a bare interpreter's ~20,000 objects
        assert int(found.group(1)) > 50_000


CHECK = """
import gc, weakref
from bot.runtime.heap import YOUNG_THRESHOLD, settle_heap, sweep_frozen

class Node:
    pass

gc.disable()  # as `bot serve` starts: no collection until the app has started
garbage = Node()
garbage.self = garbage  # a cycle: only the collector frees it
gone = weakref.ref(garbage)
del garbage
kept = Node()
kept.self = kept
frozen = settle_heap()
assert gone() is None, "start-up garbage was frozen instead of freed"
assert frozen == gc.get_freeze_count() > 0
assert gc.get_threshold()[0] == YOUNG_THRESHOLD
assert gc.isenabled(), "the collector stays off after start-up"
before = gc.get_freeze_count()
late = Node()
late.self = late
later = weakref.ref(late)
del late
survivor = Node()
survivor.self = survivor
plain = Node()
freed = weakref.ref(plain)
gc.collect()
assert later() is None, "what turns leave behind is still collected"
assert gc.get_freeze_count() > before, "the survivors of a full collection are frozen"
young = Node()
young.self = young
middle = gc.get_freeze_count()
gc.collect(1)
assert gc.get_freeze_count() > middle, "the survivors of a middle collection are frozen"
assert not any(o is young for o in gc.get_objects()), "a young survivor is walked again"
fresh = Node()
fresh.self = fresh
gc.collect(0)
assert any(o is fresh for o in gc.get_objects()), "a youngest collection freezes nothing"
assert not any(o is survivor for o in gc.get_objects()), "a survivor is walked again"
del plain
assert freed() is None, "a frozen object is still freed by reference counting"
leaked = weakref.ref(survivor)
del survivor  # a frozen cycle let go of: only a sweep frees it
gc.collect()
assert leaked() is not None, "frozen cyclic garbage is not walked by full collections"
swept, _paused = sweep_frozen()
assert leaked() is None and swept >= 1, "the sweep frees frozen cyclic garbage"
assert gc.get_freeze_count() > 0, "what lives is frozen again after a sweep"
print("ok")
"""


def test_start_up_garbage_is_freed_later_garbage_collected_survivors_frozen_and_swept() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


YOUNG = """
import asyncio, gc
from bot.runtime.heap import YOUNG_AT_LEAST_S, YOUNG_THRESHOLD, collect_young_periodically, settle_heap

class Node:
    pass

gc.disable()  # as `bot serve` starts
old = [Node() for _ in range(5000)]
settle_heap()  # frozen, as an idle socket's read and timers are long before they are replaced

async def main():
    young = asyncio.create_task(collect_young_periodically())
    await asyncio.sleep(0)
    for i in range(len(old)):
        old[i] = Node()  # one made, one freed: CPython's count sees nothing
    assert gc.get_count()[0] < YOUNG_THRESHOLD, gc.get_count()
    print("young before", len(gc.get_objects(0)))
    await asyncio.sleep(YOUNG_AT_LEAST_S * 3)
    print("young after", len(gc.get_objects(0)))
    young.cancel()

asyncio.run(main())
"""


def test_objects_that_replace_old_ones_are_collected_young_though_the_count_misses_them() -> None:
    result = subprocess.run(
        [sys.executable, "-c", YOUNG], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    before, after = (int(line.split()[-1]) for line in result.stdout.splitlines())
    assert before >= 5000  # the young generation holds them all, uncounted
    assert after < 500, "no young collection came for the objects CPython's count missed"


SWEEPS = (
    LOGGED
    + """
async def main():
    sweeper = asyncio.create_task(heap.sweep_periodically(check_s=0.02))
    await asyncio.sleep(0.3)  # memory as it was: nothing to look for
    print("grown")
    ballast = bytearray(heap.resident_bytes())  # written through: resident at once
    await logged_lines(1)
    await asyncio.sleep(0.3)  # memory holds: no second look
    sweeper.cancel()
    print("end", len(ballast) > 0)

asyncio.run(main())
"""
)


def test_the_frozen_heap_is_looked_over_once_memory_has_grown_by_a_quarter_not_every_hour() -> None:
    """Grown by live memory, not garbage: a copy counts (bot/runtime/heap_copy.py), no sweep."""
    result = subprocess.run(
        [sys.executable, "-c", SWEEPS], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "grown", "looked over while memory held steady"
    looks = [line for line in lines if line.startswith("heap ")]
    assert len(looks) == 1, lines  # once: grown since, not again as long as it holds
    assert re.match(
        r"heap looked over in a copy \(memory grew [12]\.\d\dx since the last look\): \d+ frozen"
        r" objects were garbage, fewer than 1000: not swept",
        looks[0],
    ), looks
    assert lines[-1] == "end True"


SWEEP_AT_IDLE = (
    LOGGED
    + """
async def sweeps(wait_idle_s, turn_s):
    logged.clear()
    running = [True]  # a turn is running (the gateway's busy_here)
    sweeper = asyncio.create_task(
        heap.sweep_periodically(
            check_s=0.02, busy=lambda: running[0], wait_idle_s=wait_idle_s, garbage_min=0
        )
    )
    await asyncio.sleep(0.1)
    ballast = bytearray(heap.resident_bytes())  # due from now on
    try:
        await asyncio.wait_for(logged_lines(1), turn_s)
    except TimeoutError:
        pass
    print("turn ended")
    running[0] = False
    await logged_lines(1)
    sweeper.cancel()
    return len(ballast)

async def main():
    await sweeps(wait_idle_s=60, turn_s=0.5)
    await sweeps(wait_idle_s=0.2, turn_s=50.0)  # never idle in time: swept anyway

asyncio.run(main())
"""
)


def test_a_due_sweep_waits_for_no_turn_to_be_running_but_not_forever() -> None:
    """The sweep's pause (the whole heap walked, ~0.3-0.6 s with 10,000 conversations) comes
    when no answer waits on it, if such a moment comes in SWEEP_WAIT_IDLE_S (`garbage_min=0`:
    whatever the copy counts, the sweep runs)."""
    result = subprocess.run(
        [sys.executable, "-c", SWEEP_AT_IDLE], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "turn ended", f"swept while a turn was running: {lines}"
    assert lines[1].startswith("heap swept (memory grew"), lines
    assert "no moment without a turn" not in lines[1]
    assert "no moment without a turn in 0.2 s" in lines[2], f"never swept: {lines}"
    assert lines[3] == "turn ended", lines


def test_a_sweep_is_due_on_growth_by_a_quarter_or_after_a_day() -> None:
    mib = 1 << 20
    assert sweep_due(124 * mib, 100 * mib, 3600) is None
    assert sweep_due(125 * mib, 100 * mib, 60) == "memory grew 1.25x since the last look"
    assert sweep_due(90 * mib, 100 * mib, 86_400) == "24 h since the last look"
    assert sweep_due(10 * mib, 0, 86_399) is None  # memory unknown: daily only


def test_a_watched_collection_reports_its_generation_and_pause_until_the_watch_ends() -> None:
    seen: list[tuple[int, float]] = []
    with watched(lambda generation, seconds: seen.append((generation, seconds))):
        gc.collect(0)
        gc.collect(2)
    gc.collect(1)  # no longer watched
    assert [generation for generation, _ in seen] == [0, 2]
    assert all(0 <= seconds < 60 for _, seconds in seen)


async def test_bot_serve_shows_each_collections_pause_in_its_metrics(tmp_path: Path) -> None:
    """Young collections come once more objects live than the threshold (and at least every
    0.1 s) after the heap has settled (until then the collector is off: tabs opened sooner bring
    none about): web sockets held open (~74 objects each) bring one about."""
    young = re.compile(r'^gateway_gc_pause_seconds_count\{generation="0"\} (\S+)$', re.M)
    sockets = {"max_connections_per_address": 10_000, "rate_limit_per_minute": 10_000}
    config = write_config(tmp_path, channels={"websocket": sockets})
    log: list[str] = []
    async with (
        logging_serve(SETTLED, "--config", str(config), cwd=tmp_path, log=log),
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session,
    ):
        port = next(int(m.group(2)) for line in log if (m := SERVING.search(line)))
        gateway = Gateway(cast(asyncio.subprocess.Process, None), port)
        tabs: list[aiohttp.ClientWebSocketResponse] = []
        counted = 0.0
        async with asyncio.timeout(45):
            while not counted and len(tabs) < 1000:  # one has come with 100-200
                for _ in range(10):
                    tabs.append(await open_tab(session, gateway, f"v-{uuid.uuid4().hex[:8]}"))
                async with session.get(f"{gateway.url}/metrics") as response:
                    assert response.status == 200
                    found = young.search(await response.text())
                counted = float(found.group(1)) if found else 0.0
        assert counted >= 1, f"no young collection in /metrics with {len(tabs)} sockets open"
        for tab in tabs:
            await tab.close()


def test_a_collections_pause_is_counted_without_the_lock_a_scrape_holds() -> None:
    """A scrape holds the histogram's lock while it allocates, and an allocation can set off a
    collection, whose hook then reports its pause on that same thread: were the hook to take
    that lock (prometheus-client's `labels()` does, a non-reentrant one), the process would
    hang. Here the lock is held as a scrape holds it, and the report comes from a thread."""
    metrics = Metrics()
    reported = threading.Event()

    def report() -> None:
        metrics.collection_paused(0, 0.002)
        reported.set()

    with metrics.gc_pauses._lock:  # as `collect()` holds it while it copies the children
        threading.Thread(target=report, daemon=True).start()
        assert reported.wait(10), "the pause waited for the scrape's lock"
    assert b'gateway_gc_pause_seconds_count{generation="0"} 1.0' in metrics.render()
