"""A serving gateway freezes its start-up heap (bot/runtime/heap.py), so full collections stay short.

Both run in child processes: a frozen object is never freed, which the test process must not do.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import ROOT, logging_serve

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
