"""A serving gateway freezes its start-up heap (bot/heap.py), so full collections stay short.

Both run in child processes: a frozen object is never freed, which the test process must not do.
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTLED = re.compile(r"heap settled: (\d+) start-up objects frozen")


async def test_bot_serve_freezes_its_start_up_heap(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "serve",
        "--port",
        "0",
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    log: list[str] = []
    try:
        async with asyncio.timeout(30):
            while not (found := SETTLED.search(log[-1] if log else "")):
                line = (await process.stderr.readline()).decode()
                assert line, "bot serve ended without settling its heap:\n" + "".join(log)
                log.append(line)
        # aiohttp, the SDKs, pydantic: far more than a bare interpreter's ~20,000 objects
        assert int(found.group(1)) > 50_000
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            await process.stderr.read()
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


CHECK = """
import gc, weakref
from bot.heap import YOUNG_THRESHOLD, settle_heap

class Node:
    pass

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
before = gc.get_freeze_count()
late = Node()
late.self = late
later = weakref.ref(late)
del late
gc.collect()
assert later() is None, "what turns leave behind is still collected"
assert gc.get_freeze_count() == before
print("ok")
"""


def test_start_up_garbage_is_freed_and_later_garbage_still_collected() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
