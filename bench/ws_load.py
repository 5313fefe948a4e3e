"""The pieces of bench/ws_bench.py: its server children, the web socket load and the measures.

This file is also the children's entry point (`--serve-gateway`, `--serve-echo`). The gateway
child answers CPU probes on its stdin (one line in, its `time.process_time()` out): the kernel's
tick counter has 10 ms steps, too coarse for 100 turns of about a millisecond.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, get_args

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fake_llm_server import answer_pieces
from bot.runtime import event_loop
from bot.runtime.event_loop import EventLoopChoice

ORIGIN = "http://127.0.0.1:8080"
LOG_ENV = "BENCH_LOG"  # the gateway's log level (DEBUG, INFO, WARNING); unset: its default


@dataclass(frozen=True)
class Cores:
    """Comma-separated CPU lists: the server child's and everyone else's ("": not pinned)."""

    server: str = ""
    others: str = ""


def pin_cores() -> Cores:
    """Keep the last allowed CPU for the server child; this process moves to the others."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return Cores()  # one core: nothing to keep apart
    others = allowed[:-1]
    os.sched_setaffinity(0, set(others))
    return Cores(str(allowed[-1]), ",".join(map(str, others)))


def pin_self(cpus: str) -> None:
    if cpus:
        os.sched_setaffinity(0, {int(cpu) for cpu in cpus.split(",")})


# ---------------------------------------------------------------- servers (child processes)


def gateway_config(data_dir: str, llm: dict[str, Any] | None) -> Path:
    config: dict[str, Any] = {
        "server": {"port": 0},
        "storage": {"path": str(Path(data_dir) / "bench.db")},
        "personas": {"dirs": [str(ROOT / "personas")]},
        "channels": {
            "websocket": {
                "rate_limit_per_minute": 1_000_000,
                # the load comes from one address, thousands of sockets at once
                "max_connections_per_address": 100_000,
            }
        },
    }
    if llm is not None:
        config["llm"] = llm
    if LOG_ENV in os.environ:  # else the default level: a default deployment pays its logging
        config["log"] = {"level": os.environ[LOG_ENV]}
    path = Path(data_dir) / "config.yaml"
    path.write_text(json.dumps(config))
    return path


