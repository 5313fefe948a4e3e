"""Benchmark: many conversations in one gateway, idle web sockets open, a paced load beside them.

The whole gateway (bench/many_child.py: the real app at its default log level, pinned to its own
core, its model the real `openai` SDK against bench/fake_llm_server.py) in two runs:

- **baseline**: a fresh gateway and only the load: 50 web socket conversations of short turns,
  flat out first (the saturation rate, unless `--rate`), then paced at half of it;
- **many**: the SQLite database filled first with `--conversations` conversations of `--turns`
  turns each (through the store's own API, under the conversation keys the web socket visitors
  will use: a first gateway's session row shows them), the gateway started on it, one turn on
  each conversation through its web socket (the history cache warm), `--sockets` of those
  visitors back with an idle socket each (answering the gateway's pings, as a browser does; in a
  process of their own, bench/idle_sockets.py, not in the one that times the turns),
  and the same paced load on 50 other conversations (this process's collector off meanwhile).

Printed for both: RSS, RSS per cached conversation, memory per idle web socket, the collector
inside the gateway (a `gc.callbacks` probe: collections, the longest pause, wall and CPU, the
longest full one, their CPU per turn), time to placeholder and turn latency p50/p99, the
gateway's CPU per turn and the time it waited for its core (a shared machine's share of the
tail), its CPU a second with no turn running (the idle sockets' pings), and this process's
longest collection (the turns are timed here). At the end, `bot serve`'s look at its heap (a
forked copy's count of garbage, the fork's pause; the sweep's pause). BENCH_PASSES=FOLDER traces
the gateway in each paced load (bench/loop_passes.py; perf takes CPU from the load's core).

    python bench/many_bench.py [--conversations 10000] [--sockets 5000] [--turns 50] [--rate N]
    python bench/many_bench.py --conversations 500 --sockets 300 --turns 10   # a quick one
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import resource
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import loop_passes  # noqa: E402
from bench.idle_sockets import IdleSockets, visitor  # noqa: E402
from bench.loop_passes import Recording  # noqa: E402
from bench.many_child import Probe, fill  # noqa: E402
from bench.ws_load import (  # noqa: E402
    ORIGIN,
    Cores,
    Server,
    _until,
    gateway_conversation,
    pct,
    pin_cores,
    rss_bytes,
    run_queue_wait,
)

LOAD = 50  # conversations of the paced load
PROBE_VISITOR = "bench-visitor-probe"


@dataclass
class Run:
    rss_start: float = 0.0  # MiB
    rss_warm: float = 0.0
    rss_end: float = 0.0
    per_conversation: float = 0.0  # KiB
    per_socket: float = 0.0  # KiB
    sockets_left: int = 0  # idle sockets still open after the load
    idle_cpu: float = 0.0  # ms of the gateway's CPU a second after the load (the idle sockets')
    warm_s: float = 0.0
    rate: float = 0.0
    reached: float = 0.0
    placeholder: tuple[float, float] = (0.0, 0.0)
    turn: tuple[float, float] = (0.0, 0.0)
    cpu: float = 0.0  # ms per turn
    waited: float = 0.0  # ms per turn
    stolen: float = 0.0  # ms the hypervisor ran others on this machine's CPUs during the load
    client: float = 0.0  # ms of this process's CPU per turn (the load's)
    client_gc: float = 0.0  # ms: this process's longest collection in the load
    gc: dict[str, float] = field(default_factory=dict)
    gc_warm: dict[str, float] = field(default_factory=dict)
    gc_sockets: dict[str, float] = field(default_factory=dict)
    sweep: tuple[float, ...] = (0.0,) * 6  # the end's: freed, ms; a copy's garbage, fork, ms, MiB

    @property
    def busy(self) -> float:
        """% of the gateway's core its turns took: where the p99s sit on the queue's curve."""
        return self.cpu * self.reached / 10


def start(data_dir: str, llm: str, cores: Cores) -> Server:
    child = str(Path(__file__).parent / "many_child.py")
    return Server(child, "--serve-gateway", data_dir, "--llm", llm, "--cpu", cores.server)


def gc_figures(gateway: Server) -> dict[str, float]:
    """The child's collector since the last call (see bench/many_child.py)."""
    assert gateway.process.stdin is not None and gateway.process.stdout is not None
    gateway.process.stdin.write("gc\n")
    gateway.process.stdin.flush()
    values = gateway.process.stdout.readline().split()[1:]
    names = ["collections", "full", "longest", "longest_cpu", "longest_full", "cpu", "tracked"]
    names += ["collected", "longest_generation"]
    return dict(zip(names, map(float, values), strict=True))


