"""Benchmark: what a specialist dispatch costs over a direct answer (model calls and wall time).

Runs the real gateway in-process with a scripted model whose every call takes `--latency-ms`,
through a recording channel, and prints per-turn model calls and wall time for a direct answer
and for one foreground dispatch (coordinator → specialist → coordinator).

    python bench/dispatch_bench.py [--turns 200] [--latency-ms 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.base import ChatRef, InboundMessage  # noqa: E402
from agent.providers.scripted import Reply, ScriptedProvider  # noqa: E402
from agent.types import ModelRequest  # noqa: E402
from bot.runtime.app import App  # noqa: E402
from bot.runtime.config import load_config  # noqa: E402
from tests.fakes import RecordingChannel  # noqa: E402

TASK = "Find the archived fact about the 1969 moon landing crew and return it in one sentence."


def model() -> Callable[[ModelRequest], Reply]:
    def reply(request: ModelRequest) -> Reply:
        last = request.messages[-1]
        if "SPECIALIST" in request.system:
            return Reply("Crew: Armstrong, Aldrin, Collins")
        if last.role == "tool":
            return Reply("Armstrong, Aldrin and Collins.")
        if last.content.startswith("dispatch"):
            args = {"description": "moon crew", "subagent_type": "specialist-bench", "prompt": TASK}
            return Reply(calls=[("AgentTool", args)])
        return Reply("A direct answer.")

    return reply


async def run(turns: int, latency_s: float) -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        personas = base / "personas"
        personas.mkdir()
        (personas / "default.md").write_text((ROOT / "personas" / "default.md").read_text())
        (personas / "specialist-bench.md").write_text(
            "---\nname: specialist-bench\ndescription: Bench.\ntools: []\n---\nYou are SPECIALIST-BENCH.\n"
        )
        (base / "config.yaml").write_text(
            json.dumps(
                {
                    "storage": {"path": str(base / "bench.db")},
                    "personas": {"dirs": [str(personas)]},
                    "log": {"level": "WARNING"},
                }
            )
        )
        config = load_config(base / "config.yaml", env={})
        provider = ScriptedProvider(model(), latency_s=latency_s)
        channel = RecordingChannel()
        async with App(
            config, base_dir=base, provider=provider, channels=[channel], web_server=False
        ) as app:
            results = {}
            for kind in ("direct", "dispatch"):
                durations = []
                calls_before = len(provider.requests)
                for index in range(turns):
                    message = InboundMessage(
                        ChatRef("fake", f"{kind}-{index}"), "u", f"{kind} please", f"{kind}-{index}"
                    )
                    started = time.perf_counter()
                    await app.gateway.handle(message)
                    await app.gateway.wait_idle()
                    durations.append(time.perf_counter() - started)
                results[kind] = (durations, (len(provider.requests) - calls_before) / turns)
    direct, dispatch = results["direct"], results["dispatch"]
    print(f"scripted model latency {latency_s * 1000:.0f} ms per call, {turns} turns each")
    for kind, (durations, calls) in results.items():
        ordered = sorted(durations)
        print(
            f"  {kind:9} model calls/turn {calls:.1f}   wall p50 {statistics.median(durations) * 1000:7.2f} ms"
            f"   p99 {ordered[int(0.99 * (len(ordered) - 1))] * 1000:7.2f} ms"
        )
    extra_calls = dispatch[1] - direct[1]
    extra_ms = (statistics.median(dispatch[0]) - statistics.median(direct[0])) * 1000
    own_ms = extra_ms - extra_calls * latency_s * 1000
    print(
        f"  a dispatch adds {extra_calls:.0f} model calls and {extra_ms:.2f} ms wall "
        f"({own_ms:.2f} ms of it is the gateway's own work: session, audit, worker loop)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args()
    asyncio.run(run(args.turns, args.latency_ms / 1000))


if __name__ == "__main__":
    main()
