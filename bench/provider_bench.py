"""Benchmark: the provider layer's own cost per model call, against a fake model that answers at once.

A child process serves the fake Anthropic and OpenAI APIs (tests/fake_*.py, real SSE wire format).
This process makes sequential model calls three ways, each on its own kept-alive connection:
  raw   aiohttp POST of the same request body, reading the whole SSE body (the floor);
  sdk   the official SDK alone: `create(stream=True)` (its request transform included) and
        iterating its parsed events;
  ours  the app's provider from `build_provider` (retry/fallback layer, tool mode, vendor
        module, SDK), consuming our events.
It prints wall time p50/p99 and this process's CPU per call; ours minus raw is the layer's cost.
Then `ours` again with long histories (`--history`, short messages and tool rounds), with how often
the SDK's request transform ran: a call should cost the same at 1,000 messages as at 10.

`--instructions` prints instead the instructions per `ours` call counted by valgrind's callgrind
(only while the calls run, after a warm-up): unlike CPU time, the same on a busy machine from run
to run (±0.5 %), so it shows small changes. It takes ~30 s a vendor. With `--history`, it also
counts calls with those long histories: whether a call costs the same at 2,000 messages as at 10
(but for the bytes sent), which CPU time on a shared machine is too noisy to show.

    python bench/provider_bench.py [--calls 300] [--deltas 40] [--history 10,1000] [--uvloop]
    python bench/provider_bench.py --instructions [--calls 100] [--deltas 5] [--history 10,2000]

`--uvloop` runs this process on uvloop (`pip install uvloop` first; not a dependency).
`--public` makes `ours` send through the SDKs' public `post()` instead of their internals
(BOT_SDK_INTERNALS=off, agent/providers/door.py): what a release that changed them costs.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


async def serve(deltas: int) -> None:
    from tests.fake_anthropic import FakeAnthropic
    from tests.fake_llm import Call, Reply
    from tests.fake_openai import FakeOpenAI

    def script(body: dict[str, Any]) -> Reply:
        if body.get("metadata", {}).get("tool") or "tool please" in json.dumps(
            body["messages"][-1]
        ):
            return Reply(
                text=["Checking. "],
                calls=[Call("get_current_datetime", '{"timezone": "Europe/Berlin"}')],
            )
        return Reply(text=[f"word{i} " for i in range(deltas)])

    async with FakeAnthropic(script=script) as anthropic, FakeOpenAI(script=script) as openai:
        anthropic.requests = _Discard()
        openai.requests = _Discard()
        print(f"PORTS {anthropic.port} {openai.port}", flush=True)
        await asyncio.Future()


class _Discard(list[Any]):
    def append(self, item: object) -> None:
        return None


def _request(tool: bool) -> Any:
    from agent.types import Message, ModelRequest
    from tools.builtin import builtin_registry

    registry = builtin_registry()
    history = []
    for n in range(5):
        history += [
            Message("user", f"question {n} " * 20),
            Message("assistant", f"answer {n} " * 40),
        ]
    last = "tool please" if tool else "tell me something"
    system = (ROOT / "personas" / "default.md").read_text()
    return ModelRequest(system, (*history, Message("user", last)), registry.specs(registry.names()))


def _long_request(size: int) -> Any:
    """`size` history messages of a chatty conversation: short turns, every fifth a tool round."""
    from agent.types import Message, ModelRequest, ToolCall

    history: list[Message] = []
    while len(history) < size - 1:
        n = len(history)
        history.append(Message("user", f"question {n}: what about this one?"))
        if n % 5 == 0:
            call = ToolCall(f"call_{n}", "get_current_datetime", '{"timezone": "Europe/Berlin"}')
            history.append(Message("assistant", "Checking.", (call,)))
            history.append(
                Message("tool", "2026-11-30T16:00", tool_call_id=call.id, name=call.name)
            )
        history.append(Message("assistant", f"answer {n}: it depends, as always."))
    history = history[: size - 1]
    return ModelRequest("You are terse.", (*history, Message("user", "tell me something")))


class _Counted:
    """Counts calls to (and time in) an SDK function the vendor module may call per request."""

    def __init__(self, module: Any, name: str) -> None:
        self.module, self.name, self.calls, self.seconds = module, name, 0, 0.0
        self.original = getattr(module, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            start = time.process_time()
            try:
                return await self.original(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - start

        setattr(module, name, counted)


ENV: dict[str, str] = {}  # build_provider's environment: --public sets BOT_SDK_INTERNALS=off


async def history_rows(ports: dict[str, int], calls: int, sizes: list[int]) -> None:
    from openai.resources.chat.completions import completions

    from agent.providers import build_provider
    from bot.runtime.config import LLMConfig

    transform = _Counted(completions, "async_maybe_transform")
    print(f"\n{'vendor':9} {'history':>7} {'p50 ms':>7} {'p99 ms':>7} {'cpu ms/call':>11}"
          f" {'transforms/call':>15} {'transform ms/call':>17}")  # fmt: skip
    for vendor, port in ports.items():
        base = f"http://127.0.0.1:{port}" + ("/v1" if vendor == "openai" else "")
        llm = LLMConfig(provider=vendor, base_url=base, api_key="test-key", model="bench-model")
        provider = build_provider(llm, env=ENV)
        for size in sizes:
            request = _long_request(size)
            transform.calls, transform.seconds = 0, 0.0
            p50, p99, cpu = await _measure(functools.partial(_ours, provider, request), calls)
            per = calls + 20  # _measure warms up with 20 calls
            print(f"{vendor:9} {size:7} {p50:7.2f} {p99:7.2f} {cpu:11.2f} {transform.calls / per:15.1f}"
                  f" {transform.seconds * 1000 / per:17.2f}")  # fmt: skip
        await provider.aclose()  # type: ignore[attr-defined]


async def _measure(fn: Callable[[], Awaitable[None]], calls: int) -> tuple[float, float, float]:
    for _ in range(20):
        await fn()  # warm up: connections, imports, caches
    walls = []
    cpu = time.process_time()
    for _ in range(calls):
        start = time.perf_counter()
        await fn()
        walls.append(time.perf_counter() - start)
    cpu = (time.process_time() - cpu) / calls
    walls.sort()
    return statistics.median(walls) * 1000, walls[int(len(walls) * 0.99) - 1] * 1000, cpu * 1000


def _body(vendor: str, request: Any) -> dict[str, Any]:
    """The JSON body our provider sends for `request` (tools included), for the raw and SDK rows."""
    from agent.providers.anthropic_wire import to_anthropic
    from agent.providers.openai_wire import to_openai

    specs = request.tools
    if vendor == "anthropic":
        tools = [
            {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
            for t in specs
        ]
        return {"model": "bench-model", "max_tokens": request.max_tokens, "system": request.system,
                "messages": to_anthropic(request.messages), "tools": tools, "stream": True}  # fmt: skip
    tools = [{"type": "function", "function": {"name": t.name, "description": t.description,
              "parameters": dict(t.parameters)}} for t in specs]  # fmt: skip
    return {"model": "bench-model", "messages": to_openai(request.system, request.messages), "tools": tools,
            "max_tokens": request.max_tokens, "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip


async def _raw(http: Any, url: str, body: dict[str, Any]) -> None:
    async with http.post(url, json=body, headers={"Authorization": "Bearer test-key"}) as response:
        await response.read()


async def _sdk(create: Callable[..., Awaitable[Any]], body: dict[str, Any]) -> None:
    async for _ in await create(**body):
        pass


async def _ours(provider: Any, request: Any) -> None:
    async for _ in provider.stream(request):
        pass


async def bench(ports: dict[str, int], calls: int) -> None:
    import aiohttp

    from agent.providers import build_provider
    from bot.runtime.config import LLMConfig

    print(f"{'vendor':9} {'reply':5} {'way':5} {'p50 ms':>7} {'p99 ms':>7} {'cpu ms/call':>11}")
    async with aiohttp.ClientSession() as http:
        for vendor, port in ports.items():
            base = f"http://127.0.0.1:{port}" + ("/v1" if vendor == "openai" else "")
            llm = LLMConfig(provider=vendor, base_url=base, api_key="test-key", model="bench-model")
            provider = build_provider(llm, env=ENV)
            sdk = provider.chain[0].inner._client  # type: ignore[attr-defined]
            if vendor == "anthropic":
                url, create = f"{base}/v1/messages", sdk.messages.create
            else:
                url, create = f"{base}/chat/completions", sdk.chat.completions.create
            for reply in ("text", "tool"):
                request = _request(reply == "tool")
                body = _body(vendor, request)
                ways = {
                    "raw": functools.partial(_raw, http, url, body),
                    "sdk": functools.partial(_sdk, create, body),
                    "ours": functools.partial(_ours, provider, request),
                }
                results = {}
                for way, fn in ways.items():
                    results[way] = p50, p99, cpu = await _measure(fn, calls)
                    print(f"{vendor:9} {reply:5} {way:5} {p50:7.2f} {p99:7.2f} {cpu:11.2f}")
                layer = [results["ours"][i] - results["raw"][i] for i in (0, 2)]
                own = [results["ours"][i] - results["sdk"][i] for i in (0, 2)]
                print(f"{'':15} provider layer vs raw: p50 +{layer[0]:.2f} ms, cpu +{layer[1]:.2f} ms/call;"
                      f" our code alone (vs SDK): p50 +{own[0]:.2f} ms, cpu +{own[1]:.2f} ms/call")  # fmt: skip
            await provider.aclose()  # type: ignore[attr-defined]


def instructions(ports: dict[str, int], calls: int, sizes: list[int]) -> None:
    """Each vendor's `ours` call in a child under callgrind, counting only the measured calls:
    the short request, then one with each history size in `sizes`."""
    for vendor, port in ports.items():
        for size in [0, *sizes]:
            child = subprocess.run(
                ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null",
                 sys.executable, __file__, "--count", vendor, str(port), "--calls", str(calls),
                 "--history", str(size), *(["--public"] if ENV else [])],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            counted = re.search(r"Collected : (\d+)", child.stderr)
            if child.returncode or counted is None:
                raise SystemExit(f"callgrind run failed: {child.stderr[-2000:]}")
            what = f"history {size:5}" if size else "short request"
            millions = int(counted.group(1)) / calls / 1e6
            print(f"{vendor:9} ours, {what}: {millions:6.2f} M instructions/call")


async def count(vendor: str, port: int, calls: int, size: int) -> None:
    """The child of `instructions`: warm up, then make `calls` calls with counting switched on;
    `size` 0: the short request, else a history of that many messages."""
    from agent.providers import build_provider
    from bot.runtime.config import LLMConfig

    base = f"http://127.0.0.1:{port}" + ("/v1" if vendor == "openai" else "")
    llm = LLMConfig(provider=vendor, base_url=base, api_key="test-key", model="bench-model")
    provider = build_provider(llm, env=ENV)
    request = _long_request(size) if size else _request(False)
    for _ in range(20):
        await _ours(provider, request)
    toggle = ["callgrind_control", "--instr=on", str(os.getpid())]
    subprocess.run(toggle, stdout=subprocess.DEVNULL, check=True)  # noqa: ASYNC221 (the loop waits)
    for _ in range(calls):
        await _ours(provider, request)
    toggle[1] = "--instr=off"
    subprocess.run(toggle, stdout=subprocess.DEVNULL, check=True)  # noqa: ASYNC221 (the loop waits)
    await provider.aclose()  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--deltas", type=int, default=40, help="text deltas in a streamed answer")
    parser.add_argument(
        "--history", help="history sizes for the long rows (10,1000; with --instructions: none)"
    )
    parser.add_argument("--uvloop", action="store_true", help="this process on uvloop (installed)")
    parser.add_argument("--instructions", action="store_true", help="callgrind counts per call")
    parser.add_argument("--public", action="store_true", help="ours through the SDKs' public API")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--count", nargs=2, metavar=("VENDOR", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.public:
        from agent.providers.door import INTERNALS_VARIABLE

        ENV[INTERNALS_VARIABLE] = "off"
    if args.serve:
        asyncio.run(serve(args.deltas))
        return
    if args.count:
        asyncio.run(count(args.count[0], int(args.count[1]), args.calls, int(args.history or 0)))
        return
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--deltas", str(args.deltas)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = child.stdout.readline() if child.stdout else ""
        if not line.startswith("PORTS "):
            raise SystemExit(f"fake server did not start: {line!r}")
        a, o = line.split()[1:]
        print(
            f"{args.calls} sequential calls per row; answer = {args.deltas} text deltas; tool = text + 1 call"
        )
        ports = {"anthropic": int(a), "openai": int(o)}
        if args.instructions:
            instructions(
                ports, args.calls, [int(size) for size in (args.history or "").split(",") if size]
            )
            return
        factory = None
        if args.uvloop:  # measured, not adopted: uvloop is not a dependency
            import uvloop  # type: ignore[import-not-found, unused-ignore]

            factory = uvloop.new_event_loop
            print("event loop: uvloop")
        sizes = [int(size) for size in (args.history or "10,1000").split(",") if size]
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(bench(ports, args.calls))
            runner.run(history_rows(ports, args.calls, sizes))
    finally:
        child.terminate()
        child.wait()


if __name__ == "__main__":
    main()
