"""A status line per running tool: made from the tool's description (or declared), emitted by the
loop for every call, shown in the placeholder on the web socket and on Telegram, and sent to the
web socket as `tool.started` / `tool.finished` frames. Control tools get none."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession

from agent.loop import LoopSettings, run_loop
from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import Message
from bot.runtime.app import App
from tests.conftest import Running, connect, make_config
from tests.telegram_fake import TOKEN, FakeBotAPI
from tools.base import ToolContext
from tools.builtin import builtin_registry
from tools.control import CONTROL
from tools.events import ToolFinished, ToolStarted, TurnEvent
from tools.registry import ToolRegistry, tool
from tools.status import status_from

CLOCK_LINE = "🔧 Getting the current date and time…"


@pytest.mark.parametrize(
    ("description", "line"),
    [
        ("Get the current date and time, or just one of them, in a time zone.",
         "Getting the current date and time"),
        ("Search the knowledge base for passages that answer a question; cite the sources.",
         "Searching the knowledge base for passages"),
        ("Create a payment order for a paid service and show the user a QR code to pay it.",
         "Creating a payment order for a paid service"),
        ("Stop a running task.", "Stopping a running task"),
        ("Tie a knot.", "Tying a knot"),
        ("Look up a word — fast.", "Looking up a word"),
        ("Returns the time.", "Returns the time"),  # not imperative: left as written
        ("The time in Paris.", "The time in Paris"),
    ],
)  # fmt: skip
def test_a_status_line_is_the_description_s_first_clause_as_an_ing_phrase(
    description: str, line: str
) -> None:
    assert status_from(description) == line


gate = asyncio.Event()


@tool(name="get_current_datetime", status="Checking the time")
async def slow_clock(ctx: ToolContext) -> str:
    """Tell the time, when the test lets it."""
    await gate.wait()
    return "12:00"


@tool(timeout_s=0.01)
async def stuck(ctx: ToolContext) -> str:
    """Wait for ever."""
    await asyncio.Event().wait()
    return "never"


@tool
async def broken(ctx: ToolContext) -> str:
    """Fail at once."""
    raise RuntimeError("no")


def test_a_tool_may_declare_its_status() -> None:
    assert slow_clock.status_text == "Checking the time"
    assert broken.status_text == "Failing at once"


async def test_every_call_is_started_and_finished_with_its_line() -> None:
    registry = ToolRegistry([broken, stuck, *CONTROL])
    allowed = ("broken", "stuck", "SendMessage")
    calls: list[tuple[str, dict[str, Any] | str]] = [
        ("broken", {}),
        ("stuck", {}),
        ("SendMessage", {"message": "One moment"}),
        ("nonexistent", {}),
    ]
    provider = ScriptedProvider([Reply(calls=calls), Reply("Done.")])
    events: list[TurnEvent] = []

    async def emit(event: TurnEvent) -> None:
        events.append(event)

    await run_loop(
        provider=provider,
        system="",
        messages=[Message("user", "hi")],
        tools=registry.specs(allowed),
        registry=registry,
        allowed=allowed,
        ctx=ToolContext(user_id="u1", session_id="s1", emit=emit),
        emit=emit,
        settings=LoopSettings(tool_timeout_s=1.0),
    )
    started = {e.name: e for e in events if isinstance(e, ToolStarted)}
    finished = {e.name: e for e in events if isinstance(e, ToolFinished)}
    assert {n: e.label for n, e in started.items()} == {
        "broken": "Failing at once",
        "stuck": "Waiting for ever",
        "SendMessage": "",  # shows its own note
        "nonexistent": "",  # only an error result
    }
    assert {n: (e.call_id, e.label) for n, e in finished.items()} == {
        n: (e.call_id, e.label) for n, e in started.items()
    }
    assert not finished["broken"].ok and not finished["stuck"].ok  # a failure, a timeout
    assert finished["SendMessage"].ok


async def test_the_web_socket_shows_the_tool_line_then_the_answer(
    running: Running, session: ClientSession
) -> None:
    answer_may_come = asyncio.Event()
    provider = ScriptedProvider(
        [
            Reply(calls=[("SendMessage", {"message": "One moment"})]),
            Reply(calls=[("get_current_datetime", {"timezone": "UTC"})]),
            Reply("It is noon.", wait=answer_may_come),
        ]
    )
    app = await running(provider)
    client = await connect(session, app)
    await client.hello()
    await client.send(type="message", text="what time is it?", client_message_id="m1")
    # the clock answers at once: its line is still shown once, then goes
    shown = await client.until(lambda f: f["type"] == "message.updated" and CLOCK_LINE in f["text"])
    assert shown["text"] == f"One moment\n\n{CLOCK_LINE}"
    await client.until(lambda f: f["type"] == "message.updated" and f["text"] == "One moment")
    answer_may_come.set()
    completed = await client.until_type("message.completed")
    assert completed["text"] == "It is noon."
    tool_frames = [f for f in client.frames if f["type"].startswith("tool.")]
    assert [(f["type"], f["name"], f["label"], f["status"]) for f in tool_frames] == [
        ("tool.started", "get_current_datetime", "Getting the current date and time", "running"),
        ("tool.finished", "get_current_datetime", "Getting the current date and time", "completed"),
    ]  # nothing for SendMessage: a control tool
    assert tool_frames[0]["call_id"] == tool_frames[1]["call_id"]
    seqs = [f["seq"] for f in client.frames if "seq" in f and f["type"] != "ready"]
    assert seqs == sorted(seqs)


Start = Callable[[ScriptedProvider], Any]


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    api = FakeBotAPI(interval_s=0.2)
    await api.start()
    yield api
    await api.close()


@pytest.fixture
async def telegram(tmp_path: Path, fake: FakeBotAPI) -> AsyncIterator[Start]:
    """The gateway with Telegram on the fake Bot API; `get_current_datetime` is `slow_clock`."""
    apps: list[App] = []
    builtin = builtin_registry()
    others = [t for n in builtin.names() if n != "get_current_datetime" and (t := builtin.get(n))]

    async def start(provider: ScriptedProvider) -> App:
        channel = {
            "enabled": True,
            "token": TOKEN,
            "api_base": fake.url,
            "private_edit_interval_s": 0.2,
            "group_edit_interval_s": 0.2,
        }
        config = make_config(tmp_path, channels={"telegram": channel})
        registry = ToolRegistry([*others, slow_clock])
        app = App(config, base_dir=tmp_path, provider=provider, registry=registry)
        await app.__aenter__()
        apps.append(app)
        await fake.wait_for(lambda: any(c.method == "getupdates" for c in fake.calls))
        return app

    yield start
    for app in apps:
        await app.stop()


async def test_telegram_edits_the_placeholder_to_show_the_running_tool(
    telegram: Start, fake: FakeBotAPI
) -> None:
    gate.clear()
    provider = ScriptedProvider([Reply(calls=[("get_current_datetime", {})]), Reply("It is noon.")])
    app = await telegram(provider)
    fake.push(fake.message(42, "what time is it?"))
    line = "🔧 Checking the time…"
    await fake.wait_for(lambda: any(line in (c.text or "") for c in fake.ok(42, "editMessageText")))
    gate.set()
    await provider.wait_requests(2)
    await app.gateway.wait_idle()
    texts = [c.text for c in fake.ok(42, "editMessageText")]
    assert texts[-1] == "It is noon."
    assert f"Thinking…\n\n{line}" in texts
    assert len(fake.ok(42, "sendMessage")) == 1  # one placeholder, edited
