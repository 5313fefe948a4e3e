"""How much of the frozen heap is garbage, counted in a forked copy of the process, not in it.

Why: the sweep of the frozen heap (bot/runtime/heap.py) is a full collection of everything:
~0.3-0.5 s of a paused loop with 10,000 conversations cached and 5,000 sockets open, and what it
usually finds is next to nothing (the gateway's turns leave no cyclic garbage). A fork copies
the process's page tables, not its memory (7-13 ms at 516 MiB here), and the copy walks its own
heap at leisure on another core while the gateway goes on answering: the sweep then runs only
when the copy found garbage worth its pause.

The copy must reach nothing of the gateway's. A collection runs the finalizers of what it frees
(a coroutine's `finally`, a transport's `close`, a weak reference's callback), so before it
collects, the copy closes every file descriptor it inherited (sockets, the database and its
WAL, the event loop's own) but the pipe it answers on, sends its standard streams to
/dev/null, drops the signal handlers and the loop's wake-up descriptor (a signal sent to it
must not wake the gateway's loop), and silences logging. It has no other thread: a finalizer
that waits for a lock some thread of the gateway held at the fork hangs it, and the gateway
then kills it after `timeout_s` and sweeps as it would have without a copy. Linux only (a
fork of a threaded process elsewhere is unsafe): elsewhere there is no copy, and the sweep runs.

The copy runs at the lowest priority there is (`SCHED_IDLE`), on any core (a gateway may be
pinned to one): it takes only time no one else wants, so a busy machine's copy answers later.

What the gateway pays after the fork: each page it writes to for the first time since is a page
fault, ~3 us while the copy lives (the page is copied), ~0.7 us after (measured here), so the
turns of the next second or so run slower. That is why the look, like the sweep, waits for a
moment with no turn (bot/runtime/heap.py), and bench/many_child.py's BENCH_LOOKS_EVERY_S shows
what looks in a load would cost.

The copy's memory: a collection writes to the header of every object it walks, and each page
it writes to is copied, so the copy can take as much memory again as the gateway's heap for the
second it lives (bench/many_bench.py prints how much it took). It is made only where that fits
(`free_bytes`: the machine's available memory, and the cgroup's limit where one is set), and it
offers itself first to the kernel's out-of-memory killer (`oom_score_adj` 1000): memory running
out kills the copy, not the gateway, which then sweeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import select
import signal
import sys
import time
import warnings
from typing import Final, NamedTuple, NoReturn

log = logging.getLogger(__name__)

COPY_TIMEOUT_S: Final = 60.0  # the copy of a 516 MiB gateway answered in 1.1-1.3 s


class Counted(NamedTuple):
    garbage: int  # objects the copy's full collection found unreachable
    fork_s: float  # how long the fork held up the gateway's loop
    copy_s: float  # from the fork to the copy's answer
    copied: int  # bytes of memory the copy took of its own (pages it wrote to)


def can_copy() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork")


async def garbage_in_a_copy(needs: int, timeout_s: float = COPY_TIMEOUT_S) -> Counted | None:
    """Fork, let the copy unfreeze and collect its heap, and return what it counted; None where
    no copy can be made, there is no room for `needs` bytes more, or it gave no answer in
    `timeout_s` (killed then)."""
    if not can_copy():
        return None
    free = free_bytes()
    if free is not None and free < needs:
        log.warning(
            "no room for a copy of the heap (%d MiB free, up to %d MiB needed)",
            free >> 20,
            needs >> 20,
        )
        return None
    started = time.perf_counter()
    read_end, write_end = os.pipe()
    try:
        with warnings.catch_warnings():  # 3.12+: "fork() may lead to deadlocks" (see above)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError as exc:
        os.close(read_end)
        os.close(write_end)
        log.warning("no copy of the heap to look over (fork failed: %s)", exc)
        return None
    if pid == 0:
        _count_and_exit(write_end)
    forked = time.perf_counter() - started
    os.close(write_end)
    try:
        answer = await asyncio.to_thread(_answer_of, pid, read_end, timeout_s)
    except (OSError, ValueError) as exc:  # the copy is reaped: the sweep runs as without one
        answer = f"could not be heard ({exc!r})"
    if isinstance(answer, str):
        log.warning("the copy of the heap %s", answer)
        return None
    garbage, copied = answer
    return Counted(garbage, forked, time.perf_counter() - started, copied)


def free_bytes() -> int | None:
    """Memory this process could still take: the least of the machine's available memory and
    its cgroup's limit less its use (v2, else v1); None where none can be read."""
    free = [_meminfo_available()]
    for limit, usage in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ),
    ):
        cap, used = _number_in(limit), _number_in(usage)
        if cap is not None and used is not None:
            free.append(cap - used)
            break
    known = [value for value in free if value is not None]
    return min(known) if known else None


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", "rb") as meminfo:
            for line in meminfo:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _number_in(path: str) -> int | None:
    """The number a cgroup file holds; None where it cannot be read or says "max" (no limit)."""
    try:
        with open(path, "rb") as file:
            return int(file.read())
    except (OSError, ValueError):
        return None


def _answer_of(pid: int, read_end: int, timeout_s: float) -> tuple[int, int] | str:
    """The copy's count and the bytes it took, read from its pipe within `timeout_s`, or what
    became of it instead; the copy reaped either way."""
    answer = b""
    try:
        deadline = time.monotonic() + timeout_s
        readable = select.poll()  # not select(): a gateway's descriptors pass 1,024
        readable.register(read_end, select.POLLIN)
        while (left := deadline - time.monotonic()) > 0:
            if not readable.poll(left * 1e3):
                break
            chunk = os.read(read_end, 64)
            if not chunk:  # the copy has exited
                break
            answer += chunk
    finally:
        os.close(read_end)
        late = time.monotonic() >= deadline
        if not answer.endswith(b"\n"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if answer.endswith(b"\n"):
        garbage, copied = answer.split()
        return int(garbage), int(copied)
    if late:
        return f"gave no count in {timeout_s:g} s: killed"
    return f"ended with no count ({_ended(status)})"


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def _count_and_exit(write_end: int) -> NoReturn:
    """In the copy: cut it off from everything the gateway holds, collect, answer, exit."""
    try:
        _cut_off(write_end)
        gc.callbacks.clear()  # the gateway's hooks (its metrics, freezing survivors)
        gc.unfreeze()
        garbage = gc.collect()
        os.write(write_end, f"{garbage} {_private_dirty()}\n".encode())
    finally:
        os._exit(0)  # no atexit, no flush of buffers the gateway shares


def _private_dirty() -> int:
    """Bytes of memory this process wrote to and no other holds (its copied pages)."""
    with open("/proc/self/smaps_rollup", "rb") as rollup:
        for line in rollup:
            if line.startswith(b"Private_Dirty:"):
                return int(line.split()[1]) * 1024
    return 0


def _cut_off(write_end: int) -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # first: the gateway's loop
        signal.signal(signum, signal.SIG_DFL)  # must hear none of the copy's signals
    signal.set_wakeup_fd(-1)
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as oom:
        oom.write("1000")  # memory running out kills the copy first
    with contextlib.suppress(OSError):  # it runs when the gateway's cores have nothing else to do
        os.nice(19)
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    with contextlib.suppress(OSError):  # on any core, not the one the gateway may be pinned to
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, write_end)
    os.closerange(write_end + 1, os.sysconf("SC_OPEN_MAX"))
    logging.disable(logging.CRITICAL)
    sys.unraisablehook = lambda _unraisable: None  # a finalizer's error, on nobody's screen