def sweep(gateway: Server) -> tuple[float, ...]:
    """The child's look at its frozen heap, now: its `SWEEP` figures (bench/many_child.py)."""
    assert gateway.process.stdin is not None and gateway.process.stdout is not None
    gateway.process.stdin.write("sweep\n")
    gateway.process.stdin.flush()
    return tuple(map(float, gateway.process.stdout.readline().split()[1:]))


def stolen_ms() -> float:
    """The CPU time a hypervisor gave others, all CPUs (/proc/stat's steal): a virtual machine
    stalls as a whole then, its processes not even waiting for a core as far as they can see."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return 0.0
    return int(fields[8]) * 1000 / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else 0.0


def _mark(phase: str) -> None:
    """A phase's start in the stall file (BENCH_STALLS, bench/stall_watch.py), if one is kept."""
    if os.environ.get("BENCH_STALLS"):
        with open(os.environ["BENCH_STALLS"], "a", encoding="utf-8") as out:
            out.write(f"=== phase {phase} at {time.time():.3f}\n")


def mib(pid: int) -> float:
    return rss_bytes(pid) / 2**20


async def paced(url: str, gateway: Server, run: Run, turns: int, first: int, label: str) -> None:
    period_s = LOAD / run.rate
    placeholder: list[float] = []
    total: list[float] = []
    gc_figures(gateway)
    cpu, waited, started = gateway.cpu(), run_queue_wait(gateway.pid), time.perf_counter()
    stolen = stolen_ms()
    client = time.process_time()
    # the turns are timed in this process: its collector must not pause them (walking the
    # 5,000 idle sockets' objects when they were held here, it paused them 180 ms while the
    # gateway waited for input); the probe shows that none ran
    probe = Probe()
    gc.callbacks.append(probe)
    gc.disable()
    folder = os.environ.get("BENCH_PASSES")  # perf traces of the gateway loop's passes
    trace = Path(folder) / f"{label}.perf" if folder else None
    try:
        with Recording(gateway.pid, trace) if trace else contextlib.nullcontext():
            async with aiohttp.ClientSession() as session:
                await asyncio.gather(
                    *(
                        gateway_conversation(
                            session, url, first + i, turns, placeholder, total, period_s
                        )
                        for i in range(LOAD)
                    )
                )
    finally:
        gc.enable()
        gc.callbacks.remove(probe)
    if trace:
        print(f"  {label}: the gateway loop's passes in the load ({trace})", file=sys.stderr)
        print(loop_passes.report(loop_passes.read(trace)), file=sys.stderr, flush=True)
    run.client_gc = max((wall * 1e3 for _, wall, _ in probe.pauses), default=0.0)
    run.reached = len(total) / (time.perf_counter() - started)
    run.client = (time.process_time() - client) / len(total) * 1000
    run.cpu = (gateway.cpu() - cpu) / len(total) * 1000
    run.waited = (run_queue_wait(gateway.pid) - waited) / len(total) * 1000
    run.stolen = stolen_ms() - stolen
    run.gc = gc_figures(gateway)
    run.placeholder = (pct(placeholder, 0.5), pct(placeholder, 0.99))
    run.turn = (pct(total, 0.5), pct(total, 0.99))


async def baseline(llm: str, args: argparse.Namespace, cores: Cores) -> Run:
    run = Run()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as data_dir:
        gateway = start(data_dir, llm, cores)
        url = f"http://127.0.0.1:{gateway.port}/ws"
        try:
            async with aiohttp.ClientSession() as session:
                await gateway_conversation(session, url, 99_999, 3, [], [])  # warm up
                run.rss_start = mib(gateway.pid)
                if args.rate:
                    run.rate = args.rate
                else:
                    total: list[float] = []
                    started = time.perf_counter()
                    await asyncio.gather(
                        *(
                            gateway_conversation(
                                session, url, 90_000 + i, args.load_turns, [], total
                            )
                            for i in range(LOAD)
                        )
                    )
                    run.rate = len(total) / (time.perf_counter() - started) / 2
            print(f"  baseline: pacing at {run.rate:.0f} turns/s", file=sys.stderr, flush=True)
            await paced(url, gateway, run, args.load_turns, 1_000_000, "baseline")
            run.rss_end = mib(gateway.pid)
            run.idle_cpu = await idle_cpu(gateway)
        finally:
            gateway.stop()
    return run


