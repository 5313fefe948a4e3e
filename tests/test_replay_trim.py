"""An idle conversation's replay buffer is let go of, and a tab resuming after that still gets
what it missed (from the stored transcript) or nothing twice."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from adapters.base import ChatRef, OutboundContent
from adapters.hub import MemoryEventHub
from adapters.hub.base import CLEARING_TYPE
from adapters.hub.local import TRIMS_PER_FRAME
from adapters.websocket import WebSocketChannel
from bot.pipeline.transcript import StoreHistory
from bot.storage import SqliteStore
from tests.conftest import ORIGIN, WsClient


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Sink:
    def __init__(self) -> None:
        self.frames: list[str] = []

    def push(self, frame: str) -> bool:
        self.frames.append(frame)
        return True


async def answer(hub: MemoryEventHub, conversation: str, message_id: str) -> None:
    await hub.publish(conversation, "message.user", {"message_id": f"u-{message_id}", "text": "q"})
    await hub.publish(conversation, "message.created", {"message_id": message_id, "text": "…"})
    await hub.publish(conversation, "message.updated", {"message_id": message_id, "text": "a"})
    await hub.publish(conversation, "message.completed", {"message_id": message_id, "text": "ab"})


def seqs(replay: list[str]) -> list[int]:
    return [json.loads(frame)["seq"] for frame in replay]


async def test_a_quiet_conversation_keeps_no_frames_and_its_seq() -> None:
    clock = Clock()
    hub = MemoryEventHub(replay_events=200, replay_idle_s=120, clock=clock)
    tab = Sink()
    await hub.attach("a", tab, None)  # an open tab does not keep the frames either
    await answer(hub, "a", "m1")
    clock.now += 60
    await answer(hub, "b", "m2")
    assert seqs((await hub.attach("a", Sink(), 0))[1]) == [1, 2, 4]  # not quiet long enough
    kept = hub.footprint()["kept_bytes"]

    clock.now += 61  # "a" quiet for 121 s; the next frame anywhere lets its frames go
    await hub.publish("b", "agent.started", {"task_id": "t1"})
    assert await hub.attach("a", Sink(), 0) == (4, [], 4)  # its seq, nothing kept: floor 4
    assert hub.footprint()["kept_bytes"] < kept
    assert len(tab.frames) == 4  # the tab had them all, live

    await answer(hub, "a", "m3")  # it goes on numbering where it was
    assert seqs((await hub.attach("a", Sink(), 4))[1]) == [5, 6, 8]


async def test_many_gone_quiet_together_are_trimmed_a_few_per_frame() -> None:
    clock = Clock()
    hub = MemoryEventHub(replay_events=200, replay_idle_s=120, clock=clock)
    many = 3 * TRIMS_PER_FRAME
    for n in range(many):
        await answer(hub, f"c{n}", f"m{n}")
    clock.now += 121
    await hub.publish("other", "agent.started", {"task_id": "t1"})  # one frame: a few trimmed
    kept = [n for n in range(many) if (await hub.attach(f"c{n}", Sink(), 0))[1]]
    assert kept == list(range(TRIMS_PER_FRAME, many))
    for _ in range(2):
        await hub.publish("other", "agent.started", {"task_id": "t1"})
    assert not [n for n in range(many) if (await hub.attach(f"c{n}", Sink(), 0))[1]]


async def test_an_answer_still_open_keeps_its_frames_until_it_is_done() -> None:
    clock = Clock()
    hub = MemoryEventHub(replay_events=200, replay_idle_s=120, clock=clock)
    await hub.publish("a", "message.created", {"message_id": "m1", "text": "…"})
    clock.now += 600  # a long tool call, say
    await hub.publish("b", "agent.started", {"task_id": "t1"})
    assert seqs((await hub.attach("a", Sink(), 0))[1]) == [1]

    await hub.publish("a", "message.completed", {"message_id": "m1", "text": "done"})
    clock.now += 121
    await hub.publish("b", "agent.started", {"task_id": "t2"})
    assert (await hub.attach("a", Sink(), 0))[1] == []


async def test_a_cleared_conversation_keeps_its_clearing_frame() -> None:
    clock = Clock()
    hub = MemoryEventHub(replay_events=200, replay_idle_s=120, clock=clock)
    await answer(hub, "a", "m1")
    await hub.publish("a", CLEARING_TYPE, {})
    await answer(hub, "a", "m2")
    clock.now += 121
    await hub.publish("b", "agent.started", {"task_id": "t1"})
    _, replay, floor = await hub.attach("a", Sink(), 3)
    assert [json.loads(frame)["type"] for frame in replay] == [CLEARING_TYPE]
    assert floor == 9  # m2's frames went with the rest: the transcript is needed


async def test_without_replay_idle_s_the_frames_stay() -> None:
    clock = Clock()
    hub = MemoryEventHub(replay_events=200, clock=clock)  # the sessions API's hub
    await answer(hub, "a", "m1")
    clock.now += 10_000
    await answer(hub, "b", "m2")
    assert seqs((await hub.attach("a", Sink(), 0))[1]) == [1, 2, 4]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[WebSocketChannel, str, SqliteStore]]:
    """A web socket channel whose conversations let their frames go as soon as they are quiet,
    with the store's transcript behind it; one turn stored for visitor-0001."""
    async with SqliteStore(tmp_path / "bot.db") as store:
        identity = "v:visitor-0001"
        key = {"channel": "websocket", "conversation_key": f"websocket:{identity}"}
        session_id = await store.active_session(**key, user_id=identity)
        await store.create_turn(
            turn_id="t1",
            session_id=session_id,
            channel=key["channel"],
            conversation_key=key["conversation_key"],
            inbound_event_ids=["e1"],
            placeholder={"channel": "websocket", "chat_id": identity, "message_id": "m_old"},
            inbound_messages=[{"message_id": "c1", "text": "stored question"}],
        )
        await store.finish_turn("t1", status="completed", final_text="stored answer")
        channel = WebSocketChannel(
            allowed_origins=[ORIGIN],
            history=StoreHistory(store, lambda: "default"),
            replay_idle_s=0,
        )
        app = web.Application()
        channel.install(app)
        runner = web.AppRunner(app, shutdown_timeout=1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        try:
            yield channel, f"http://127.0.0.1:{runner.addresses[0][1]}/ws", store
        finally:
            await runner.cleanup()


async def test_a_tab_resuming_after_the_trim_gets_the_stored_transcript(
    served: tuple[WebSocketChannel, str, SqliteStore],
) -> None:
    channel, url, _ = served
    chat = ChatRef("websocket", "v:visitor-0001")
    async with aiohttp.ClientSession() as client:
        first = WsClient(await client.ws_connect(url, headers={"Origin": ORIGIN}))
        await first.hello()
        handle = await channel.send(chat, OutboundContent("…"))  # seq 1: the tab sees it
        await first.until_type("message.created")
        await first.ws.close()
        # the answer ends while no tab is open, and the conversation is quiet at once
        await channel.edit(handle, OutboundContent("stored answer"), final=True)  # seq 2

        again = WsClient(await client.ws_connect(url, headers={"Origin": ORIGIN}))
        ready = await again.hello(resume_after=1)
        stored = [await again.next() for _ in range(2)]
        await channel.send(chat, OutboundContent("live"), final=True)
        live = await again.next()

        caught_up = WsClient(await client.ws_connect(url, headers={"Origin": ORIGIN}))
        seq = (await caught_up.hello(resume_after=4))["seq"]
        await channel.send(chat, OutboundContent("next"), final=True)
        after: dict[str, Any] = await caught_up.next()
    assert ready["seq"] == 2
    assert [(f["type"], f["text"], f.get("history")) for f in stored] == [
        ("message.user", "stored question", True),
        ("message.completed", "stored answer", True),
    ]
    assert (live["type"], live["seq"]) == ("message.created", 3)
    # up to date: nothing from the store, the next live frame right after ready
    assert seq == 4 and (after["type"], after["seq"], after["text"]) == (
        "message.created",
        5,
        "next",
    )
