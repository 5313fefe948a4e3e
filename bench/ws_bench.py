"""Benchmark: N concurrent web socket conversations against the real gateway, model at 0 ms.

Prints turns/s, time-to-placeholder and turn latency (p50/p99), the gateway's CPU per turn, and,
measured in the same run as the ceiling, a raw aiohttp web socket echo server's rate and latency.
The server runs in a child process (its own core); this process is the load generator.

    python bench/ws_bench.py [--conversations 50] [--turns 40] [--rate 700]
    python bench/ws_bench.py --memory-only [--help-visitors 3000]   # the /help memory line only
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ORIGIN = "http://127.0.0.1:8080"


# ---------------------------------------------------------------- servers (child process)


async def serve_gateway(data_dir: str) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # max_connections follows it
    from agent.providers.scripted import Reply, ScriptedProvider
    from bot.app import App
    from bot.config import load_config

    config_path = Path(data_dir) / "config.yaml"
    config_path.write_text(
        json.dumps(
            {
                "server": {"port": 0},
                "storage": {"path": str(Path(data_dir) / "bench.db")},
                "personas": {"dirs": [str(ROOT / "personas")]},
                "log": {"level": "WARNING"},
                "channels": {
                    "websocket": {
                        "rate_limit_per_minute": 1_000_000,
                        # the load comes from one address, thousands of sockets at once
                        "max_connections_per_address": 100_000,
                    }
                },
            }
        )
    )
    config = load_config(config_path, env={})
    provider = ScriptedProvider(lambda request: Reply("ok: " + request.messages[-1].content[:40]))
    provider.requests = _Discard()  # don't grow memory in a long run
    async with App(config, base_dir=Path(data_dir), provider=provider) as app:
        print(f"PORT {app.port}", flush=True)
        await app.wait()


class _Discard(list[Any]):
    def append(self, item: object) -> None:
        return None


async def serve_echo() -> None:
    from aiohttp import web

    async def handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            await ws.send_str(message.data)
        return ws

    app = web.Application()
    app.router.add_get("/ws", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"PORT {runner.addresses[0][1]}", flush=True)
    await asyncio.Future()


# ---------------------------------------------------------------- load (this process)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def idle_cost(session: aiohttp.ClientSession, url: str, pid: int, count: int) -> float:
    """Server memory per idle connection that said hello, asking for permessage-deflate as
    browsers do (the server declines it: its zlib state would cost ~100 KiB a socket)."""
    before = rss_bytes(pid)
    sockets = []
    for index in range(count):
        ws = await session.ws_connect(url, headers={"Origin": ORIGIN}, compress=15)
        await ws.send_str(json.dumps({"type": "hello", "visitor_id": f"idle-visitor-{index:05d}"}))
        await _until(ws, "ready")
        sockets.append(ws)
    await asyncio.sleep(0.5)
    cost = (rss_bytes(pid) - before) / count
    for ws in sockets:
        await ws.close()
    return cost


async def help_visitor_cost(
    session: aiohttp.ClientSession, url: str, pid: int, count: int
) -> float:
    """Server memory per visitor that said hello, asked for /help and left (no model call)."""

    async def visit(index: int) -> None:
        async with session.ws_connect(url, headers={"Origin": ORIGIN}) as ws:
            await ws.send_str(json.dumps({"type": "hello", "visitor_id": f"help-{index:06d}"}))
            await _until(ws, "ready")
            await ws.send_str(json.dumps({"type": "message", "text": "/help"}))
            await _until(ws, "message.completed")

    before = rss_bytes(pid)
    for start in range(0, count, 50):  # 50 visitors at a time
        await asyncio.gather(*(visit(i) for i in range(start, min(count, start + 50))))
    await asyncio.sleep(0.5)
    return (rss_bytes(pid) - before) / count


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(*args: str) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("PORT "):
        process.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return process, int(line.split()[1])


async def gateway_conversation(
    session: aiohttp.ClientSession,
    url: str,
    index: int,
    turns: int,
    placeholder: list[float],
    total: list[float],
    period_s: float = 0.0,
) -> None:
    """Turns one after another; with `period_s`, one turn every period (an open-loop rate)."""
    async with session.ws_connect(url, headers={"Origin": ORIGIN}) as ws:
        await ws.send_str(json.dumps({"type": "hello", "visitor_id": f"bench-visitor-{index:04d}"}))
        await _until(ws, "ready")
        next_at = time.perf_counter() + period_s * (index % 50) / 50  # spread the clients out
        for turn in range(turns):
            if period_s:
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
                next_at += period_s
            started = time.perf_counter()
            await ws.send_str(
                json.dumps(
                    {
                        "type": "message",
                        "text": f"hello {turn}",
                        "client_message_id": f"{index}-{turn}",
                    }
                )
            )
            await _until(ws, "message.created")
            placeholder.append(time.perf_counter() - started)
            await _until(ws, "message.completed")
            total.append(time.perf_counter() - started)


async def _until(ws: aiohttp.ClientWebSocketResponse, kind: str) -> dict[str, object]:
    while True:
        message = await ws.receive(timeout=30)
        if message.type != aiohttp.WSMsgType.TEXT:
            raise RuntimeError(f"socket closed: {message.type} {message.data!r}")
        frame: dict[str, object] = json.loads(message.data)
        if frame["type"] == kind:
            return frame
        if frame["type"] == "error":
            raise RuntimeError(f"server error: {frame}")


async def echo_conversation(
    session: aiohttp.ClientSession, url: str, turns: int, total: list[float]
) -> None:
    async with session.ws_connect(url) as ws:
        for turn in range(turns):
            started = time.perf_counter()
            await ws.send_str(json.dumps({"type": "message", "text": f"hello {turn}"}))
            message = await ws.receive(timeout=30)
            json.loads(message.data)
            total.append(time.perf_counter() - started)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def memory_only(visitors: int) -> None:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as data_dir:
        gateway, port = start_server("--serve-gateway", data_dir)
        try:
            async with aiohttp.ClientSession() as session:
                before = rss_bytes(gateway.pid)
                cost = await help_visitor_cost(
                    session, f"http://127.0.0.1:{port}/ws", gateway.pid, visitors
                )
                after = rss_bytes(gateway.pid)
        finally:
            gateway.terminate()
            gateway.wait(10)
    print(
        f"memory per idle visitor after /help, {visitors} visitors gone: {cost / 1024:.1f} KiB "
        f"each (server RSS {before / 2**20:.0f} -> {after / 2**20:.0f} MiB)"
    )


async def run(
    conversations: int,
    turns: int,
    solo_turns: int,
    idle_count: int,
    rate: float,
    help_visitors: int,
) -> None:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as data_dir:
        gateway, gateway_port = start_server("--serve-gateway", data_dir)
        echo, echo_port = start_server("--serve-echo")
        try:
            async with aiohttp.ClientSession() as session:
                # warm up: imports, the persona, the SQLite file
                await gateway_conversation(
                    session, f"http://127.0.0.1:{gateway_port}/ws", 9999, 3, [], []
                )
                solo_placeholder: list[float] = []
                solo: list[float] = []
                await gateway_conversation(
                    session,
                    f"http://127.0.0.1:{gateway_port}/ws",
                    5000,
                    solo_turns,
                    solo_placeholder,
                    solo,
                )
                placeholder: list[float] = []
                total: list[float] = []
                cpu_before = cpu_seconds(gateway.pid)
                started = time.perf_counter()
                await asyncio.gather(
                    *(
                        gateway_conversation(
                            session,
                            f"http://127.0.0.1:{gateway_port}/ws",
                            i,
                            turns,
                            placeholder,
                            total,
                        )
                        for i in range(conversations)
                    )
                )
                wall = time.perf_counter() - started
                cpu = cpu_seconds(gateway.pid) - cpu_before
                paced_placeholder: list[float] = []
                paced: list[float] = []
                await asyncio.gather(
                    *(
                        gateway_conversation(
                            session,
                            f"http://127.0.0.1:{gateway_port}/ws",
                            1000 + i,
                            turns,
                            paced_placeholder,
                            paced,
                            period_s=conversations / rate,
                        )
                        for i in range(conversations)
                    )
                )
                echo_total: list[float] = []
                echo_started = time.perf_counter()
                await asyncio.gather(
                    *(
                        echo_conversation(
                            session, f"http://127.0.0.1:{echo_port}/ws", turns * 3, echo_total
                        )
                        for _ in range(conversations)
                    )
                )
                echo_wall = time.perf_counter() - echo_started
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as unlimited:
                idle = await idle_cost(
                    unlimited, f"http://127.0.0.1:{gateway_port}/ws", gateway.pid, idle_count
                )
                help_cost = await help_visitor_cost(
                    unlimited, f"http://127.0.0.1:{gateway_port}/ws", gateway.pid, help_visitors
                )
        finally:
            gateway.terminate()
            echo.terminate()
            gateway.wait(10)
            echo.wait(10)
    first, last = solo[:100], solo[-100:]
    print(
        f"gateway: one conversation of {solo_turns} turns, scripted model at 0 ms (unloaded latency)"
    )
    print(
        f"  time to placeholder  p50  {pct(solo_placeholder, 0.5):8.2f} ms   p99 {pct(solo_placeholder, 0.99):8.2f} ms"
    )
    print(f"  turns 1-100          p50  {pct(first, 0.5):8.2f} ms   p99 {pct(first, 0.99):8.2f} ms")
    print(f"  last 100 turns       p50  {pct(last, 0.5):8.2f} ms   p99 {pct(last, 0.99):8.2f} ms")
    count = len(total)
    print(f"gateway: {conversations} conversations x {turns} turns, scripted model at 0 ms")
    print(f"  turns/s                   {count / wall:8.0f}")
    print(
        f"  time to placeholder  p50  {pct(placeholder, 0.5):8.2f} ms   p99 {pct(placeholder, 0.99):8.2f} ms"
    )
    print(f"  turn latency         p50  {pct(total, 0.5):8.2f} ms   p99 {pct(total, 0.99):8.2f} ms")
    print(f"  gateway CPU per turn      {cpu / count * 1000:8.2f} ms")
    print(f"gateway: the same {conversations} conversations paced at {rate:.0f} turns/s in all")
    print(
        f"  time to placeholder  p50  {pct(paced_placeholder, 0.5):8.2f} ms   p99 {pct(paced_placeholder, 0.99):8.2f} ms"
    )
    print(f"  turn latency         p50  {pct(paced, 0.5):8.2f} ms   p99 {pct(paced, 0.99):8.2f} ms")
    echo_count = len(echo_total)
    print(f"raw aiohttp echo (ceiling), same clients, {echo_count} round trips")
    print(f"  round trips/s             {echo_count / echo_wall:8.0f}")
    print(
        f"  latency              p50  {pct(echo_total, 0.5):8.2f} ms   p99 {pct(echo_total, 0.99):8.2f} ms"
    )
    print(
        f"idle connection (after hello), {idle_count} sockets: {idle / 1024:.1f} KiB each (server RSS)"
    )
    print(
        f"memory per idle visitor after /help, {help_visitors} visitors gone: "
        f"{help_cost / 1024:.1f} KiB each (server RSS)"
    )
    overhead_50 = pct(total, 0.5) - pct(echo_total, 0.5)
    overhead_99 = pct(total, 0.99) - pct(echo_total, 0.99)
    print(f"gateway overhead over echo  p50  {overhead_50:8.2f} ms   p99 {overhead_99:8.2f} ms")
    print(
        f"  (a turn is ~3 frames out, 1 in; the echo is 1 out, 1 in)  mean {statistics.mean(total) * 1000:.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--solo-turns", type=int, default=500)
    parser.add_argument("--rate", type=float, default=700, help="turns/s for the paced run")
    parser.add_argument(
        "--idle", type=int, default=1000, help="idle connections for the memory figure"
    )
    parser.add_argument(
        "--help-visitors", type=int, default=3000, help="visitors for the /help memory figure"
    )
    parser.add_argument("--memory-only", action="store_true", help="only the /help memory figure")
    parser.add_argument("--serve-gateway", metavar="DIR")
    parser.add_argument("--serve-echo", action="store_true")
    args = parser.parse_args()
    if args.serve_gateway:
        asyncio.run(serve_gateway(args.serve_gateway))
    elif args.serve_echo:
        asyncio.run(serve_echo())
    elif args.memory_only:
        asyncio.run(memory_only(args.help_visitors))
    else:
        asyncio.run(
            run(
                args.conversations,
                args.turns,
                args.solo_turns,
                args.idle,
                args.rate,
                args.help_visitors,
            )
        )


if __name__ == "__main__":
    main()