def session_template(db: Path) -> tuple[str, str, str, str | None]:
    """How the gateway keyed the probe visitor's session: (conversation key, user id) with
    `{}` for the visitor id, its agent id and persona version."""
    with sqlite3.connect(db) as conn:
        key, user, agent, version = conn.execute(
            "SELECT conversation_key, user_id, agent_id, persona_version FROM chat_sessions"
            " WHERE channel = 'websocket' AND conversation_key LIKE ?",
            (f"%{PROBE_VISITOR}%",),
        ).fetchone()
    return key.replace(PROBE_VISITOR, "{}"), user.replace(PROBE_VISITOR, "{}"), agent, version


async def many(llm: str, rate: float, args: argparse.Namespace, cores: Cores) -> Run:
    run = Run(rate=rate)
    n = args.conversations
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as data_dir:
        db = Path(data_dir) / "bench.db"
        gateway = start(data_dir, llm, cores)  # makes the schema, shows the session keys
        try:
            async with aiohttp.ClientSession() as session:
                async with session.ws_connect(
                    f"http://127.0.0.1:{gateway.port}/ws", headers={"Origin": ORIGIN}
                ) as ws:
                    await ws.send_str(json.dumps({"type": "hello", "visitor_id": PROBE_VISITOR}))
                    await _until(ws, "ready")
                    await ws.send_str(json.dumps({"type": "message", "text": "hello"}))
                    await _until(ws, "message.completed")
        finally:
            gateway.stop()
        key, user, agent, version = session_template(db)
        started = time.perf_counter()
        keys = [(key.format(visitor(i)), user.format(visitor(i))) for i in range(n)]
        await fill(db, keys, (agent, version), args.turns)
        print(
            f"  many: {n} conversations x {args.turns} turns stored in "
            f"{time.perf_counter() - started:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        gateway = start(data_dir, llm, cores)
        url = f"http://127.0.0.1:{gateway.port}/ws"
        try:
            await asyncio.sleep(1)
            run.rss_start = mib(gateway.pid)
            gc_figures(gateway)
            started = time.perf_counter()
            await warm(url, n)
            run.warm_s = time.perf_counter() - started
            run.gc_warm = gc_figures(gateway)
            await asyncio.sleep(1)
            run.rss_warm = mib(gateway.pid)
            run.per_conversation = (run.rss_warm - run.rss_start) * 1024 / n
            print(f"  many: cache warm in {run.warm_s:.0f} s", file=sys.stderr, flush=True)
            with IdleSockets(url, args.sockets) as idle:
                await asyncio.sleep(1)
                run.per_socket = (mib(gateway.pid) - run.rss_warm) * 1024 / max(1, args.sockets)
                run.gc_sockets = gc_figures(gateway)
                print(f"  many: {idle.opened} idle sockets open", file=sys.stderr, flush=True)
                _mark("paced load")
                await paced(url, gateway, run, args.load_turns, 1_000_000, "many")
                _mark("paced load done")
                run.sockets_left = idle.still_open()
                run.rss_end = mib(gateway.pid)
                run.idle_cpu = await idle_cpu(gateway)
                run.sweep = sweep(gateway)
        finally:
            gateway.stop()
    return run


async def idle_cpu(gateway: Server, seconds: float = 10.0) -> float:
    """The gateway's CPU in ms a second while no turn runs: its timers, and the pings of the
    idle sockets (open and answering them) where there are any."""
    cpu, started = gateway.cpu(), time.perf_counter()
    await asyncio.sleep(seconds)
    return (gateway.cpu() - cpu) * 1000 / (time.perf_counter() - started)


async def warm(url: str, n: int) -> None:
    """One turn on each conversation, 50 at a time (the model call loads its history)."""
    gate = asyncio.Semaphore(LOAD)

    async def one(session: aiohttp.ClientSession, index: int) -> None:
        async with gate:
            await gateway_conversation(session, url, index, 1, [], [])

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(one(session, i) for i in range(n)))


