"""The frozen heap's garbage is counted in a forked copy (bot/runtime/heap_copy.py), which
reaches nothing of the gateway's, and the sweep's pause comes only when the copy found some.

Each runs in a child process: a frozen object is never freed, which the test process must not do.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from bot.runtime.heap_copy import can_copy
from tests.heap_logged import LOGGED
from tests.processes import ROOT

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(not can_copy(), reason="a copy of the heap is made on Linux only"),
]

GARBAGE = """
import gc, os, signal, sys, weakref

class Node:
    def __init__(self, finalizing):
        self.self = self  # a cycle: only a collection frees it
        self.finalizing = finalizing

    def __del__(self):
        self.finalizing(self)

def frozen_garbage(n, finalizing=lambda node: None):
    nodes = [Node(finalizing) for _ in range(n)]
    gc.collect()
    gc.freeze()  # as `bot serve` freezes what survives its collections
    first = weakref.ref(nodes[0])
    nodes.clear()  # let go of, frozen: only a sweep frees them
    return first
"""

ISOLATED = (
    GARBAGE
    + """
import asyncio
from bot.runtime.heap_copy import garbage_in_a_copy

import resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]  # as a gateway's sockets
read_end, write_end = os.pipe()
os.set_blocking(read_end, False)

import tempfile
policy = os.path.join(tempfile.mkdtemp(), "policy")

cores = os.sched_getaffinity(0)
os.sched_setaffinity(0, {min(cores)})  # a gateway pinned to a core of its own

def finalizing(node):  # what a finalizer of the gateway's could do
    with open(policy, "w") as file:  # a file of its own: how the copy is scheduled
        idle = os.sched_getscheduler(0) == os.SCHED_IDLE
        file.write(f"{idle}, on any core: {os.sched_getaffinity(0) == cores}")
    print("a finalizer printed", flush=True)
    os.write(write_end, b"a finalizer wrote to the gateway's pipe")

first = frozen_garbage(250, finalizing)
signalled = []

async def main():
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, signalled.append, "term")
    counted = await garbage_in_a_copy(needs=0)
    print("counted", counted.garbage, counted.fork_s < counted.copy_s, counted.copied > 0)
    await asyncio.sleep(0.2)

asyncio.run(main())
try:
    print("the pipe got", os.read(read_end, 100))
except BlockingIOError:
    print("the pipe got nothing")
print("still here", first() is not None, "signalled", signalled)
print("the copy ran at idle priority:", open(policy).read())
"""
)


def test_a_copy_counts_the_frozen_garbage_and_reaches_nothing_of_the_process() -> None:
    """The garbage's finalizers ran in the copy: their writes to the process's pipe and its
    standard output went nowhere, and the garbage is still in the process (the copy freed only
    its own). The process holds over 1,024 descriptors, as a gateway with its sockets does; the
    copy ran at idle priority (SCHED_IDLE), on any core though the process was pinned to one."""
    result = subprocess.run(
        [sys.executable, "-c", ISOLATED], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "counted 250 True True",
        "the pipe got nothing",
        "still here True signalled []",
        "the copy ran at idle priority: True, on any core: True",
    ]


HANGS = (
    GARBAGE
    + """
import asyncio, logging, time
from bot.runtime.heap_copy import garbage_in_a_copy

logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(message)s")

def finalizing(node):
    if os.environ.get("HOW") == "hang":
        time.sleep(3600)  # waits for a lock some thread of the gateway held at the fork
    os.kill(os.getpid(), signal.SIGTERM)  # kills the copy, not the gateway

frozen_garbage(3, finalizing)
signalled = []

async def main():
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, signalled.append, "term")
    # one that hangs is given 1 s; one that dies, long enough to run at idle priority
    timeout_s = 1.0 if os.environ.get("HOW") == "hang" else 50.0
    print("counted", await garbage_in_a_copy(needs=0, timeout_s=timeout_s))
    await asyncio.sleep(0.2)

asyncio.run(main())
try:
    os.waitpid(-1, os.WNOHANG)
    print("a copy is left")
except ChildProcessError:
    print("no copy left")
print("signalled", signalled)
"""
)


@pytest.mark.parametrize("how", ["hang", "die"])
def test_a_copy_that_hangs_or_dies_gives_no_count_and_is_not_left_behind(how: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", HANGS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"HOW": how, "PATH": ""},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert (
        lines[0]
        == {
            "hang": "the copy of the heap gave no count in 1 s: killed",
            "die": "the copy of the heap ended with no count (killed by SIGTERM)",
        }[how]
    ), lines
    assert lines[1:] == ["counted None", "no copy left", "signalled []"]


SWEEPS = (
    GARBAGE
    + LOGGED
    + """
async def looks(garbage, garbage_min):
    first = frozen_garbage(garbage)
    heap.SWEEP_AT_LEAST_S = 0.05  # due at each look
    logged.clear()
    sweeper = asyncio.create_task(heap.sweep_periodically(check_s=0.1, garbage_min=garbage_min))
    await logged_lines(1)
    sweeper.cancel()
    print("freed", first() is None)

asyncio.run(looks(40, garbage_min=50))
asyncio.run(looks(60, garbage_min=50))
"""
)


def test_the_sweep_runs_only_when_a_copy_found_enough_garbage() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SWEEPS], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    few = lines[: lines.index("freed False") + 1]
    assert few[0].startswith("heap looked over in a copy (0 h since the last look): 40 "), few
    assert "fewer than 50: not swept (the fork held the loop " in few[0]
    assert all(line.startswith("heap looked over") for line in few[1:-1]), few
    many = lines[len(few) :]
    swept = re.fullmatch(
        r"heap swept \(0 h since the last look; a copy found (\d+) garbage objects\):"
        r" (\d+) frozen objects were garbage, \d+ ms",
        many[0],
    )
    assert swept, many  # the 40 left before and the 60 made since
    assert int(swept.group(1)) >= 100 and int(swept.group(2)) >= 100, many[0]
    assert many[-1] == "freed True", many


NO_ROOM = """
import asyncio, logging, os, sys
from bot.runtime.heap_copy import free_bytes, garbage_in_a_copy

logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(message)s")
free = free_bytes()
print("known", free is not None and free > 0)
print("counted", asyncio.run(garbage_in_a_copy(needs=(free or 0) + (1 << 40))))
try:
    os.waitpid(-1, os.WNOHANG)
    print("a copy was made")
except ChildProcessError:
    print("no copy made")
"""


def test_no_copy_is_made_where_the_memory_it_may_take_is_not_free() -> None:
    """A collection in the copy writes to every page it walks, and each is then copied: as
    much memory again as the heap, at worst, must be free (the machine's and the cgroup's)."""
    result = subprocess.run(
        [sys.executable, "-c", NO_ROOM], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "known True"
    assert re.fullmatch(
        r"no room for a copy of the heap \(\d+ MiB free, up to \d+ MiB needed\)", lines[1]
    )
    assert lines[2:] == ["counted None", "no copy made"]
