"""Benchmark: instructions per text turn through the gateway (callgrind), embedded and on Redis.

The CPU per turn of bench/ws_bench.py and bench/scaleout_bench.py moves by ±15 % between runs on
a shared machine; a change of a few per cent in the routing step needs a count that does not
move: valgrind's callgrind counts the instructions of the measured turns only. Each turn is one
user message handed to the gateway (`Gateway.handle`, as a channel does) on its own
conversation, answered by the scripted model, in the real app with a recording channel.
`--tree DIR` measures another checkout (its own `bot/` and `tests/`, this script's code), so a
branch and its base are compared in one sitting.

    python bench/routing_bench.py [--turns 200] [--tree DIR] [--redis redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


async def count(mode: str, turns: int, redis_url: str) -> None:
    """The child: warm up, then run `turns` turns with callgrind counting switched on."""
    import json

    from adapters.base import ChatRef, InboundMessage
    from agent.providers.scripted import Reply, ScriptedProvider
    from bot.runtime.app import App
    from bot.runtime.config import load_config
    from tests.fakes import RecordingChannel

    channel = RecordingChannel()
    provider = ScriptedProvider(lambda request: Reply("ok: " + request.messages[-1].content[:40]))
    with tempfile.TemporaryDirectory() as data_dir:
        config: dict[str, object] = {
            "server": {"port": 0},
            "storage": {"path": str(Path(data_dir) / "bench.db")},
            "personas": {"dirs": [str(ROOT / "personas")]},
            "log": {"level": "WARNING"},
        }
        prefix = f"bench:{uuid.uuid4().hex[:8]}:"
        if mode == "redis":
            config["redis"] = {"url": redis_url, "prefix": prefix}
        path = Path(data_dir) / "config.yaml"
        path.write_text(json.dumps(config))
        app = App(
            load_config(path),
            base_dir=Path(data_dir),
            provider=provider,
            channels=[channel],
            web_server=mode == "redis",  # Redis mode is for served gateways only
        )
        async with app:

            async def turn(n: int) -> None:
                chat = ChatRef("fake", f"dm-{n}")
                message = InboundMessage(chat, f"u{n}", f"hello {n}", f"e{n}", f"m{n}")
                await app.gateway.handle(message)
                try:
                    # the answer shown (as a final, or a preview whose equal final is skipped)
                    await channel.wait_for(lambda: channel.shown()[-1:] == [f"ok: hello {n}"], 120)
                except TimeoutError:
                    sys.exit(f"turn {n} did not end: {channel.calls[-3:]}")

            for n in range(20):
                await turn(n)
            toggle = ["callgrind_control", "--instr=on", str(os.getpid())]
            subprocess.run(toggle, stdout=subprocess.DEVNULL, check=True)  # noqa: ASYNC221
            for n in range(20, 20 + turns):
                await turn(n)
            toggle[1] = "--instr=off"
            subprocess.run(toggle, stdout=subprocess.DEVNULL, check=True)  # noqa: ASYNC221
            if mode == "redis" and app.redis is not None:
                keys = [k async for k in app.redis.redis.scan_iter(match=f"{prefix}*")]
                if keys:
                    await app.redis.redis.delete(*keys)


def measure(tree: Path, mode: str, turns: int, redis_url: str) -> float:
    child = subprocess.run(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null",
         sys.executable, __file__, "--count", mode, "--turns", str(turns), "--tree", str(tree),
         "--redis", redis_url],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    counted = re.search(r"Collected : (\d+)", child.stderr)
    if child.returncode or counted is None:
        raise SystemExit(f"callgrind run failed: {child.stderr[-3000:]}")
    return int(counted.group(1)) / turns / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--tree", default=str(ROOT), help="the checkout to measure")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--modes", default="embedded,redis")
    parser.add_argument("--count", choices=["embedded", "redis"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    tree = Path(args.tree).resolve()
    if args.count:
        sys.path.insert(0, str(tree))
        asyncio.run(count(args.count, args.turns, args.redis))
        return
    for mode in args.modes.split(","):
        millions = measure(tree, mode, args.turns, args.redis)
        print(f"{tree.name:16} {mode:9} {millions:6.3f} M instructions/turn", flush=True)


if __name__ == "__main__":
    main()
