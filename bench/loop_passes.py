"""The event loop's passes, seen from outside by perf's tracepoints: no Python code in the process.

A pass is the loop's work between two waits for I/O (from `epoll_pwait`'s return to its next
call): a turn waits behind every pass that runs before it. For each long pass it tells how much of
it the loop was off its CPU and why (preempted, or asleep in a futex: the GIL or a lock, or in
a sync), and what the loop asked of the kernel meanwhile (writes to the WAL, socket reads and
writes). And it tells the loop's long waits for I/O: when turns are due and the loop waits, it is
the load that stalled, not the gateway. The stall watch (bench/stall_watch.py) needs the GIL to
look and so sees the loop where it let the GIL go; this does not.

    python bench/loop_passes.py record PID SECONDS FILE   # every thread of PID (needs perf)
    python bench/loop_passes.py report FILE [--over MS] [--idle MS]

bench/many_bench.py records the paced loads with BENCH_PASSES=FOLDER. uvloop waits in
`epoll_pwait`, asyncio's own loop in `epoll_wait`: both count.
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

WAITS = {232: "epoll_wait", 281: "epoll_pwait", 441: "epoll_pwait2"}
NAMES = {
    0: "read",
    1: "write",
    17: "pread64",
    18: "pwrite64",
    74: "fsync",
    75: "fdatasync",
    202: "futex",
}
NAMES |= WAITS
TRACED = " || ".join(f"id == {nr}" for nr in NAMES)
STRETCH_GAP_S = 0.0002  # the loop waited less than this between two passes: still busy
LINE = re.compile(r"\s*(\d+)\s+(?:\[\d+\]\s+)?([\d.]+):\s+(\S+):\s*(.*)")
FIELD = re.compile(r"(\w+)=(\S+)")


def record_command(pid: int, out: Path, seconds: float | None = None) -> list[str]:
    """perf record of the loop's syscalls that matter and the scheduler's switches, filtered in
    the kernel (every syscall traced: 2.2 M events in a 36 s load, 230 MB); without `seconds`, until
    perf gets SIGINT."""
    return [
        "perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-p", str(pid), "-o", str(out),
        "-e", "sched:sched_switch", "-e", "sched:sched_wakeup",
        "-e", "raw_syscalls:sys_enter", "--filter", TRACED,
        "-e", "raw_syscalls:sys_exit", "--filter", " || ".join(f"id == {nr}" for nr in WAITS),
    ] + (["--", "sleep", str(seconds)] if seconds else [])  # fmt: skip


class Recording:
    """`with Recording(pid, file):` perf records the process meanwhile (stopped with SIGINT)."""

    def __init__(self, pid: int, out: Path) -> None:
        self.pid, self.out = pid, out
        self._perf: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Recording:
        self._perf = subprocess.Popen(record_command(self.pid, self.out))
        time.sleep(0.5)  # perf attaches to every thread before the load starts
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._perf is not None
        self._perf.send_signal(signal.SIGINT)
        self._perf.wait(timeout=60)


@dataclass
class Pass:
    start: float
    end: float = 0.0
    calls: Counter[str] = field(default_factory=Counter)
    off: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))  # why: s

    @property
    def ms(self) -> float:
        return (self.end - self.start) * 1e3


@dataclass
class Trace:
    passes: list[Pass] = field(default_factory=list)
    waits: list[tuple[float, float]] = field(default_factory=list)  # (start, seconds) of waits
    span: float = 0.0


def read(path: Path, loop_tid: int | None = None) -> Trace:
    """The passes of `loop_tid` (default: the thread that waits for I/O most: the loop's)."""
    script = subprocess.run(
        ["perf", "script", "-F", "tid,time,event,trace", "-i", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    events = [
        (int(m[1]), float(m[2]), m[3], m[4]) for m in map(LINE.match, script.splitlines()) if m
    ]
    if loop_tid is None:
        waits = Counter(
            tid for tid, _, event, rest in events
            if event == "raw_syscalls:sys_exit" and int(rest.split()[1]) in WAITS
        )  # fmt: skip
        loop_tid = waits.most_common(1)[0][0] if waits else 0
    trace = Trace(span=events[-1][1] - events[0][1] if events else 0.0)
    current: Pass | None = None
    waiting_since: float | None = None
    off_since, off_why, last_call = 0.0, "", "?"
    for tid, t, event, rest in events:
        if event == "sched:sched_switch":
            f = dict(FIELD.findall(rest))
            if int(f["prev_pid"]) == loop_tid:
                off_since = t
                asleep = not f["prev_state"].startswith("R")
                off_why = f"asleep in {last_call}" if asleep else "preempted"
            elif int(f["next_pid"]) == loop_tid and current is not None and off_since:
                current.off[off_why] += t - off_since
            continue
        if tid != loop_tid or not event.startswith("raw_syscalls"):
            continue
        nr = int(rest.split()[1])
        if event == "raw_syscalls:sys_enter":
            last_call = NAMES[nr]
            if nr in WAITS:
                waiting_since = t
                if current is not None:
                    current.end = t
                    trace.passes.append(current)
                    current = None
            elif current is not None:
                current.calls[last_call] += 1
        elif nr in WAITS:  # the wait returned: a pass begins
            if waiting_since is not None:
                trace.waits.append((waiting_since, t - waiting_since))
            current = Pass(t)
    return trace


def busy_stretches(passes: list[Pass]) -> list[tuple[Pass, Pass, int]]:
    """Runs of passes with less than STRETCH_GAP_S between them: (first, last, how many)."""
    stretches: list[tuple[Pass, Pass, int]] = []
    for p in passes:
        if stretches and p.start - stretches[-1][1].end < STRETCH_GAP_S:
            first, _, count = stretches[-1]
            stretches[-1] = (first, p, count + 1)
        else:
            stretches.append((p, p, 1))
    return stretches


def report(trace: Trace, over_ms: float = 10.0, idle_ms: float = 50.0) -> str:
    lengths = sorted(p.ms for p in trace.passes)
    if not lengths:
        return "no passes of the loop in the trace"
    n = len(lengths)
    busy = sum(lengths) / 1e3
    lines = [
        f"{n} passes of the loop in {trace.span:.1f} s (busy {busy / trace.span:.0%}): p99 "
        f"{lengths[int(n * 0.99)]:.2f}, p99.9 {lengths[int(n * 0.999)]:.2f}, longest "
        f"{lengths[-1]:.1f} ms"
    ]
    away: defaultdict[str, list[float]] = defaultdict(list)  # why: each pass's time off its CPU
    for p in trace.passes:
        for why, s in p.off.items():
            away[why].append(s * 1e3)
    lines.append(
        "off its CPU in passes, in all: "
        + "; ".join(
            f"{why} {sum(ms):.1f} ms in {len(ms)} passes (longest {max(ms):.1f})"
            for why, ms in sorted(away.items(), key=lambda i: -sum(i[1]))[:5]
        )
    )
    long = [p for p in trace.passes if p.ms > over_ms]
    lines.append(f"{len(long)} passes over {over_ms:g} ms:")
    for p in sorted(long, key=lambda p: -p.ms)[:12]:
        off = ", ".join(
            f"{why} {s * 1e3:.1f} ms" for why, s in sorted(p.off.items(), key=lambda i: -i[1])
        )
        calls = ", ".join(f"{name} x{count}" for name, count in p.calls.most_common(5))
        lines.append(f"  at {p.start:.3f}: {p.ms:.1f} ms (off its CPU: {off or 'never'}); {calls}")
    stretches = busy_stretches(trace.passes)
    spans = sorted((last.end - first.start) * 1e3 for first, last, _ in stretches)
    k = len(spans)
    lines.append(
        f"{k} busy stretches (passes less than {STRETCH_GAP_S * 1e3:g} ms apart: a turn that "
        f"comes meanwhile waits for the rest): p99 {spans[int(k * 0.99)]:.1f}, p99.9 "
        f"{spans[int(k * 0.999)]:.1f}, longest {spans[-1]:.1f} ms; "
        f"{sum(x for x in spans if x > over_ms) / 1e3:.1f} s in those over {over_ms:g} ms"
    )
    for first, last, count in sorted(stretches, key=lambda r: r[0].start - r[1].end)[:3]:
        lines.append(
            f"  at {first.start:.3f}: {(last.end - first.start) * 1e3:.1f} ms, {count} passes"
        )
    idle = [(t, s) for t, s in trace.waits if s * 1e3 > idle_ms]
    lines.append(f"{len(idle)} waits for I/O over {idle_ms:g} ms (no input came: the load's)")
    for t, s in sorted(idle, key=lambda w: -w[1])[:5]:
        lines.append(f"  at {t:.3f}: {s * 1e3:.0f} ms")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("pid", type=int)
    rec.add_argument("seconds", type=float)
    rec.add_argument("file", type=Path)
    rep = sub.add_parser("report")
    rep.add_argument("file", type=Path)
    rep.add_argument("--tid", type=int, default=None, help="the loop's thread (default: main)")
    rep.add_argument("--over", type=float, default=10.0, help="ms: a long pass")
    rep.add_argument("--idle", type=float, default=50.0, help="ms: a long wait for I/O")
    args = parser.parse_args()
    if args.command == "record":
        sys.exit(subprocess.run(record_command(args.pid, args.file, args.seconds)).returncode)
    print(report(read(args.file, args.tid), args.over, args.idle))


if __name__ == "__main__":
    main()
