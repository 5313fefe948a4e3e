"""What the collector walks for each idle web socket, and what a closed one leaves to it.

A gateway child of bench/many_bench.py (the real app; no model call is made) takes `--sockets`
visitors that say hello and stay idle: the objects the cyclic collector tracks for each, by type;
then they all close, and a full collection is asked what it would free (cyclic garbage, which
reference counting could not): objects per closed socket, by type.

    python bench/many_census.py [--sockets 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.idle_sockets import open_idle  # noqa: E402
from bench.many_bench import start  # noqa: E402
from bench.ws_load import Server, pin_cores  # noqa: E402


def ask(gateway: Server, command: str) -> tuple[int, str]:
    """(the count, the types) of the child's `types` or `garbage` answer."""
    assert gateway.process.stdin is not None and gateway.process.stdout is not None
    gateway.process.stdin.write(command + "\n")
    gateway.process.stdin.flush()
    _, count, types = (gateway.process.stdout.readline().rstrip("\n").split(" ", 2) + [""])[:3]
    return int(count), types


async def census(sockets: int) -> None:
    llm = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "bench-model"}
    llm["api_key"] = "${BENCH_LLM_KEY}"
    with tempfile.TemporaryDirectory() as data_dir:
        gateway = start(data_dir, json.dumps(llm), pin_cores())
        url = f"http://127.0.0.1:{gateway.port}/ws"
        try:
            ask(gateway, "garbage")
            before, _ = ask(gateway, "types")
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector) as session:
                opened = await open_idle(session, url, sockets)
                await asyncio.sleep(1)
                during, types = ask(gateway, "types")
                for ws in opened:
                    await ws.close()
            await asyncio.sleep(2)
            garbage, kinds = ask(gateway, "garbage")
        finally:
            gateway.stop()
    print(f"{sockets} idle web sockets: {(during - before) / sockets:.1f} tracked objects each")
    print(f"  tracked in all: {types}")
    print(f"closed: {garbage / sockets:.1f} objects of cyclic garbage each")
    print(f"  freed by a full collection: {kinds}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sockets", type=int, default=1000)
    asyncio.run(census(parser.parse_args().sockets))


if __name__ == "__main__":
    main()
