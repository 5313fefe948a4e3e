"""Real `bot serve` processes: one alone, or several sharing one config (one SQLite file, one
Redis): start, read, stop."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tests.conftest import ORIGIN

ROOT = Path(__file__).resolve().parent.parent
SERVING = re.compile(r"serving http://([\d.]+):(\d+)")
START_S = 300.0  # until `bot serve` says where it serves


@dataclass
class Gateway:
    """One `bot serve`: its port and every line it logged so far."""

    process: asyncio.subprocess.Process
    port: int = 0
    host: str = "127.0.0.1"  # where it listens (`server.host`)
    log: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def logged(self, text: str) -> int:
        return sum(text in line for line in self.log)


def write_config(folder: Path, **sections: Any) -> Path:
    data: dict[str, Any] = {
        "server": {"port": 0},
        "storage": {"path": str(folder / "bot.db")},
        "personas": {"dirs": [str(ROOT / "personas")]},
        "llm": {"provider": "offline"},
    }
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    path = folder / "config.yaml"
    path.write_text(json.dumps(data))
    return path


async def _read(gateway: Gateway, stream: asyncio.StreamReader) -> None:
    while line := await stream.readline():
        gateway.log.append(line.decode(errors="replace"))


@asynccontextmanager
async def one_gateway(
    config: Path, env: Mapping[str, str], wrap: Sequence[str] = ()
) -> AsyncIterator[Gateway]:
    """`wrap`: a command prefix, such as `ip netns exec <name>` to run it on another "host"."""
    process = await asyncio.create_subprocess_exec(
        *wrap,
        sys.executable,
        "-m",
        "bot",
        "serve",
        "--config",
        str(config),
        cwd=config.parent,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **env},
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    gateway = Gateway(process)
    reader = asyncio.create_task(_read(gateway, process.stderr))
    try:
        # a hang guard: a start has taken over 120 s under `stress --cpu 4` on a shared 2-core box
        async with asyncio.timeout(START_S):
            while not (found := next(filter(None, map(SERVING.search, gateway.log)), None)):
                assert not reader.done(), "bot serve ended:\n" + "".join(gateway.log)
                await asyncio.sleep(0.05)
        gateway.host, gateway.port = found.group(1), int(found.group(2))
        yield gateway
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(20):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
        await reader


@asynccontextmanager
async def gateways(
    count: int, config: Path, env: Mapping[str, str]
) -> AsyncIterator[list[Gateway]]:
    """`count` processes on one config, stopped with SIGTERM. The first starts alone, then the
    others together (processes creating one new SQLite file at once: test_storage_first_open)."""
    async with AsyncExitStack() as stack:
        first = await stack.enter_async_context(one_gateway(config, env))
        others = await asyncio.gather(
            *(stack.enter_async_context(one_gateway(config, env)) for _ in range(count - 1))
        )
        yield [first, *others]


@asynccontextmanager
async def logging_serve(
    until: re.Pattern[str],
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    log: list[str] | None = None,
) -> AsyncIterator[re.Match[str]]:
    """`bot serve ARGS` in a child process (no config file needed), until a line of its log
    matches `until` (the match is yielded; `log`: a list that gets the lines read until then);
    then SIGTERM, and it must exit cleanly."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "serve",
        *args,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **(env or {})},
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    log = [] if log is None else log
    try:
        async with asyncio.timeout(30):
            while not (found := until.search(log[-1] if log else "")):
                line = (await process.stderr.readline()).decode()
                assert line, f"bot serve ended before logging {until.pattern!r}:\n" + "".join(log)
                log.append(line)
        yield found
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            await process.stderr.read()
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@asynccontextmanager
async def serving(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None
) -> AsyncIterator[int]:
    """`bot serve ARGS` in a child process; yields the port its log says it serves on."""
    async with logging_serve(SERVING, *args, cwd=cwd, env=env) as found:
        yield int(found.group(2))


def joined_logs(gateways: Iterable[Gateway]) -> str:
    """Every line the processes logged, each tagged `[n]` with its process's index: for the
    message of a failed multi-process test."""
    return "".join(f"[{n}] {line}" for n, g in enumerate(gateways) for line in g.log)


HERE = "a turn of"  # drain.py's debug line, logged by the process that runs a turn
Frame = dict[str, Any]


async def frames_until(
    ws: aiohttp.ClientWebSocketResponse, done: Callable[[Frame], bool], timeout: float = 60
) -> list[Frame]:
    """The frames a web socket client receives, up to the first one `done` accepts."""
    seen: list[Frame] = []
    async with asyncio.timeout(timeout):
        while not seen or not done(seen[-1]):
            seen.append(await ws.receive_json())
    return seen


async def open_tab(
    session: aiohttp.ClientSession, gateway: Gateway, visitor_id: str
) -> aiohttp.ClientWebSocketResponse:
    """A widget-like web socket on `gateway`: its hello sent, its `ready` received."""
    tab = await session.ws_connect(f"{gateway.url}/ws", headers={"Origin": ORIGIN})
    await tab.send_json({"type": "hello", "visitor_id": visitor_id})
    await frames_until(tab, lambda f: f["type"] == "ready")
    return tab


async def resumed_tab(
    session: aiohttp.ClientSession,
    gateway: Gateway,
    visitor_id: str,
    placeholder: Frame,
    timeout: float = 60,
) -> list[Frame]:
    """A new tab of the visitor on `gateway`, resuming after `placeholder` (its `created`
    frame): the frames it receives, `ready` first, up to that message's `completed`."""
    tab = await session.ws_connect(f"{gateway.url}/ws", headers={"Origin": ORIGIN})
    hello = {"type": "hello", "visitor_id": visitor_id, "resume_after": placeholder["seq"]}
    await tab.send_json(hello)
    frames = await frames_until(
        tab,
        lambda f: f["type"] == "message.completed" and f["message_id"] == placeholder["message_id"],
        timeout,
    )
    await tab.close()
    return frames