async def serve_gateway(data_dir: str, llm: dict[str, Any] | None, answer: list[str]) -> None:
    """The real app; `llm` None: the in-process scripted model answering `answer` (or an echo)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # max_connections follows it
    from agent.providers.base import Provider
    from agent.providers.scripted import Reply, ScriptedProvider
    from bot.runtime.app import App
    from bot.runtime.config import load_config
    from bot.runtime.heap import settle_heap
    from bot.runtime.logs import setup_logging

    # the key comes from the environment, as the config check asks of secrets
    config = load_config(gateway_config(data_dir, llm), env={"BENCH_LLM_KEY": "bench-key"})
    # as `bot serve` logs (bot/runtime/cli.py), into the log file the child's stderr is
    setup_logging(config.log.level, config.log.format, secrets=["bench-key"])
    provider: Provider | None = None
    if llm is None:
        text = "".join(answer)
        scripted = ScriptedProvider(
            lambda request: (
                Reply(text, chunks=len(answer))
                if answer
                else Reply("ok: " + request.messages[-1].content[:40])
            )
        )
        scripted.requests = _Discard()  # don't grow memory in a long run
        provider = scripted
    threading.Thread(target=_answer_cpu_probes, daemon=True).start()
    async with App(config, base_dir=Path(data_dir), provider=provider) as app:
        settle_heap()  # as `bot serve` does, and each collection's pause in /metrics
        print(f"PORT {app.port}", flush=True)
        with app.ops.collections_watched():
            await app.wait()


def _answer_cpu_probes() -> None:
    for _ in sys.stdin:
        print(f"CPU {time.process_time()}", flush=True)


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


def start_gateway(
    data_dir: str,
    cpu: str,
    llm: str = "",
    deltas: int = 0,
    env: dict[str, str] | None = None,
    wrap: tuple[str, ...] = (),
) -> Server:
    """The gateway child: `llm` is the JSON of an `llm` config section, "" the scripted model
    (answering `deltas` pieces of fake_llm_server's text, or with 0 an echo of the message);
    `env`: variables to set for it (BOT_METRICS=off, say); `wrap`: a command it runs under
    (valgrind). Its log (stderr) is `gateway.log` in `data_dir`."""
    argv = ["--serve-gateway", data_dir, "--llm", llm, "--deltas", str(deltas), "--cpu", cpu]
    return Server(__file__, *argv, env=env, log=Path(data_dir) / "gateway.log", wrap=wrap)


def start_echo(cpu: str) -> Server:
    return Server(__file__, "--serve-echo", "--cpu", cpu)


def ask(process: subprocess.Popen[str], line: str = "") -> str:
    """Write `line` to a child's stdin and return the line it answers with."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(line + "\n")
    process.stdin.flush()
    return process.stdout.readline()


class Server:
    """A child process that prints `PORT <n>` when it listens; `cpu()` probes a gateway child.
    `log`: a file its stderr goes to (a deployment's log is a file or a pipe, not a terminal);
    its end is shown if the child does not start."""

    def __init__(
        self,
        *argv: str,
        env: dict[str, str] | None = None,
        log: Path | None = None,
        wrap: tuple[str, ...] = (),
    ) -> None:
        with open(log, "w") if log is not None else contextlib.nullcontext() as stderr:
            self.process = subprocess.Popen(
                [*wrap, sys.executable, *argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=ROOT,
                env=os.environ | (env or {}),
            )
        line = self._readline()
        if not line.startswith("PORT "):
            self.process.kill()
            tail = log.read_text()[-3000:] if log is not None else ""
            raise SystemExit(f"{argv[0]} did not start: {line!r}\n{tail}")
        self.port = int(line.split()[1])
        self.pid = self.process.pid

    def _readline(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline()

    def cpu(self) -> float:
        """The gateway child's CPU seconds so far (all its threads)."""
        return float(ask(self.process).split()[1])

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


# ---------------------------------------------------------------- load (this process)


def run_queue_wait(pid: int) -> float:
    """Seconds the threads of `pid` have waited, runnable, for a CPU (/proc schedstat): time
    other processes held the gateway's core, which no change of ours shortens."""
    waited = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            waited += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return waited / 1e9


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


async def gateway_conversation(
    session: aiohttp.ClientSession,
    url: str,
    index: int,
    turns: int,
    placeholder: list[float],
    total: list[float],
    period_s: float = 0.0,
    before_turn: Callable[[int], None] | None = None,
) -> None:
    """Turns one after another; with `period_s`, one turn every period (an open-loop rate).
    `before_turn(n)` runs before turn n and, with n == turns, after the last."""
    async with session.ws_connect(url, headers={"Origin": ORIGIN}) as ws:
        await ws.send_str(json.dumps({"type": "hello", "visitor_id": f"bench-visitor-{index:04d}"}))
        await _until(ws, "ready")
        next_at = time.perf_counter() + period_s * (index % 50) / 50  # spread the clients out
        for turn in range(turns):
            if period_s:
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
                next_at += period_s
            if before_turn is not None:
                before_turn(turn)
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
        if before_turn is not None:
            before_turn(turns)


async def _until(ws: aiohttp.ClientWebSocketResponse, kind: str) -> dict[str, object]:
    while True:
        message = await ws.receive(timeout=300)  # an unfixed provider's 1,000th turn is slow
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


LOOP_ENV = "WS_BENCH_LOOP"  # the gateway child's loop: auto (as `bot serve`), asyncio or uvloop


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    choice = os.environ.get(LOOP_ENV, "auto")
    if choice not in get_args(EventLoopChoice):
        raise SystemExit(f"{LOOP_ENV}={choice!r}: expected one of {get_args(EventLoopChoice)}")
    return event_loop.loop_factory(cast(EventLoopChoice, choice))


def main() -> None:
    parser = argparse.ArgumentParser(description="a server child of bench/ws_bench.py")
    parser.add_argument("--serve-gateway", metavar="DIR")
    parser.add_argument("--llm", default="", help="the llm config section as JSON")
    parser.add_argument("--deltas", type=int, default=0)
    parser.add_argument("--serve-echo", action="store_true")
    parser.add_argument("--cpu", default="", help="comma-separated CPUs to pin this process to")
    args = parser.parse_args()
    pin_self(args.cpu)
    if args.serve_gateway:
        llm = json.loads(args.llm) if args.llm else None
        answer = answer_pieces(args.deltas) if args.deltas else []
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(serve_gateway(args.serve_gateway, llm, answer))
    elif args.serve_echo:
        asyncio.run(serve_echo())
    else:
        parser.error("--serve-gateway DIR or --serve-echo")


if __name__ == "__main__":
    main()