def report(base: Run, full: Run, args: argparse.Namespace) -> None:
    columns = {"baseline": base, f"{args.conversations} conversations": full}

    def row(label: str, cell: str) -> None:
        print(f"  {label:44}" + "".join(f"{cell.format(r=r):>24}" for r in columns.values()))

    print(f"{'':46}" + "".join(f"{name:>24}" for name in columns))
    print(
        f"stored: {args.conversations} conversations x {args.turns} turns, one turn each "
        f"through the gateway ({full.warm_s:.0f} s), {args.sockets} idle web sockets"
    )
    row("RSS at start / warm / end (MiB)", "{r.rss_start:.0f} / {r.rss_warm:.0f} / {r.rss_end:.0f}")
    row("RSS per cached conversation (KiB)", "{r.per_conversation:.1f}")
    row("memory per idle web socket (KiB)", "{r.per_socket:.1f}")
    row("idle sockets still open after the load", "{r.sockets_left}")
    row("gateway CPU with no turn running (ms/s)", "{r.idle_cpu:.1f}")
    for phase, phase_gc in (("warming", full.gc_warm), ("opening the sockets", full.gc_sockets)):
        print(
            f"  {phase}: {phase_gc.get('collections', 0):.0f} collections, {phase_gc.get('full', 0):.0f} "
            f"full, longest {phase_gc.get('longest', 0):.1f} ms (CPU {phase_gc.get('longest_cpu', 0):.1f}), "
            f"longest full {phase_gc.get('longest_full', 0):.1f} ms"
        )
    print(f"paced load: {LOAD} conversations x {args.load_turns} short turns, openai SDK")
    row("asked / reached (turns/s)", "{r.rate:.0f} / {r.reached:.0f}")
    row("time to placeholder p50 / p99 (ms)", "{r.placeholder[0]:.2f} / {r.placeholder[1]:.2f}")
    row("turn latency p50 / p99 (ms)", "{r.turn[0]:.2f} / {r.turn[1]:.2f}")
    row("gateway CPU per turn (ms)", "{r.cpu:.2f}")
    row("its core busy in the load (%)", "{r.busy:.0f}")
    row("waiting for its core (ms per turn)", "{r.waited:.2f}")
    row("the machine's stolen time in the load (ms)", "{r.stolen:.0f}")
    row("the load's own CPU per turn (ms)", "{r.client:.2f}")
    row("the load's own longest GC pause (ms)", "{r.client_gc:.1f}")
    row("collections (full)", "{r.gc[collections]:.0f} ({r.gc[full]:.0f})")
    row(
        "longest GC pause wall / CPU (ms), generation",
        "{r.gc[longest]:.1f} / {r.gc[longest_cpu]:.1f}, {r.gc[longest_generation]:.0f}",
    )
    row("longest full collection (ms)", "{r.gc[longest_full]:.1f}")
    for r in columns.values():
        r.gc["per_turn"] = r.gc["cpu"] * 1000 / max(1, LOAD * args.load_turns)
    row("GC CPU per turn (us)", "{r.gc[per_turn]:.0f}")
    row("tracked objects at the end", "{r.gc[tracked]:,.0f}")
    for r in columns.values():
        r.gc["garbage"] = r.gc["collected"] / max(1, LOAD * args.load_turns)
    row("cyclic garbage freed per turn (objects)", "{r.gc[garbage]:.1f}")
    freed, ms, n, fork, took, mib = full.sweep
    print(f"  a forked copy: {n:.0f} garbage, {took:.0f} ms, {mib:.0f} MiB, fork {fork:.1f} ms")
    print(f"  the sweep (the whole heap walked once): {ms:.1f} ms, freed {freed:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10_000, help="stored and cached")
    parser.add_argument("--turns", type=int, default=50, help="turns of each stored conversation")
    parser.add_argument("--sockets", type=int, default=5_000, help="idle web sockets open")
    parser.add_argument(
        "--load-turns", type=int, default=40, help="turns of each load conversation"
    )
    parser.add_argument(
        "--rate", type=float, help="turns/s of the paced load (default: half flat out)"
    )
    parser.add_argument("--deltas", type=int, default=5, help="text pieces in a streamed answer")
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < args.sockets + 1000:
        raise SystemExit(f"{args.sockets} sockets need more files than `ulimit -Hn` {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    cores = pin_cores()
    fake = Server(
        str(Path(__file__).parent / "fake_llm_server.py"),
        *("--deltas", str(args.deltas), "--cpus", cores.others),
    )
    llm = {
        "provider": "openai",
        "base_url": f"http://127.0.0.1:{fake.port}/v1",
        "api_key": "${BENCH_LLM_KEY}",
        "model": "bench-model",
    }
    try:
        base = asyncio.run(baseline(json.dumps(llm), args, cores))
        full = asyncio.run(many(json.dumps(llm), base.rate, args, cores))
    finally:
        fake.stop()
    print(f"machine: {os.getloadavg()[0]:.2f} load (1 min), {os.cpu_count()} CPUs")
    report(base, full, args)


if __name__ == "__main__":
    main()
