"""The answer's media, end to end: a background specialist's chart reaches the answer that
delivers its result (and the model sees it), and the answer's media are kept with the turn, so
the stored transcript (the widget's reload) shows them beside the answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from adapters.base import ChatRef, InboundMessage
from adapters.websocket import WebSocketChannel
from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import ModelRequest
from bot.pipeline.transcript import StoreHistory
from bot.redis import messages
from bot.runtime.app import App
from bot.storage import SqliteStore
from content.parts import BlobRef, FilePart, ImagePart
from tests.blob_kit import MemoryBlobs, PlainLinks
from tests.conftest import ORIGIN, WsClient, make_config
from tests.test_parts_pipeline import MediaChannel, chart_registry
from tests.test_resume import snapshot
from tools.builtin import builtin_registry

CHAT = ChatRef("fake", "dm-1")
COORDINATOR = (
    "---\nname: default\ndescription: asks specialists\ntools: [AgentTool, chart]\n---\n"
    "You coordinate.\n"
)
CHARTER = "---\nname: charter\ndescription: draws charts\ntools: [chart]\n---\nYou are CHARTER.\n"
TASK = "Draw the sales chart for the last quarter and say in one line what it shows."


def routed(**scripts: list[Reply]) -> Callable[[ModelRequest], Reply]:
    """Each persona answers from its own script (the specialist's prompt names it)."""

    def answer(request: ModelRequest) -> Reply:
        who = "charter" if "CHARTER" in request.system else "default"
        return scripts[who].pop(0)

    return answer


@pytest.fixture
async def app(
    tmp_path: Path,
) -> AsyncIterator[tuple[App, MediaChannel, ScriptedProvider, list[BlobRef]]]:
    made: list[BlobRef] = []
    holder: list[App] = []
    background = {"description": "sales chart", "subagent_type": "charter", "prompt": TASK}
    provider = ScriptedProvider(
        routed(
            default=[
                Reply(calls=[("AgentTool", background | {"background": True})]),
                Reply("I asked for the chart; it will follow."),
                Reply("Here is the sales chart: sales grew."),
            ],
            charter=[Reply(calls=[("chart", {"title": "sales"})]), Reply("Sales grew 12%.")],
        )
    )
    registry = builtin_registry()
    charts = chart_registry(made, lambda: holder[0])
    registry.add(charts.get("chart"))  # type: ignore[arg-type]
    folder = tmp_path / "personas"
    folder.mkdir()
    (folder / "default.md").write_text(COORDINATOR)
    (folder / "charter.md").write_text(CHARTER)
    channel = MediaChannel()
    config = make_config(tmp_path, personas={"dirs": [str(folder)]})
    async with App(
        config,
        base_dir=tmp_path,
        provider=provider,
        registry=registry,
        channels=[channel],
        web_server=False,
    ) as running:
        holder.append(running)
        yield running, channel, provider, made


async def test_a_background_specialists_chart_reaches_the_answer_that_delivers_it(
    app: tuple[App, MediaChannel, ScriptedProvider, list[BlobRef]],
) -> None:
    running, channel, provider, made = app
    await running.gateway.handle(InboundMessage(CHAT, "u1", "chart please", "e1", "m-e1"))
    await provider.wait_requests(5)  # both coordinator turns, the specialist's two rounds
    await running.gateway.wait_idle()
    chart = (ImagePart(made[0]),)
    notice = provider.requests[-1].messages[-1]
    assert "<task-notification" in notice.content and notice.parts == chart  # the model sees it
    assert channel.shown()[-1] == "Here is the sales chart: sales grew."
    assert channel.media[-1] == chart  # the delivering answer carries the chart
    assert sum(1 for parts in channel.media if parts) == 1  # once, and not with the first answer

    # the stored transcript keeps the chart with the answer it went out with
    shown = await StoreHistory(running.store, lambda: "default").recent(CHAT, "u1")
    assert [(m.role, m.text, m.parts) for m in shown] == [
        ("user", "chart please", ()),
        ("assistant", "I asked for the chart; it will follow.", ()),
        ("assistant", "Here is the sales chart: sales grew.", chart),
    ]


async def test_a_reload_shows_the_answers_file_with_a_fresh_link(tmp_path: Path) -> None:
    """The stored transcript a widget reload shows: the bot's file beside its answer, as the
    user's files beside theirs, with a link made now (the one sent live may have expired)."""
    identity = "v:visitor-0001"
    blobs = MemoryBlobs()
    report = FilePart(
        await blobs.put(b"%PDF-1.4\n%%EOF", mime_type="application/pdf", name="r.pdf")
    )
    async with SqliteStore(tmp_path / "bot.db") as store:
        conversation = f"websocket:{identity}"
        session_id = await store.active_session(
            channel="websocket", conversation_key=conversation, user_id=identity
        )
        await store.create_turn(
            turn_id="t1",
            session_id=session_id,
            channel="websocket",
            conversation_key=conversation,
            inbound_event_ids=["e1"],
            placeholder={"channel": "websocket", "chat_id": identity, "message_id": "m_1"},
            inbound_messages=[{"message_id": "c1", "text": "the report, please"}],
        )
        await store.finish_turn(
            "t1", status="completed", final_text="Attached.", final_parts=(report,)
        )
        channel = WebSocketChannel(
            allowed_origins=[ORIGIN],
            blobs=blobs,
            links=PlainLinks(),
            history=StoreHistory(store, lambda: "default"),
        )
        app = web.Application()
        channel.install(app)
        runner = web.AppRunner(app, shutdown_timeout=1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        try:
            async with aiohttp.ClientSession() as client:
                url = f"http://127.0.0.1:{runner.addresses[0][1]}/ws"
                tab = WsClient(await client.ws_connect(url, headers={"Origin": ORIGIN}))
                await tab.send(type="hello", visitor_id="visitor-0001", resume_after=0)
                frames = [await tab.next() for _ in range(3)]
        finally:
            await runner.cleanup()
    assert [(f["type"], f.get("text")) for f in frames] == [
        ("ready", None),
        ("message.user", "the report, please"),
        ("message.completed", "Attached."),
    ]
    [attachment] = frames[2]["attachments"]
    assert attachment["url"] == f"/media/{report.blob.blob_id}?name=r.pdf"
    assert (attachment["type"], attachment["name"]) == ("file", "r.pdf")


async def test_a_background_result_resumed_after_a_crash_still_carries_its_media(
    tmp_path: Path,
) -> None:
    """The turn that delivers a background result, its process killed mid-turn: the resumed
    turn's answer carries the result's chart (kept as the turn's user message parts), and the
    turn keeps it with the answer."""
    chart = ImagePart(BlobRef("d" * 64, "image/png", 20, "sales.png"))
    notice = InboundMessage(
        CHAT, "u1", "<task-notification …>", "task:t9", None, mentioned=True, parts=(chart,)
    )

    async def serve(folder: Path, provider: ScriptedProvider) -> tuple[App, MediaChannel]:
        folder.mkdir(exist_ok=True)
        (folder / "personas").mkdir(exist_ok=True)
        (folder / "personas" / "default.md").write_text(COORDINATOR)
        config = make_config(folder, personas={"dirs": [str(folder / "personas")]})
        channel = MediaChannel()
        app = App(config, base_dir=folder, provider=provider, channels=[channel], web_server=False)
        await app.__aenter__()
        return app, channel

    stalled = ScriptedProvider([Reply("never", wait=asyncio.Event())])
    first, _ = await serve(tmp_path / "a", stalled)
    try:
        await first.gateway.handle(notice)
        await asyncio.wait_for(stalled.wait_requests(1), 5)
        snapshot(tmp_path / "a", tmp_path / "b")  # what a kill -9 would leave
    finally:
        await first.stop()

    provider = ScriptedProvider([Reply("The chart is ready.")])
    second, channel = await serve(tmp_path / "b", provider)
    try:
        await second.gateway.wait_idle()
        [turn] = await second.store.recent_turns(
            channel="fake", conversation_key=CHAT.key, user_id="u1"
        )
    finally:
        await second.stop()
    assert channel.shown()[-1] == "The chart is ready."
    assert channel.media[-1] == (chart,)
    assert (turn.status, turn.final_parts) == ("completed", (chart,))


def test_the_message_a_background_result_becomes_keeps_its_media_on_the_redis_queue() -> None:
    chart = ImagePart(BlobRef("d" * 64, "image/png", 20, "sales.png", "tool:chart"))
    notice = InboundMessage(CHAT, "u1", "<task-notification …>", "task:t9", None, parts=(chart,))
    assert messages.load(messages.dump(notice)) == notice
