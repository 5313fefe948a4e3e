"""MCP servers as real children: one over stdio (under the guard), one over Streamable HTTP on
loopback, both written with the SDK's server API (tests/mcp_servers/demo.py). Killed mid-call,
restarted, never answering, down at start, stopped mid-call: the gateway's side copes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tools.base import ToolContext, ToolError
from tools.mcp.server import McpServer
from tools.mcp.settings import McpServerConfig
from tools.registry import ToolRegistry

pytestmark = pytest.mark.process
ROOT = Path(__file__).resolve().parent.parent
DEMO = str(ROOT / "tests" / "mcp_servers" / "demo.py")
WAIT_S = 60  # a hang guard on a loaded machine, never a speed bound
CTX = ToolContext("u1")


def stdio(log: Path, *extra: str, **changes: Any) -> McpServerConfig:
    args = [DEMO, "--log", str(log), *extra]
    return McpServerConfig(command=sys.executable, args=args, **changes)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def running(source: McpServer) -> AsyncIterator[McpServer]:
    runner = asyncio.create_task(source.run())
    try:
        yield source
    finally:
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner


async def until(source: McpServer, phase: str) -> None:
    async with asyncio.timeout(WAIT_S):
        await source.wait_for(lambda s: s.phase == phase)


async def logged(log: Path, text: str) -> None:
    async with asyncio.timeout(WAIT_S):
        # a child's log file: no event carries it
        while not log.exists() or text not in log.read_text():  # noqa: ASYNC110
            await asyncio.sleep(0.02)


@asynccontextmanager
async def http_server(
    port: int, log: Path, transport: str = "--http", *extra: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, DEMO, transport, str(port), "--log", str(log), *extra
    )
    try:
        async with asyncio.timeout(WAIT_S):
            while True:
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.close()
                    break
                except OSError:
                    await asyncio.sleep(0.05)
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead: its parent just has not reaped it yet
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


async def test_stdio_child_gets_only_its_configured_environment(tmp_path: Path) -> None:
    os.environ["GATEWAY_SECRET"] = "s3cret"  # the gateway's own: must not reach the child
    try:
        config = stdio(tmp_path / "log", env={"GREETING": "hi"})
        async with running(McpServer("demo", config)) as source:
            await until(source, "ready")
            who = json.loads((await source.call("mcp__demo__whoami", {}, CTX)).text)
    finally:
        del os.environ["GATEWAY_SECRET"]
    env = who["env"]
    env.pop("LC_CTYPE", None)  # Python's own locale coercion in the child
    assert env == {"GREETING": "hi", "PATH": os.environ["PATH"]}


async def test_stdio_server_killed_mid_call_is_a_tool_error_then_reconnects(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log"
    async with running(McpServer("demo", stdio(log), backoff_s=(0.1, 1))) as source:
        await until(source, "ready")
        tools = [info.name for info in source.tools()]
        version = source.version
        first = json.loads((await source.call("mcp__demo__whoami", {}, CTX)).text)["pid"]
        call = asyncio.create_task(source.call("mcp__demo__slow", {"seconds": 600}, CTX))
        await logged(log, f"slow started {first}")
        os.kill(first, signal.SIGKILL)
        with pytest.raises(ToolError, match="demo/slow: Connection closed|lost the connection"):
            async with asyncio.timeout(WAIT_S):
                await call
        await until(source, "down")
        await until(source, "ready")
        second = json.loads((await source.call("mcp__demo__whoami", {}, CTX)).text)["pid"]
        assert second != first
        assert [info.name for info in source.tools()] == tools and source.version == version


async def test_a_server_that_never_answers_meets_our_connect_deadline(tmp_path: Path) -> None:
    # a program that reads stdin and never writes: the SDK alone would wait 16 s per attempt
    config = McpServerConfig(
        command=sys.executable,
        args=["-c", "import time; time.sleep(600)"],
        connect_timeout_s=0.5,
    )
    async with running(McpServer("mute", config, backoff_s=(30, 30))) as source:
        await until(source, "down")
        assert "no answer within the deadline" in source.state.reason
        with pytest.raises(ToolError, match="MCP server 'mute' is down"):
            await source.call("mcp__mute__x", {}, CTX)


async def test_a_missing_command_says_so(tmp_path: Path) -> None:
    config = McpServerConfig(command="no-such-mcp-server-here")
    async with running(McpServer("gone", config, backoff_s=(30, 30))) as source:
        await until(source, "down")
    assert "command 'no-such-mcp-server-here' not found on PATH" in source.state.reason


async def test_http_server_down_at_start_is_picked_up_restarted_keeps_its_tools(
    tmp_path: Path,
) -> None:
    port, log = free_port(), tmp_path / "log"
    config = McpServerConfig(url=f"http://127.0.0.1:{port}/mcp", call_timeout_s=10)
    async with running(McpServer("web", config, backoff_s=(0.1, 0.5))) as source:
        await until(source, "down")  # nothing listens yet: the gateway goes on
        with pytest.raises(ToolError, match="MCP server 'web' is down: cannot connect"):
            await source.call("mcp__web__add", {"a": 1, "b": 2}, CTX)
        async with http_server(port, log):
            await until(source, "ready")
            assert (await source.call("mcp__web__add", {"a": 1, "b": 2}, CTX)).text == "3"
            tools, version = source.state.tools, source.version
        async with http_server(port, log):  # the same server, restarted
            for _ in range(3):  # the first call may find the old connection gone
                try:
                    result = await source.call("mcp__web__add", {"a": 2, "b": 2}, CTX)
                    break
                except ToolError:
                    await until(source, "ready")
            assert result.text == "4"
            assert source.state.tools == tools and source.version == version


async def test_http_call_stopped_mid_way_is_cancelled_on_the_server(tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "log"
    config = McpServerConfig(url=f"http://127.0.0.1:{port}/mcp", call_timeout_s=0.5)
    async with http_server(port, log), running(McpServer("web", config)) as source:
        await until(source, "ready")
        registry = ToolRegistry(sources=[source], pii=None)
        result = await registry.call(
            "mcp__web__slow", {"seconds": 600}, CTX, allowed=registry.names(), timeout_s=60
        )
        assert result.text == "tool mcp__web__slow timed out after 0.5 s"
        await logged(log, "cancelled slow")
        assert (await source.call("mcp__web__add", {"a": 5, "b": 5}, CTX)).text == "10"


async def test_a_legacy_sse_server_works_too(tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "log"
    config = McpServerConfig(url=f"http://127.0.0.1:{port}/sse", sse=True, headers={"X-A": "b"})
    async with http_server(port, log, "--sse"), running(McpServer("old", config)) as source:
        await until(source, "ready")
        assert source.state.protocol == "2025-11-25" and source.state.transport == "sse"
        assert (await source.call("mcp__old__add", {"a": 20, "b": 22}, CTX)).text == "42"


async def test_stdio_call_stopped_mid_way_is_cancelled_on_the_server(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with running(McpServer("demo", stdio(log))) as source:
        await until(source, "ready")
        call = asyncio.create_task(source.call("mcp__demo__slow", {"seconds": 600}, CTX))
        await logged(log, "slow started")
        call.cancel()  # what TaskStop and /stop do to a running tool call
        with pytest.raises(asyncio.CancelledError):
            await call
        await logged(log, "cancelled slow")


async def test_shutdown_ends_the_child_and_what_it_started(tmp_path: Path) -> None:
    log = tmp_path / "log"
    async with running(McpServer("demo", stdio(log, "--child"))) as source:
        await until(source, "ready")
        await logged(log, "child ")
        server = json.loads((await source.call("mcp__demo__whoami", {}, CTX)).text)["pid"]
    grandchild = int(log.read_text().split("child ")[1].split()[0])
    async with asyncio.timeout(WAIT_S):
        while pid_alive(server) or pid_alive(grandchild):  # noqa: ASYNC110 - other processes
            await asyncio.sleep(0.05)


def test_bot_mcp_list_and_check_say_how_each_server_is(tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}/mcp"
    config = tmp_path / "config.yaml"
    servers = {
        "demo": {"command": sys.executable, "args": [DEMO], "exclude": ["fail", "slow"]},
        "away": {"url": nowhere, "connect_timeout_s": 1},
        "off": {"url": nowhere, "enabled": False},
    }
    config.write_text(json.dumps({"mcp": {"servers": servers}}))

    def bot(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "bot", "mcp", *args, "--config", str(config)]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)

    listed = bot("list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("demo (stdio): ready, 4 tools, protocol ")
    assert lines[1:5] == [
        "  mcp__demo__add",
        "  mcp__demo__delete_file",
        "  mcp__demo__whoami",
        "  mcp__demo__picture",
    ]
    assert lines[5].startswith("away (http): down: cannot connect")
    assert bot("check", "demo").returncode == 0
    one = bot("list", "away")
    assert one.returncode == 0 and one.stdout.startswith("away (http): down: cannot connect")
    assert "demo" not in one.stdout
    away = bot("check", "away")
    assert away.returncode == 1 and "away (http): down: cannot connect" in away.stdout
    off = bot("check", "off")
    assert off.returncode == 1 and off.stdout == "off: disabled (enabled: false)\n"
    unknown = bot("check", "nope")
    assert unknown.returncode == 2 and "mcp.servers: no server 'nope'" in unknown.stderr
