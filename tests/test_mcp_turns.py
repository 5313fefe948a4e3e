"""MCP tools in real turns: a running app with a stdio MCP server (tests/mcp_servers/demo.py), a
scripted model and a web socket client. The persona's pattern allows the server's tools, and
only those it names; an image result reaches the model as an image part; /stop cancels the call
on the server."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession

from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.turn import STOPPED
from bot.runtime.app import App
from content.parts import ImagePart
from tests.admin_kit import TOKEN
from tests.agents_kit import Router
from tests.conftest import Running, connect
from tests.test_mcp_servers import DEMO, WAIT_S, logged
from tools.control import CONTROL_TOOLS

pytestmark = pytest.mark.process
PERSONA = """---
name: default
description: Answers with the demo server's tools.
tools: [get_current_datetime, mcp__demo__picture, mcp__demo__s*]
---
You answer with the demo tools.
"""


async def start(running: Running, tmp_path: Path, router: Router) -> App:
    personas = tmp_path / "personas"
    personas.mkdir()
    (personas / "default.md").write_text(PERSONA)
    log = tmp_path / "server.log"
    servers = {"demo": {"command": sys.executable, "args": [DEMO, "--log", str(log)]}}
    app = await running(
        ScriptedProvider(router),
        personas={"dirs": [str(personas)]},
        mcp={"servers": servers},
        admin={"token": TOKEN},
    )
    async with asyncio.timeout(WAIT_S):  # the app answers before: the tools come when it is up
        await app.mcp.servers["demo"].wait_for(lambda s: s.ready)
    return app


async def test_a_turn_calls_an_allowed_tool_and_the_model_sees_its_image(
    running: Running, tmp_path: Path, session: ClientSession
) -> None:
    router = Router(
        default=[
            Reply(calls=[("mcp__demo__delete_file", {"path": "/etc"})]),
            Reply(calls=[("mcp__demo__picture", {})]),
            Reply("Here is the pixel."),
        ]
    )
    app = await start(running, tmp_path, router)
    client = await connect(session, app)
    await client.hello()
    await client.send(type="message", text="show me")
    final = await client.until_type("message.completed", timeout=WAIT_S)
    assert final["text"] == "Here is the pixel."
    requests = router.seen["default"]
    offered = sorted(spec.name for spec in requests[0].tools if spec.name not in CONTROL_TOOLS)
    assert offered == ["get_current_datetime", "mcp__demo__picture", "mcp__demo__slow"]
    refused = requests[1].messages[-1]
    assert refused.is_error and "'mcp__demo__delete_file' is not available here" in refused.content
    shown = requests[2].messages[-1]
    assert shown.role == "tool" and shown.content.startswith("a pixel\n[image image-2.png")
    (part,) = shown.parts
    assert isinstance(part, ImagePart) and part.blob.mime_type == "image/png"
    assert (await app.blobs.get(part.blob.blob_id))[1].startswith(b"\x89PNG")
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with session.get(f"{app.url}/admin", headers=headers) as response:
        page = await response.text()
    row = page.split('<tr class="tool-server">', 1)[1].split("</tr>", 1)[0]
    assert "<td>demo</td><td>stdio</td><td>ready</td>" in row
    assert '<td class="num">6</td>' in row


async def test_stop_cancels_the_call_on_the_server(
    running: Running, tmp_path: Path, session: ClientSession
) -> None:
    router = Router(default=[Reply(calls=[("mcp__demo__slow", {"seconds": 600})]), Reply("no")])
    app = await start(running, tmp_path, router)
    client = await connect(session, app)
    await client.hello()
    await client.send(type="message", text="take your time")
    log: Any = tmp_path / "server.log"
    await logged(log, "slow started")
    await client.send(type="stop")
    final = await client.until_type("message.completed", timeout=WAIT_S)
    assert final["text"] == STOPPED
    await logged(log, "cancelled slow")
