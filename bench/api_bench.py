"""Benchmark: the sessions API end to end, over HTTP + SSE, with a model that answers at once.

Runs the real app in-process (SQLite store, gateway, API channel) with a scripted 0 ms model and
a real aiohttp client in the same process (so the figures include the client's own cost), and
prints, per answer: time to the placeholder event (`message.created`) and to `message.completed`
(p50/p99), and answers per second with `--sessions` sessions asking at once.

    python bench/api_bench.py [--turns 400] [--sessions 1,20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.providers.scripted import Reply, ScriptedProvider  # noqa: E402
from bot.runtime.app import App  # noqa: E402
from tests.api_kit import (  # noqa: E402
    KEY_A,
    ApiClient,
    api_section,  # noqa: E402
    read_events,
)
from tests.conftest import make_config  # noqa: E402


async def ask(api: ApiClient, sid: str, n: int) -> tuple[float, float]:
    """Seconds to the placeholder and to the final answer of one message."""
    started = time.perf_counter()
    placeholder = 0.0
    url = f"{api.base}/sessions/{sid}/messages"
    body = {"text": f"question {n}", "client_message_id": f"q{n}"}
    async with api.http.post(url, json=body, headers=api.headers()) as response:
        async for item in read_events(response):
            if item is None:
                continue
            if item.type == "message.created" and not placeholder:
                placeholder = time.perf_counter() - started
            if item.type == "message.completed":
                return placeholder, time.perf_counter() - started
    raise RuntimeError("the stream ended without an answer")


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered) * 1000:6.2f} ms  p99 {p99 * 1000:6.2f} ms"


async def run(turns: int, sessions: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = make_config(Path(tmp), channels=api_section(rate_limit_per_minute=10**9))
        provider = ScriptedProvider(lambda request: Reply("The answer."))
        async with App(config, base_dir=Path(tmp), provider=provider) as app:
            async with aiohttp.ClientSession() as http:
                api = ApiClient(http, app, KEY_A)
                ids = [await api.new_session() for _ in range(sessions)]
                await asyncio.gather(*(ask(api, sid, -1 - i) for i, sid in enumerate(ids)))
                results: list[tuple[float, float]] = []

                async def one_session(sid: str, share: int) -> None:
                    for n in range(share):
                        results.append(await ask(api, sid, n))

                started = time.perf_counter()
                share = turns // sessions
                await asyncio.gather(*(one_session(sid, share) for sid in ids))
                elapsed = time.perf_counter() - started
    print(
        f"{sessions:3d} session(s), {len(results)} answers: {len(results) / elapsed:7.1f} answers/s"
        f"\n    placeholder event  {percentiles([r[0] for r in results])}"
        f"\n    completed event    {percentiles([r[1] for r in results])}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--sessions", default="1,20")
    args = parser.parse_args()
    for sessions in (int(s) for s in args.sessions.split(",")):
        asyncio.run(run(args.turns, sessions))


if __name__ == "__main__":
    main()
