"""MCP servers as tool sources, against an in-process server (the SDK's `MCPServer`): names,
schemas, annotations, results as parts, errors, deadlines and cancellation through the registry,
persona patterns, list changes. Real children and HTTP: tests/test_mcp_servers.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
from mcp.server.mcpserver import Context, MCPServer

from bot.ops.metrics import Metrics
from tests.blob_kit import MemoryBlobs
from tests.mcp_servers.demo import build
from tools.base import ToolContext, ToolDeps
from tools.mcp.names import tool_name
from tools.mcp.schema import normalise
from tools.mcp.server import McpServer
from tools.mcp.settings import McpServerConfig
from tools.registry import ToolRegistry

CONFIG = McpServerConfig(url="http://127.0.0.1:1/mcp", call_timeout_s=5)


def in_process(server: MCPServer) -> Any:
    async def target(stack: AsyncExitStack, ended: asyncio.Event) -> MCPServer:
        return server

    return target


async def started(source: McpServer) -> AsyncIterator[McpServer]:
    runner = asyncio.create_task(source.run())
    try:
        async with asyncio.timeout(30):
            await source.wait_for(lambda s: s.phase != "connecting")
        yield source
    finally:
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner


@pytest.fixture
async def demo(tmp_path: Any) -> AsyncIterator[McpServer]:
    log = tmp_path / "server.log"
    source = McpServer("demo", CONFIG, target=in_process(build(str(log))))
    source.log = log  # type: ignore[attr-defined]
    async for s in started(source):
        yield s


async def logged(log: Any, text: str) -> None:
    """Until the server's log (a file it appends to) has `text`."""
    async with asyncio.timeout(10):
        while text not in log.read_text():  # noqa: ASYNC110 - a file: nothing to wait on
            await asyncio.sleep(0.02)


def ctx(blobs: MemoryBlobs | None = None) -> ToolContext:
    return ToolContext("u1", deps=ToolDeps(blobs=blobs))


async def test_tools_are_named_per_server_with_schema_and_annotations(demo: McpServer) -> None:
    assert demo.state.ready and demo.state.protocol
    infos = {info.name: info for info in demo.tools()}
    assert sorted(infos) == [
        "mcp__demo__add",
        "mcp__demo__delete_file",
        "mcp__demo__fail",
        "mcp__demo__picture",
        "mcp__demo__slow",
        "mcp__demo__whoami",
    ]
    add = infos["mcp__demo__add"]
    assert add.spec.description == "Add two whole numbers."
    assert add.spec.parameters["required"] == ["a", "b"]
    assert add.annotations.read_only and not add.annotations.destructive
    assert infos["mcp__demo__delete_file"].annotations.destructive
    assert add.timeout_s == 5  # call_timeout_s: the registry's deadline for it


async def test_results_text_structured_images_and_errors(demo: McpServer) -> None:
    blobs = MemoryBlobs()
    registry = ToolRegistry(sources=[demo], pii=None)
    names = registry.names()

    async def call(name: str, args: dict[str, Any]) -> Any:
        return await registry.call(name, args, ctx(blobs), allowed=names, timeout_s=5)

    assert (await call("mcp__demo__add", {"a": 2, "b": 40})).text == "42"
    picture = await call("mcp__demo__picture", {})
    assert picture.ok and picture.text.startswith("a pixel\n[image image-2.png: image/png")
    (part,) = picture.parts
    assert part.type == "image" and part.blob.mime_type == "image/png"
    assert (await blobs.get(part.blob.blob_id))[1].startswith(b"\x89PNG")
    failed = await call("mcp__demo__fail", {})
    assert not failed.ok and failed.text.startswith("demo/fail reported an error")
    wrong = await call("mcp__demo__add", {"a": "many"})
    assert not wrong.ok and "demo/add reported an error" in wrong.text


async def test_the_deadline_cancels_the_call_on_the_server(tmp_path: Any) -> None:
    log = tmp_path / "server.log"
    config = CONFIG.model_copy(update={"call_timeout_s": 0.3})
    source = McpServer("demo", config, target=in_process(build(str(log))))
    async for demo in started(source):
        registry = ToolRegistry(sources=[demo], pii=None)
        result = await registry.call(
            "mcp__demo__slow", {"seconds": 60}, ctx(), allowed=registry.names(), timeout_s=60
        )
        # call_timeout_s, not the caller's budget, and not the SDK's own timeout
        assert not result.ok and result.text == "tool mcp__demo__slow timed out after 0.3 s"
        await logged(log, "cancelled slow")


async def test_a_stopped_turn_cancels_the_call_on_the_server(demo: McpServer) -> None:
    call = asyncio.create_task(demo.call("mcp__demo__slow", {"seconds": 60}, ctx()))
    log = demo.log  # type: ignore[attr-defined]
    await logged(log, "slow started")
    call.cancel()  # what /stop and TaskStop do to the turn's tasks
    with pytest.raises(asyncio.CancelledError):
        await call
    await logged(log, "cancelled slow")
    assert (await demo.call("mcp__demo__add", {"a": 1, "b": 1}, ctx())).text == "2"


