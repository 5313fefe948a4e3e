"""The provider mode of bench/ws_bench.py: the same web socket load through the vendors' SDKs.

For each column (the in-process scripted model, then each vendor's real SDK against
bench/fake_llm_server.py answering the same text in 0 ms) a fresh gateway child serves one long
conversation (gateway CPU per turn at its first and last 100 turns), N conversations flat out
(turns/s) and the same paced at half that rate (time to placeholder, turn latency). With a profile
folder, py-spy records the gateway during the long conversation and the paced run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bench.ws_load import Cores, Server, gateway_conversation, pct, start_gateway

PY_SPY = Path(sys.executable).parent / "py-spy"


@dataclass
class Figures:
    """One column of the provider table: a model behind the same gateway and load."""

    cpu_first: float = 0.0  # ms of gateway CPU per turn, turns 1-100 of the long conversation
    cpu_last: float = 0.0  # the same, its last 100 turns
    turn_first: float = 0.0  # turn latency p50, turns 1-100
    turn_last: float = 0.0
    rate: float = 0.0  # turns/s, N conversations flat out
    cpu_flat: float = 0.0
    paced_at: float = 0.0  # turns/s asked for in the paced run: half of `rate`
    paced_rate: float = 0.0  # turns/s it reached
    placeholder: tuple[float, float] = (0.0, 0.0)  # p50, p99 ms in the paced run
    turn: tuple[float, float] = (0.0, 0.0)
    profiles: dict[str, Path] = field(default_factory=dict)  # phase -> py-spy raw file


async def measure(
    column: str, llm: str, args: argparse.Namespace, cores: Cores, session: aiohttp.ClientSession
) -> Figures:
    """One model behind a fresh gateway: the long conversation, flat out, then paced."""
    figures = Figures()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as data_dir:
        gateway = start_gateway(data_dir, cores.server, llm, args.deltas)
        url = f"http://127.0.0.1:{gateway.port}/ws"
        try:
            await gateway_conversation(session, url, 9999, 3, [], [])  # warm up
            n, window = args.long_turns, min(100, args.long_turns)
            marks: dict[int, float] = {}

            def mark(turn: int) -> None:
                if turn in (0, window, n - window, n):
                    marks[turn] = gateway.cpu()

            long_turns: list[float] = []
            with _profiled(gateway.pid, args.profile, column, "long", figures.profiles):
                await gateway_conversation(session, url, 5000, n, [], long_turns, before_turn=mark)
            figures.cpu_first = (marks[window] - marks[0]) / window * 1000
            figures.cpu_last = (marks[n] - marks[n - window]) / window * 1000
            figures.turn_first = pct(long_turns[:window], 0.5)
            figures.turn_last = pct(long_turns[-window:], 0.5)
            print(f"  {column}: long conversation done", file=sys.stderr, flush=True)

            conversations = range(args.conversations)
            total: list[float] = []
            cpu_before, started = gateway.cpu(), time.perf_counter()
            await asyncio.gather(
                *(
                    gateway_conversation(session, url, i, args.turns, [], total)
                    for i in conversations
                )
            )
            wall = time.perf_counter() - started
            figures.rate = len(total) / wall
            figures.cpu_flat = (gateway.cpu() - cpu_before) / len(total) * 1000
            print(f"  {column}: flat out done", file=sys.stderr, flush=True)

            figures.paced_at = figures.rate / 2
            period_s = args.conversations / figures.paced_at
            placeholder: list[float] = []
            paced: list[float] = []
            started = time.perf_counter()
            with _profiled(gateway.pid, args.profile, column, "paced", figures.profiles):
                await asyncio.gather(
                    *(
                        gateway_conversation(
                            session, url, 1000 + i, args.turns, placeholder, paced, period_s
                        )
                        for i in conversations
                    )
                )
            figures.paced_rate = len(paced) / (time.perf_counter() - started)
            figures.placeholder = (pct(placeholder, 0.5), pct(placeholder, 0.99))
            figures.turn = (pct(paced, 0.5), pct(paced, 0.99))
        finally:
            gateway.stop()
    return figures


def _profiled(
    pid: int, folder: str | None, column: str, phase: str, profiles: dict[str, Path]
) -> AbstractContextManager[None]:
    """py-spy on the gateway for a phase; not for the scripted column, whose model is ours."""
    if not folder or column == "scripted":
        return nullcontext()
    profiles[phase] = Path(folder) / f"{column}-{phase}.txt"
    return py_spy(pid, profiles[phase])


def print_table(columns: dict[str, Figures], args: argparse.Namespace) -> None:
    n, window = args.long_turns, min(100, args.long_turns)
    first, last = f"turns 1-{window}", f"turns {n - window + 1}-{n}"

    def row(label: str, cell: Callable[[Figures], str]) -> None:
        print(f"  {label:38}" + "".join(f"{cell(c):>18}" for c in columns.values()))

    print(f"{'':40}" + "".join(f"{name:>18}" for name in columns))
    print(f"one conversation of {n} turns, answer in {args.deltas} streamed pieces")
    row(f"CPU per turn, {first} (ms)", lambda c: f"{c.cpu_first:.2f}")
    row(f"CPU per turn, {last} (ms)", lambda c: f"{c.cpu_last:.2f}")
    row("  last / first", lambda c: f"{c.cpu_last / max(c.cpu_first, 1e-9):.2f}x")
    row(f"turn latency p50, {first} (ms)", lambda c: f"{c.turn_first:.2f}")
    row(f"turn latency p50, {last} (ms)", lambda c: f"{c.turn_last:.2f}")
    print(f"{args.conversations} conversations x {args.turns} turns, flat out")
    row("turns/s", lambda c: f"{c.rate:.0f}")
    row("CPU per turn (ms)", lambda c: f"{c.cpu_flat:.2f}")
    print("the same, paced at half that rate")
    row("asked / reached (turns/s)", lambda c: f"{c.paced_at:.0f} / {c.paced_rate:.0f}")
    row("time to placeholder p50 / p99 (ms)", lambda c: "{:.2f} / {:.2f}".format(*c.placeholder))
    row("turn latency p50 / p99 (ms)", lambda c: "{:.2f} / {:.2f}".format(*c.turn))
    for name, figures in columns.items():
        for phase, raw in figures.profiles.items():
            samples, inclusive, own = top_frames(raw)
            print(f"py-spy, {name} {phase}: {samples} event-loop samples ({raw})")
            for title, ranked in (("inclusive", inclusive), ("self", own)):
                print(f"  top frames by {title} share")
                for share, frame in ranked:
                    print(f"  {share:5.1f} %  {frame}")


async def run_providers(vendors: list[str], args: argparse.Namespace, cores: Cores) -> None:
    """The scripted model's column, then each vendor's through its SDK and the fake server."""
    if args.profile and not PY_SPY.exists():
        raise SystemExit(
            f"--profile needs py-spy at {PY_SPY}: {sys.executable} -m pip install py-spy"
        )
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    fake = Server(
        str(Path(__file__).parent / "fake_llm_server.py"),
        "--deltas",
        str(args.deltas),
        "--cpus",
        cores.others,
    )
    base = f"http://127.0.0.1:{fake.port}"
    columns: dict[str, Figures] = {}
    try:
        async with aiohttp.ClientSession() as session:
            columns["scripted"] = await measure("scripted", "", args, cores, session)
            for vendor in vendors:
                llm = vendor_llm(vendor, base)
                columns[vendor] = await measure(vendor, llm, args, cores, session)
    finally:
        fake.stop()
    print_table(columns, args)


def vendor_llm(vendor: str, base: str) -> str:
    """The gateway's `llm` section (JSON) for `vendor`'s SDK against the fake server at `base`."""
    llm = {
        "provider": vendor,
        "base_url": base + ("/v1" if vendor == "openai" else ""),
        "api_key": "${BENCH_LLM_KEY}",
        "model": "bench-model",
        "total_timeout_s": 600,  # an unfixed SDK's 1,000th turn is slow, not broken
    }
    return json.dumps(llm)


@contextmanager
def py_spy(pid: int, out: Path) -> Iterator[None]:
    """py-spy records `pid` into `out` meanwhile: raw collapsed stacks, one frame per function."""
    # --nonblocking: pausing the gateway 100 times a second would add to the latencies measured
    command = [str(PY_SPY), "record", "--pid", str(pid), "--format", "raw", "--function"]
    command.append("--nonblocking")
    recorder = subprocess.Popen(
        [*command, "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
        recorder.wait(60)


def top_frames(
    raw: Path, count: int = 10
) -> tuple[int, list[tuple[float, str]], list[tuple[float, str]]]:
    """The event-loop thread's sample count, its frames in most samples (inclusive share) and
    the frames most often on top of its stack (self share).

    Only stacks rooted in the script's `<module>` count: py-spy takes the other threads' blocking
    waits (the thread pool's, the CPU probe's) for work. asyncio's and the bench's frames, in
    every sample, are left out of the inclusive list.
    """
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, weight = line.rpartition(" ")
        frames = stack.split(";")
        if not frames[0].startswith("<module>"):
            continue
        samples += int(weight)
        own[frames[-1]] += int(weight)
        for frame in set(frames):
            if not any(part in frame for part in ("asyncio/", "ws_load.py", "<module>")):
                inclusive[frame] += int(weight)

    def shares(counter: Counter[str], top: int) -> list[tuple[float, str]]:
        return [(hits / max(1, samples) * 100, frame) for frame, hits in counter.most_common(top)]

    return samples, shares(inclusive, count), shares(own, count // 2)
