"""`bench/ws_bench.py --instructions`: a turn's cost in the whole gateway, counted by callgrind.

CPU time per turn follows the machine's load (±20 % and more on a shared machine); the count of
instructions does not. Each column (the scripted model, then each vendor's SDK against
bench/fake_llm_server.py) runs a fresh gateway child under valgrind's callgrind, at its default
log level as in the other modes, warms up with 20 turns in each conversation, then counts only
the measured turns (`callgrind_control` switches counting on and off): every thread of the
gateway, its SQLite checkpoints included; not the kernel's work (socket and file writes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import tempfile
from pathlib import Path

import aiohttp

from bench.ws_load import Cores, Server, gateway_conversation, start_gateway
from bench.ws_providers import vendor_llm

CALLGRIND = ("valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null")
WARM_UP_TURNS = 20


async def count(llm: str, args: argparse.Namespace, cores: Cores) -> float:
    """Instructions per turn of `args.conversations` conversations of `args.turns` turns."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as data_dir:
        gateway = start_gateway(data_dir, cores.server, llm, args.deltas, wrap=CALLGRIND)
        url = f"http://127.0.0.1:{gateway.port}/ws"
        conversations = range(args.conversations)
        try:
            async with aiohttp.ClientSession() as session:
                await asyncio.gather(
                    *(
                        gateway_conversation(session, url, 9000 + i, WARM_UP_TURNS, [], [])
                        for i in conversations
                    )
                )
                _counting(gateway.pid, "on")
                total: list[float] = []
                await asyncio.gather(
                    *(
                        gateway_conversation(session, url, i, args.turns, [], total)
                        for i in conversations
                    )
                )
                _counting(gateway.pid, "off")
        finally:
            gateway.process.terminate()  # callgrind prints its count as the child ends
            gateway.process.wait(300)
        log = (Path(data_dir) / "gateway.log").read_text()
    counted = re.search(r"Collected : (\d+)", log)
    if counted is None:
        raise SystemExit(f"callgrind did not report a count: {log[-3000:]}")
    return int(counted.group(1)) / len(total)


def _counting(pid: int, state: str) -> None:
    subprocess.run(
        ["callgrind_control", f"--instr={state}", str(pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )


async def run_instructions(vendors: list[str], args: argparse.Namespace, cores: Cores) -> None:
    fake = Server(
        str(Path(__file__).parent / "fake_llm_server.py"),
        "--deltas",
        str(args.deltas),
        "--cpus",
        cores.others,
    )
    columns: dict[str, float] = {}
    try:
        columns["scripted"] = await count("", args, cores)
        for vendor in vendors:
            columns[vendor] = await count(
                vendor_llm(vendor, f"http://127.0.0.1:{fake.port}"), args, cores
            )
    finally:
        fake.stop()
    level = os.environ.get("BENCH_LOG", "the default")
    print(
        f"gateway instructions per turn (callgrind), {args.conversations} conversation(s) x "
        f"{args.turns} turns, log level {level}, answer in {args.deltas} streamed pieces"
    )
    for column, instructions in columns.items():
        print(f"  {column:10} {instructions / 1e6:6.2f} M")
