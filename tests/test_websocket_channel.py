"""The web socket channel over a real aiohttp server and client: protocol, fan-out, replay."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import WSMsgType, web

from adapters.base import Action, ChatRef, InboundMessage, OutboundContent
from adapters.websocket import WebSocketChannel, user_hash
from adapters.websocket.static import widget_script
from tests.conftest import Running

ORIGIN = "http://127.0.0.1:8080"
STATIC = Path(__file__).resolve().parent.parent / "adapters" / "static"


@dataclass
class Harness:
    channel: WebSocketChannel
    runner: web.AppRunner
    session: aiohttp.ClientSession
    url: str
    received: list[InboundMessage] = field(default_factory=list)
    arrived: asyncio.Queue[InboundMessage] = field(default_factory=asyncio.Queue)
    run_task: asyncio.Task[None] | None = None
    stopped: bool = False

    def start(self) -> None:
        self.run_task = asyncio.create_task(self.channel.run(self.echo))

    async def echo(self, message: InboundMessage) -> None:
        """A tiny gateway: placeholder, two interim edits, final edit."""
        self.received.append(message)
        self.arrived.put_nowait(message)
        handle = await self.channel.send(
            message.chat, OutboundContent("…"), reply_to=message.message_id
        )
        await self.channel.edit(handle, OutboundContent("echo:"))
        await self.channel.edit(handle, OutboundContent(f"echo: {message.text}"))
        final = OutboundContent(f"echo: {message.text}", display=({"kind": "note"},))
        await self.channel.edit(handle, final, final=True)

    def connect(self, origin: str | None = ORIGIN) -> Any:
        return self.session.ws_connect(self.url, origin=origin)


MakeHarness = Callable[..., Awaitable[Harness]]


@pytest.fixture
async def make_harness() -> AsyncIterator[MakeHarness]:
    made: list[Harness] = []

    async def make(*, run: bool = True, **options: Any) -> Harness:
        options.setdefault("allowed_origins", [ORIGIN])
        channel = WebSocketChannel(**options)
        app = web.Application()
        channel.install(app)
        runner = web.AppRunner(app, shutdown_timeout=1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        harness = Harness(channel, runner, aiohttp.ClientSession(), f"http://127.0.0.1:{port}/ws")
        made.append(harness)
        if run:
            harness.start()
        return harness

    yield make
    for harness in made:
        if harness.run_task is not None:
            harness.run_task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await harness.run_task
        await harness.session.close()
        if not harness.stopped:
            await harness.runner.cleanup()


@pytest.fixture
async def harness(make_harness: MakeHarness) -> Harness:
    return await make_harness()


async def receive(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    async with asyncio.timeout(5):
        msg = await ws.receive()
    assert msg.type is WSMsgType.TEXT, (msg.type, msg.data)
    frame = json.loads(msg.data)
    assert isinstance(frame, dict)
    return frame


async def receive_close(ws: aiohttp.ClientWebSocketResponse) -> int:
    async with asyncio.timeout(5):
        msg = await ws.receive()
    assert msg.type is WSMsgType.CLOSE, (msg.type, msg.data)
    return int(msg.data)


async def hello(ws: aiohttp.ClientWebSocketResponse, **fields: Any) -> dict[str, Any]:
    await ws.send_json({"type": "hello", **fields})
    ready = await receive(ws)
    assert ready["type"] == "ready", ready
    return ready


async def turn(
    ws: aiohttp.ClientWebSocketResponse, text: str, **fields: Any
) -> list[dict[str, Any]]:
    """Send a message: its echo (`message.user`) comes first, then the four frames of the answer."""
    await ws.send_json({"type": "message", "text": text, **fields})
    echo = await receive(ws)
    assert echo["type"] == "message.user", echo
    assert echo.get("duplicate") or echo["text"] == text, echo  # a resend's echo has no text
    return [await receive(ws) for _ in range(4)]


async def test_hello_assigns_a_visitor_id(harness: Harness) -> None:
    async with harness.session.ws_connect(harness.url, origin=ORIGIN, compress=15) as ws:
        assert ws.compress == 0  # deflate offered like a browser does, and declined
        ready = await hello(ws)
        assert re.fullmatch(r"[0-9a-f]{32}", ready["visitor_id"])
        assert ready["conversation_id"] == f"v:{ready['visitor_id']}"
        assert ready["seq"] == 0
        assert harness.channel.connections == 1


async def test_message_streams_the_placeholder_to_completion(harness: Harness) -> None:
    async with harness.connect() as ws:
        ready = await hello(ws, visitor_id="visitor-0001")
        frames = await turn(ws, "hi there", client_message_id="c1")

    assert [f["type"] for f in frames] == [
        "message.created",
        "message.updated",
        "message.updated",
        "message.completed",
    ]
    assert [f["seq"] for f in frames] == [2, 3, 4, 5]  # 1 is the message's echo
    assert frames[0]["reply_to"] == "c1"
    assert frames[0]["message_id"].startswith("m_")
    assert {f["message_id"] for f in frames} == {frames[0]["message_id"]}
    assert frames[2]["text"] == "echo: hi there"
    assert frames[3]["text"] == "echo: hi there"
    assert frames[3]["display"] == [{"kind": "note"}]

    [inbound] = harness.received
    identity = "v:visitor-0001"
    assert ready["conversation_id"] == identity
    assert inbound.chat == ChatRef(channel="websocket", chat_id=identity)
    assert inbound.user_id == identity
    assert inbound.text == "hi there"
    assert inbound.event_id == f"ws:{identity}:c1"
    assert inbound.message_id == "c1"
    assert inbound.mentioned is True
    assert inbound.raw == {"type": "message", "text": "hi there", "client_message_id": "c1"}


async def test_event_id_is_stable_for_a_resent_client_message_id(harness: Harness) -> None:
    async with harness.connect() as ws:
        await hello(ws, visitor_id="visitor-0001")
        await turn(ws, "once", client_message_id="same")
        await turn(ws, "once", client_message_id="same")
        frames = await turn(ws, "no id")
    first, again, fresh = harness.received
    assert first.event_id == again.event_id == "ws:v:visitor-0001:same"
    assert fresh.event_id not in {first.event_id, again.event_id}
    assert fresh.message_id and frames[0]["reply_to"] == fresh.message_id


async def test_every_socket_of_a_visitor_gets_the_same_frames(harness: Harness) -> None:
    async with harness.connect() as tab1, harness.connect() as tab2:
        ready1 = await hello(tab1)
        ready2 = await hello(tab2, visitor_id=ready1["visitor_id"])
        assert ready2["conversation_id"] == ready1["conversation_id"]
        frames1 = await turn(tab1, "hello")
        frames2 = [await receive(tab2) for _ in range(5)]
    assert frames2[1:] == frames1
    assert frames2[0]["type"] == "message.user" and frames2[0]["text"] == "hello"


async def test_a_dead_tab_does_not_break_sends(harness: Harness) -> None:
    async with harness.connect() as tab1:
        ready = await hello(tab1)
        async with harness.connect() as tab2:
            await hello(tab2, visitor_id=ready["visitor_id"])
        chat = ChatRef("websocket", ready["conversation_id"])
        await harness.channel.send(chat, OutboundContent("still here"), final=True)
        created, completed = await receive(tab1), await receive(tab1)
    assert created["text"] == completed["text"] == "still here"
    assert completed["type"] == "message.completed"


async def test_resume_after_replays_missed_frames(harness: Harness) -> None:
    async with harness.connect() as ws:
        ready = await hello(ws)
        frames = await turn(ws, "first")
    chat = ChatRef("websocket", ready["conversation_id"])
    # Published while no socket is open: only the replay buffer has them.
    await harness.channel.emit_event(
        chat,
        "agent.started",
        {
            "task_id": "t1",
            "subagent_type": "research",
            "description": "look up",
            "status": "running",
        },
    )
    handle = await harness.channel.send(chat, OutboundContent("later"))
    await harness.channel.edit(handle, OutboundContent("later, done"), final=True)

    async with harness.connect() as ws:
        again = await hello(ws, visitor_id=ready["visitor_id"], resume_after=5)
        missed = [await receive(ws) for _ in range(3)]
    assert again["seq"] == 8
    assert [(f["type"], f["seq"]) for f in missed] == [
        ("agent.started", 6),
        ("message.created", 7),
        ("message.completed", 8),
    ]
    assert missed[0]["task_id"] == "t1" and missed[0]["subagent_type"] == "research"

    # Superseded updates are not kept: the completion carries the full text.
    async with harness.connect() as ws:
        await hello(ws, visitor_id=ready["visitor_id"], resume_after=0)
        replay = [await receive(ws) for _ in range(6)]
    assert [f["seq"] for f in replay] == [1, 2, 5, 6, 7, 8]
    assert replay[0]["type"] == "message.user" and replay[0]["text"] == "first"
    assert replay[1:3] == [frames[0], frames[3]]


async def test_a_client_that_stops_reading_is_closed_and_can_resume(harness: Harness) -> None:
    async with harness.connect() as ws:
        ready = await hello(ws)
        chat = ChatRef("websocket", ready["conversation_id"])
        for n in range(300):  # no await yields in between: the socket's queue overflows
            await harness.channel.emit_event(chat, "agent.started", {"task_id": f"t{n}"})
        assert await receive_close(ws) == 1013
    async with harness.connect() as ws:
        await hello(ws, visitor_id=ready["visitor_id"], resume_after=250)
        replay = [await receive(ws) for _ in range(50)]
    assert [f["seq"] for f in replay] == list(range(251, 301))


async def test_foreign_origin_is_refused_before_the_upgrade(harness: Harness) -> None:
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        async with harness.connect(origin="http://evil.example"):
            pass
    assert refused.value.status == 403
    assert harness.received == []
    assert harness.channel.connections == 0


async def test_missing_origin_is_allowed(harness: Harness) -> None:
    async with harness.connect(origin=None) as ws:
        await hello(ws)
        frames = await turn(ws, "from a server")
    assert frames[-1]["text"] == "echo: from a server"


async def test_oversized_frame_closes_with_1009(make_harness: MakeHarness) -> None:
    harness = await make_harness(max_frame_bytes=1024)
    async with harness.connect() as ws:
        await hello(ws)
        await ws.send_str(json.dumps({"type": "message", "text": "x" * 2000}))
        assert await receive_close(ws) == 1009
    assert harness.received == []


BAD_FRAMES = [
    ("{not json", "bad_json"),
    ("[1, 2]", "bad_json"),
    ("[" * 50_000, "bad_json"),
    ('{"type": "dance"}', "unknown_type"),
    ('{"text": "no type"}', "unknown_type"),
    ('{"type": "message", "text": "   "}', "empty_text"),
    ('{"type": "message"}', "empty_text"),
    ('{"type": "message", "text": "' + "x" * 101 + '"}', "text_too_long"),
    ('{"type": "message", "text": 5}', "bad_field"),
    ('{"type": "message", "text": "\\ud800"}', "bad_field"),
    ('{"type": "message", "text": "hi", "client_message_id": 7}', "bad_field"),
    ('{"type": "action"}', "bad_field"),
    ('{"type": "hello"}', "hello_repeated"),
    (b"\x00\x01", "binary_not_supported"),
]


@pytest.mark.parametrize(("frame", "code"), BAD_FRAMES)
async def test_bad_frames_get_an_error_and_the_socket_stays_usable(
    make_harness: MakeHarness, frame: str | bytes, code: str
) -> None:
    harness = await make_harness(max_text_chars=100)
    async with harness.connect() as ws:
        await hello(ws)
        if isinstance(frame, bytes):
            await ws.send_bytes(frame)
        else:
            await ws.send_str(frame)
        error = await receive(ws)
        assert error["type"] == "error" and error["code"] == code, error
        assert "seq" not in error and error["message"]
        frames = await turn(ws, "still fine")
    assert frames[0]["seq"] == 2  # errors take no seq (1 is the message's echo)
    assert [m.text for m in harness.received] == ["still fine"]


async def test_bad_visitor_id_is_refused_without_closing(harness: Harness) -> None:
    async with harness.connect() as ws:
        await ws.send_json({"type": "hello", "visitor_id": "short"})
        error = await receive(ws)
        assert error["code"] == "bad_field" and "visitor_id" in error["message"]
        await ws.send_json({"type": "hello", "resume_after": -1})
        assert (await receive(ws))["code"] == "bad_field"
        await hello(ws, visitor_id="long-enough_1")


async def test_message_before_hello_is_refused(harness: Harness) -> None:
    async with harness.connect() as ws:
        await ws.send_json({"type": "message", "text": "too early"})
        error = await receive(ws)
        assert error["code"] == "hello_required"
        await hello(ws)
        frames = await turn(ws, "now")
    assert frames[0]["seq"] == 2  # 1 is the message's echo
    assert [m.text for m in harness.received] == ["now"]


async def test_rate_limit_drops_and_reports(make_harness: MakeHarness) -> None:
    harness = await make_harness(rate_limit_per_minute=3)
    async with harness.connect() as ws:
        await hello(ws)
        for n in range(3):
            await turn(ws, f"m{n}")
        await ws.send_json({"type": "message", "text": "one too many"})
        error = await receive(ws)
    assert error["code"] == "rate_limited"
    assert [m.text for m in harness.received] == ["m0", "m1", "m2"]


async def test_signed_identity_is_the_conversation(make_harness: MakeHarness) -> None:
    harness = await make_harness(identity_secret="s3cret")
    async with harness.connect() as ws:
        ready = await hello(ws, user_id="42", user_hash=user_hash("s3cret", "42"))
        await turn(ws, "as a user")
    assert ready["conversation_id"] == "u:42"
    assert ready["visitor_id"]  # still assigned, for the widget to keep
    [inbound] = harness.received
    assert inbound.chat.chat_id == "u:42" and inbound.user_id == "u:42"


@pytest.mark.parametrize(
    ("secret", "fields"),
    [
        ("s3cret", {"user_id": "42", "user_hash": user_hash("s3cret", "43")}),
        ("s3cret", {"user_id": "42", "user_hash": "é" * 64}),
        ("s3cret", {"user_id": "42"}),
        ("s3cret", {"user_id": 42, "user_hash": "x"}),
        (None, {"user_id": "42", "user_hash": user_hash("s3cret", "42")}),
    ],
    ids=["wrong-hash", "non-ascii-hash", "no-hash", "not-a-string", "no-secret-configured"],
)
async def test_invalid_identity_closes_with_4003(
    make_harness: MakeHarness, secret: str | None, fields: dict[str, Any]
) -> None:
    harness = await make_harness(identity_secret=secret)
    async with harness.connect() as ws:
        await ws.send_json({"type": "hello", **fields})
        error = await receive(ws)
        assert error["code"] == "identity_invalid"
        assert await receive_close(ws) == 4003
    assert harness.received == []


async def test_stop_reaches_the_inbox_as_a_command(harness: Harness) -> None:
    async with harness.connect() as ws:
        await hello(ws)
        await ws.send_json({"type": "stop"})
        stop = await harness.arrived.get()
    assert stop.text == "/stop" and stop.command == "stop"
    assert stop.event_id.startswith("ws:")


async def test_action_reaches_the_inbox_with_its_value(harness: Harness) -> None:
    async with harness.connect() as ws:
        await hello(ws)
        action = {"type": "action", "action_id": "confirm", "value": "yes", "message_id": "m_1"}
        await ws.send_json(action)
        pressed = await harness.arrived.get()
        await ws.send_json({"type": "action", "action_id": "retry"})
        bare = await harness.arrived.get()
    # a press is an action inbound, never text: a value of "/new" cannot run a command
    assert pressed.action == Action("confirm", "yes", None, "m_1") and pressed.raw == action
    assert pressed.text == "" and pressed.command is None
    assert bare.action == Action("retry", None, None, None) and bare.raw["action_id"] == "retry"
    assert pressed.event_id != bare.event_id


async def test_a_message_sent_before_run_waits_for_it(make_harness: MakeHarness) -> None:
    harness = await make_harness(run=False)
    async with harness.connect() as ws:
        await hello(ws)
        await ws.send_json({"type": "message", "text": "early"})
        harness.start()
        frames = [await receive(ws) for _ in range(4)]
    assert frames[-1]["text"] == "echo: early"


async def test_shutdown_closes_sockets_with_1001(harness: Harness) -> None:
    async with harness.connect() as ws:
        await hello(ws)
        harness.stopped = True
        cleanup = asyncio.create_task(harness.runner.cleanup())
        assert await receive_close(ws) == 1001
        await cleanup


async def test_demo_page_and_widget_are_served(harness: Harness) -> None:
    base = harness.url.removesuffix("/ws")
    async with harness.session.get(f"{base}/") as page:
        assert page.status == 200 and page.content_type == "text/html"
        body = await page.text()
    assert "<title>Chat gateway — demo</title>" in body
    assert '<script src="/static/widget.js" data-path="/ws"' in body
    assert "offline demo model" in body
    async with harness.session.get(f"{base}/static/widget.js") as js:
        assert js.status == 200 and js.content_type == "text/javascript"
        assert "new WebSocket(" in await js.text()
    async with harness.session.get(f"{base}/static/widget.css") as css:
        assert css.status == 200 and css.content_type == "text/css"


def test_widget_builds_html_only_from_escaped_text() -> None:
    source = widget_script().decode()
    assert "function escapeHtml(" in source
    assert "function renderMarkdown(" in source
    # The one innerHTML write goes through the renderer; everything else uses textContent.
    assert re.findall(r"innerHTML\s*=\s*([^;]+);", source) == [
        "renderMarkdown(source, { images: o.images })"
    ]
    # the one <img markup: remote https images, only when the site set data-images="load"
    assert source.count("<img") == 1
    assert "if (loadImages && /^https:" in source
    assert "<img" not in (STATIC / "index.html").read_text(encoding="utf-8")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.process
def test_widget_markdown_never_renders_markup_or_images() -> None:
    samples = [
        "<img src=x onerror=alert(1)>",
        "![chart](https://evil.example/x.png?q=secret)",
        '[click](javascript:alert(1)) <a href="javascript:alert(1)">x</a>',
        "**bold** *it* `a<b` see https://example.com/a?b=1&c=2.",
        "```\n<script>alert(1)</script>\n```",
    ]
    script = (
        f"const w = require({json.dumps(str(STATIC / 'widget' / 'markdown.js'))});"
        f"console.log(JSON.stringify({json.dumps(samples)}.map(w.renderMarkdown)));"
    )
    done = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    rendered = json.loads(done.stdout)
    assert all("<img" not in html and "<script" not in html for html in rendered)
    assert all('href="javascript' not in html for html in rendered)
    assert rendered[0] == "&lt;img src=x onerror=alert(1)&gt;"
    assert rendered[1] == "[image: chart]"
    assert 'href="javascript' not in rendered[2]
    assert "<strong>bold</strong>" in rendered[3] and "<em>it</em>" in rendered[3]
    assert "<code>a&lt;b</code>" in rendered[3]
    assert '<a href="https://example.com/a?b=1&amp;c=2" rel="noopener' in rendered[3]
    assert 'target="_blank"' in rendered[3]
    assert rendered[4] == "<pre><code>&lt;script&gt;alert(1)&lt;/script&gt;\n</code></pre>"


async def test_the_servers_own_pages_may_connect_on_any_port(
    running: Running, session: aiohttp.ClientSession
) -> None:
    from agent.providers.scripted import ScriptedProvider
    from tests.conftest import connect

    app = await running(ScriptedProvider([]))
    same = await connect(session, app, origin=app.url)  # e.g. http://127.0.0.1:<port>
    await same.hello()
    local = await connect(session, app, origin=f"http://localhost:{app.port}")
    await local.hello()
    with pytest.raises(aiohttp.WSServerHandshakeError):
        await connect(session, app, origin=f"http://evil.example:{app.port}")
