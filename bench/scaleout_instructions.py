"""`--instructions` of bench/scaleout_bench.py: a turn's gateway instructions, embedded and in
Redis mode, counted by valgrind's callgrind in the gateway child (only while the load runs), so
the figure does not move with the machine's load as CPU time does.

Under callgrind the gateway runs some 50x slower, so the same load keeps more calls in flight
at once and Redis mode batches more of them than at full speed: keep `--conversations` low (4
in the README) to stay near one call per kind per turn, the least batched case. Each
conversation is warmed first with two turns, one conversation at a time (slow under callgrind:
side by side their web socket attaches could outlast Redis's deadlines), not counted.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from bench.ws_load import ROOT, Server, gateway_conversation


class Counted(Server):
    """A gateway child under callgrind; its first CPU probe starts the count, the second ends it."""

    def __init__(self, out: Path, *argv: str) -> None:
        self.out = out
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
        self.process = subprocess.Popen(
            [*command, f"--callgrind-out-file={out}", sys.executable, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
            env=os.environ | {"BENCH_CALLGRIND": "1"},
        )
        line = self._readline()
        if not line.startswith("PORT "):
            self.process.kill()
            raise SystemExit(f"the gateway did not start under callgrind: {line!r}")
        self.port = int(line.split()[1])
        self.pid = self.process.pid

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(300)  # callgrind writes its counts as the process ends

    def instructions(self) -> int:
        for line in self.out.read_text().splitlines():
            if line.startswith("totals:"):
                return int(line.split()[1])
        raise SystemExit(f"no instruction count in {self.out}")


def counted_probes() -> None:
    """The child's CPU probes (bench/ws_load.py's), switching callgrind's count on, then off."""
    for n, _ in enumerate(sys.stdin):
        switch = "--instr=on" if n == 0 else "--instr=off"
        subprocess.run(["callgrind_control", switch, str(os.getpid())], capture_output=True)
        print(f"CPU {time.process_time()}", flush=True)


async def instructions(script: str, args: Any, core: str) -> None:
    turns = args.conversations * args.turns
    counts: dict[str, float] = {}
    for label, redis in (("embedded", ""), ("redis x1", args.redis)):
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as data_dir:
            prefix = f"bench:{uuid.uuid4().hex[:8]}:"
            shared = json.dumps({"url": redis, "prefix": prefix}) if redis else ""
            argv = (script, "--serve", data_dir, "--redis-json", shared, "--llm", "", "--cpu", core)
            child = Counted(Path(data_dir) / "callgrind.out", *argv)
            try:
                async with aiohttp.ClientSession() as session:
                    url = f"http://127.0.0.1:{child.port}/ws"
                    for n in range(args.conversations):  # warmed (other visitors), one at a time
                        await gateway_conversation(session, url, 1000 + n, 2, [], [])
                    child.cpu()
                    await asyncio.gather(
                        *(
                            gateway_conversation(session, url, n, args.turns, [], [])
                            for n in range(args.conversations)
                        )
                    )
                    child.cpu()
            finally:
                child.stop()
                if redis:
                    await _forget(redis, prefix)
            counts[label] = child.instructions() / turns
        print(f"{label:<10} {counts[label] / 1e6:6.2f} M instructions/turn (callgrind)", flush=True)
    ratio = counts["redis x1"] / counts["embedded"]
    print(f"redis x1 vs embedded, gateway instructions/turn: {ratio:.2f}x", flush=True)


async def _forget(url: str, prefix: str) -> None:
    from bot.redis.client import connect

    client = connect(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()
