"""Benchmark: what the gateway's MCP path adds to a call over the bare SDK, stdio and HTTP.

Both sides call the same tool (`add`) of the same server (tests/mcp_servers/demo.py, a real child
over stdio, or on loopback over Streamable HTTP): the bare side through one `mcp.Client`, ours
through `ToolRegistry.call` -> `McpServer` (allowlist, deadline, the call handed to the server's
supervisor task, result mapping, PII masking, the metrics observer). Rounds alternate between
the two so a busy machine slows both alike; printed: per call, the median wall time and this
process's CPU time (the server's own work is in its process and not counted), and the
difference. Then 50 calls at once across 5 servers, bare and ours.

    python bench/mcp_bench.py [--calls 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp import Client, StdioServerParameters  # noqa: E402

from bot.ops.metrics import Metrics  # noqa: E402
from tools.base import ToolContext  # noqa: E402
from tools.mcp.server import McpServer  # noqa: E402
from tools.mcp.settings import McpServerConfig  # noqa: E402
from tools.pii import DEFAULT_MASKER  # noqa: E402
from tools.registry import ToolRegistry  # noqa: E402

DEMO = str(ROOT / "tests" / "mcp_servers" / "demo.py")
CTX = ToolContext("bench")
Call = Callable[[int], Awaitable[Any]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def measure(call: Call, n: int) -> tuple[float, float]:
    """(wall ms, CPU ms) per call over `n` sequential calls."""
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        await call(i)
    return (
        (time.perf_counter() - wall) * 1000 / n,
        (time.process_time() - cpu) * 1000 / n,
    )


async def ours(config: McpServerConfig, name: str) -> tuple[McpServer, asyncio.Task[None]]:
    source = McpServer(name, config)
    runner = asyncio.create_task(source.run())
    async with asyncio.timeout(60):
        await source.wait_for(lambda s: s.ready)
    return source, runner


def registry_of(*sources: McpServer) -> ToolRegistry:
    registry = ToolRegistry(sources=sources, pii=DEFAULT_MASKER)
    registry.observer = Metrics().tool_call
    return registry


async def compare(label: str, bare_target: Any, config: McpServerConfig, args: Any) -> None:
    source, runner = await ours(config, "bench")
    registry = registry_of(source)
    allowed = registry.names()
    try:
        async with Client(bare_target) as client:

            async def bare(i: int) -> Any:
                return await client.call_tool("add", {"a": i, "b": 1})

            async def gateway(i: int) -> Any:
                result = await registry.call(
                    "mcp__bench__add", {"a": i, "b": 1}, CTX, allowed=allowed, timeout_s=30
                )
                assert result.ok, result.text
                return result

            await measure(bare, 20)  # warm both
            await measure(gateway, 20)
            rows: dict[str, list[tuple[float, float]]] = {"bare": [], "ours": []}
            for _ in range(args.rounds):
                rows["bare"].append(await measure(bare, args.calls))
                rows["ours"].append(await measure(gateway, args.calls))
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
    b_wall = statistics.median(w for w, _ in rows["bare"])
    o_wall = statistics.median(w for w, _ in rows["ours"])
    b_cpu = statistics.median(c for _, c in rows["bare"])
    o_cpu = statistics.median(c for _, c in rows["ours"])
    print(
        f"{label:6} per call: bare SDK {b_wall:.3f} ms wall / {b_cpu:.3f} ms CPU;"
        f" gateway {o_wall:.3f} ms / {o_cpu:.3f} ms;"
        f" added {o_wall - b_wall:+.3f} ms wall, {o_cpu - b_cpu:+.3f} ms CPU"
    )


async def parallel(args: Any) -> None:
    configs = [McpServerConfig(command=sys.executable, args=[DEMO]) for _ in range(5)]
    started = [await ours(config, f"s{i}") for i, config in enumerate(configs)]
    registry = registry_of(*(source for source, _ in started))
    allowed = registry.names()
    params = StdioServerParameters(command=sys.executable, args=[DEMO])
    try:
        clients = [Client(params) for _ in range(5)]
        for client in clients:
            await client.__aenter__()
        bare_all: list[float] = []
        ours_all: list[float] = []
        try:
            for _ in range(args.rounds):
                wall = time.perf_counter()
                await asyncio.gather(
                    *(clients[i % 5].call_tool("add", {"a": i, "b": 1}) for i in range(50))
                )
                bare_ms = (time.perf_counter() - wall) * 1000
                wall = time.perf_counter()
                results = await asyncio.gather(
                    *(
                        registry.call(
                            f"mcp__s{i % 5}__add",
                            {"a": i, "b": 1},
                            CTX,
                            allowed=allowed,
                            timeout_s=30,
                        )
                        for i in range(50)
                    )
                )
                ours_ms = (time.perf_counter() - wall) * 1000
                assert all(r.ok for r in results)
                bare_all.append(bare_ms)
                ours_all.append(ours_ms)
            print(
                f"50 calls at once across 5 stdio servers (median of {args.rounds}):"
                f" bare SDK {statistics.median(bare_all):.1f} ms,"
                f" gateway {statistics.median(ours_all):.1f} ms"
            )
        finally:
            for client in reversed(clients):
                await client.__aexit__(None, None, None)
    finally:
        for _, runner in started:
            runner.cancel()
        await asyncio.gather(*(runner for _, runner in started), return_exceptions=True)


async def main(args: Any) -> None:
    stdio = McpServerConfig(command=sys.executable, args=[DEMO])
    params = StdioServerParameters(command=sys.executable, args=[DEMO])
    await compare("stdio", params, stdio, args)
    port = free_port()
    server = await asyncio.create_subprocess_exec(sys.executable, DEMO, "--http", str(port))
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        async with asyncio.timeout(60):
            while True:
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.close()
                    break
                except OSError:
                    await asyncio.sleep(0.05)
        await compare("http", url, McpServerConfig(url=url), args)
    finally:
        server.kill()
        await server.wait()
    await parallel(args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(parser.parse_args()))
