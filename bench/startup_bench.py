"""Benchmark: how long `bot serve` takes to start, from the command to listening and to ready.

Two configurations, each started `--runs` times as a real `bot serve` child process:
- defaults: no config file, no keys (the README's run command): the offline model, the web socket;
- channels: every channel on, against the fakes in tests/ (Telegram, Slack Socket Mode, the
  Feishu long connection, the sessions API, the web socket), the offline model.
Each run times, from the process's spawn: listening (the first answer of `GET /healthz`; and the
CPU time the process had used by then, which a loaded machine changes less than wall time),
connected (every fake has seen the gateway: Telegram's first getUpdates, Slack's socket, Feishu's
long connection) and ready (`GET /readyz` 200: each channel's platform answered, bot/ops/health.py;
a checkout from before that, `--root`, waited `SETTLE_S` = 5 s more). The data folder is kept
between runs: run 1 creates the database, later runs open it (a restart). Then one start of each
configuration under `python -X importtime`: where its import time goes, by top-level package.

    python bench/startup_bench.py [--runs 3] [--only defaults|channels] [--root CHECKOUT]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.feishu_fake import APP_ID, APP_SECRET, FakeFeishu  # noqa: E402
from tests.slack_fake import APP_TOKEN, BOT_TOKEN, FakeSlack  # noqa: E402
from tests.telegram_fake import TOKEN, FakeBotAPI  # noqa: E402

API_KEY = "startup-bench-key"
SOURCE = ROOT  # the checkout `bot serve` runs from (--root: an older one, to compare)
POLL_S = 0.01


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Fakes:
    """The platforms' fakes, new for each run (what they saw is that run's)."""

    async def __aenter__(self) -> Fakes:
        self.telegram, self.slack, self.feishu = FakeBotAPI(), FakeSlack(), FakeFeishu()
        await self.telegram.start()
        await self.slack.start()
        await self.feishu.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for fake in (self.telegram, self.slack, self.feishu):
            await fake.close()

    def connected(self) -> bool:
        return (
            any(call.method == "getupdates" for call in self.telegram.calls)
            and self.slack.connected > 0
            and len(self.feishu.ws.sockets) > 0
        )

    def config(self, data: Path) -> dict[str, Any]:
        key = {"id": "bench", "sha256": hashlib.sha256(API_KEY.encode()).hexdigest()}
        return {
            "storage": {"path": str(data / "bot.db")},
            "personas": {"dirs": [str(ROOT / "personas")]},
            "llm": {"provider": "offline"},
            "channels": {
                "telegram": {"enabled": True, "api_base": self.telegram.url},
                "slack": {"enabled": True, "api_base": self.slack.url},
                "feishu": {"enabled": True, "domain": self.feishu.url},
                "api": {"enabled": True, "keys": [key]},
            },
        }


ENV = {
    "TELEGRAM_BOT_TOKEN": TOKEN,
    "SLACK_BOT_TOKEN": BOT_TOKEN,
    "SLACK_APP_TOKEN": APP_TOKEN,
    "FEISHU_APP_ID": APP_ID,
    "FEISHU_APP_SECRET": APP_SECRET,
}


def _cpu_s(pid: int) -> float:
    """The CPU time (user + system) a process has used so far: steadier than wall time on a
    loaded machine, where the child waits for a core."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _status(session: aiohttp.ClientSession, url: str) -> int | None:
    try:
        async with session.get(url) as response:
            return response.status
    except aiohttp.ClientError:
        return None


async def one_start(
    folder: Path, env: dict[str, str], connected: Callable[[], bool] | None, python: list[str]
) -> dict[str, float]:
    """Spawn `bot serve`, poll until listening, connected and ready; SIGTERM it."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    child_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(SOURCE), **env}
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *python, "-m", "bot", "serve", "--port", str(port), cwd=folder, env=child_env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    times: dict[str, float] = {}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            async with asyncio.timeout(120):
                while "ready" not in times:
                    assert process.returncode is None, "bot serve ended; run it to see why"
                    elapsed = time.perf_counter() - started
                    if "listening" not in times:
                        if await _status(session, f"{url}/healthz") is not None:
                            times["listening"] = elapsed
                            times["cpu"] = _cpu_s(process.pid)
                    else:
                        if "connected" not in times and (connected is None or connected()):
                            times["connected"] = elapsed
                        if await _status(session, f"{url}/readyz") == 200:
                            times["ready"] = time.perf_counter() - started
                            times.setdefault("connected", times["ready"])
                    await asyncio.sleep(POLL_S)
    finally:
        process.send_signal(signal.SIGTERM)
        await process.wait()
    return times


async def run_mode(mode: str, runs: int) -> list[dict[str, float]]:
    results = []
    with tempfile.TemporaryDirectory() as data:
        folder = Path(data)
        for _ in range(runs):
            if mode == "defaults":
                results.append(await one_start(folder, {}, None, [sys.executable]))
                continue
            async with Fakes() as fakes:
                (folder / "config.yaml").write_text(json.dumps(fakes.config(folder)))
                results.append(await one_start(folder, ENV, fakes.connected, [sys.executable]))
    return results


def report(mode: str, results: list[dict[str, float]]) -> None:
    parts = []
    for what in ("listening", "cpu", "connected", "ready"):
        if what == "connected" and mode == "defaults":
            continue  # no platform to connect to
        values = [r[what] for r in results]
        label = "CPU to listening" if what == "cpu" else what
        parts.append(
            f"{label} {statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"
        )
    print(f"{mode:<9} median (range) of {len(results)}: " + ", ".join(parts), flush=True)


async def import_profile(mode: str, top: int = 12) -> None:
    """One start under -X importtime: self time summed per top-level package."""
    line = re.compile(r"import time:\s+(\d+) \|\s+\d+ \|( *)(\S+)")
    with tempfile.TemporaryDirectory() as data:
        log = Path(data) / "importtime.txt"
        python = ["sh", "-c", f'exec "$0" -X importtime "$@" 2>{log}', sys.executable]
        if mode == "defaults":
            await one_start(Path(data), {}, None, python)
        else:
            async with Fakes() as fakes:
                (Path(data) / "config.yaml").write_text(json.dumps(fakes.config(Path(data))))
                await one_start(Path(data), ENV, fakes.connected, python)
        by_package: Counter[str] = Counter()
        for match in map(line.match, log.read_text().splitlines()):
            if match:
                by_package[match.group(3).split(".")[0]] += int(match.group(1))
    total = sum(by_package.values()) / 1e6
    listed = ", ".join(f"{name} {us / 1e3:.0f}" for name, us in by_package.most_common(top))
    print(f"imports ({mode}) {total:.2f} s in all; by package (ms): {listed}", flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=["defaults", "channels"])
    parser.add_argument("--root", type=Path, help="run `bot serve` from this checkout instead")
    args = parser.parse_args()
    global SOURCE
    SOURCE = (args.root or ROOT).resolve()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    modes = [mode for mode in ("defaults", "channels") if args.only in (None, mode)]
    for mode in modes:
        report(mode, await run_mode(mode, args.runs))
    for mode in modes:
        await import_profile(mode)


if __name__ == "__main__":
    asyncio.run(main())