async def test_persona_patterns_allow_only_their_servers_tools(demo: McpServer) -> None:
    registry = ToolRegistry(sources=[demo], pii=None)
    allowed = registry.resolve(["mcp__demo__a*", "mcp__other__*"])
    assert allowed == ("mcp__demo__add",)
    refused = await registry.call(
        "mcp__demo__delete_file", {"path": "/"}, ctx(), allowed=allowed, timeout_s=5
    )
    assert not refused.ok and "not available here" in refused.text


async def test_include_and_exclude_select_the_tools() -> None:
    config = CONFIG.model_copy(update={"include": ["*e*", "add"], "exclude": ["delete_*"]})
    source = McpServer("d", config, target=in_process(build(None)))
    async for s in started(source):
        assert [i.name for i in s.tools()] == ["mcp__d__add", "mcp__d__picture"]


async def test_a_list_change_is_picked_up_and_the_version_rises() -> None:
    server = MCPServer("grow")

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Add a tool."""
        server.add_tool(lambda: "new", name="fresh", description="A new tool.")
        await ctx.notify_tools_changed()
        return "ok"

    source = McpServer("grow", CONFIG, target=in_process(server))
    async for s in started(source):
        before = s.version
        assert [i.name for i in s.tools()] == ["mcp__grow__grow"]
        await s.call("mcp__grow__grow", {}, ctx())
        async with asyncio.timeout(10):
            await s.wait_for(lambda st: "mcp__grow__fresh" in st.tools)
        assert s.version > before
        assert (await s.call("mcp__grow__fresh", {}, ctx())).text == "new"


async def test_an_older_server_is_spoken_to_by_handshake_and_its_change_notice_heard() -> None:
    server = MCPServer("old")

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Add a tool."""
        server.add_tool(lambda: "new", name="fresh", description="A new tool.")
        await ctx.request_context.session.send_tool_list_changed()  # 2025-11-25's notice
        return "ok"

    source = McpServer("old", CONFIG, target=in_process(server), mode="legacy")
    async for s in started(source):
        assert s.state.protocol == "2025-11-25"
        await s.call("mcp__old__grow", {}, ctx())
        async with asyncio.timeout(10):
            await s.wait_for(lambda st: "mcp__old__fresh" in st.tools)
        assert (await s.call("mcp__old__fresh", {}, ctx())).text == "new"


def test_names_are_sanitised_and_long_ones_cut_with_a_hash() -> None:
    assert tool_name("files", "read.file v2") == "mcp__files__read_file_v2"
    long = tool_name("files", "x" * 80)
    assert len(long) == 64 and long.startswith("mcp__files__xxx")
    assert long != tool_name("files", "x" * 81)
    assert tool_name("files", "x" * 80) == long  # stable across reconnects
    assert tool_name("f", "a.b") != tool_name("f", "a.b", hashed=True)


def test_schemas_are_normalised_for_openai_compatible_backends() -> None:
    schema = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
            }
        },
        "type": "object",
        "properties": {
            "node": {"$ref": "#/$defs/Node"},
            "name": {"type": ["string", "null"], "default": None},
            "either": {"type": ["string", "integer"]},
        },
    }
    out = normalise(schema)
    text = str(out)
    assert "$ref" not in text and "$defs" not in text and "null" not in text
    # the recursion is cut at its first repeat: an open object
    assert out["properties"]["node"]["properties"]["next"] == {"type": "object"}
    assert out["properties"]["name"] == {"type": "string"}
    assert "type" not in out["properties"]["either"]
    assert normalise(None) == {"type": "object", "properties": {}, "required": []}


async def test_a_down_server_is_a_tool_error_at_once() -> None:
    source = McpServer("down", CONFIG, backoff_s=(30, 30))  # nothing listens on port 1
    runner = asyncio.create_task(source.run())
    try:
        async with asyncio.timeout(30):
            state = await source.wait_for(lambda s: s.phase == "down")
        assert "cannot connect" in state.reason
        registry = ToolRegistry(sources=[source], pii=None)
        assert registry.names() == []  # never listed: nothing to offer yet
        with pytest.raises(Exception, match="MCP server 'down' is down: cannot connect"):
            await source.call("mcp__down__x", {}, ctx())
    finally:
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner


async def test_metrics_count_calls_errors_and_latency_per_server(demo: McpServer) -> None:
    metrics = Metrics()
    registry = ToolRegistry(sources=[demo], pii=None)
    registry.observer = metrics.tool_call
    names = registry.names()
    await registry.call("mcp__demo__add", {"a": 1, "b": 2}, ctx(), allowed=names, timeout_s=5)
    await registry.call("mcp__demo__fail", {}, ctx(), allowed=names, timeout_s=5)
    text = metrics.render().decode()
    assert 'gateway_mcp_calls_total{outcome="ok",server="demo"} 1.0' in text
    assert 'gateway_mcp_calls_total{outcome="error",server="demo"} 1.0' in text
    assert 'gateway_mcp_call_seconds_count{server="demo"} 2.0' in text


async def test_a_pattern_that_grew_past_the_limit_offers_the_first_128(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = MCPServer("big")
    for i in range(130):
        server.add_tool(lambda: "x", name=f"t{i:03}", description="A tool.")
    source = McpServer("big", CONFIG, target=in_process(server))
    async for s in started(source):
        registry = ToolRegistry(sources=[s], pii=None)
        names = registry.resolve(["mcp__big__*"])
        assert len(names) == 128 and names[0] == "mcp__big__t000"
        assert "match 130 tools, more than the 128" in caplog.text
