"""The stored transcript's parts: the store read behind a slow page load, the migration of turns
from before it, and when the channel asks the store at all."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from sqlite_utils import Database

from adapters.base import ChatRef, OutboundContent
from adapters.history import StoredMessage
from adapters.hub import Attached
from adapters.websocket import WebSocketChannel
from adapters.websocket.transcript import falls_short
from bot.pipeline.transcript import StoreHistory
from bot.storage import SqliteStore, migrate
from tests.conftest import ORIGIN, WsClient


class GatedHistory:
    """The store's history, held at a gate: the store read a page load waits for, made slow."""

    def __init__(self, inner: StoreHistory) -> None:
        self.inner = inner
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def recent(self, chat: ChatRef, user_id: str) -> list[StoredMessage]:
        self.entered.set()
        await self.gate.wait()
        return await self.inner.recent(chat, user_id)


async def test_live_frames_during_the_store_read_come_after_the_stored_transcript(
    tmp_path: Path,
) -> None:
    identity = "v:visitor-0001"
    async with SqliteStore(tmp_path / "bot.db") as store:
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
        history = GatedHistory(StoreHistory(store, lambda: "default"))
        channel = WebSocketChannel(allowed_origins=[ORIGIN], history=history)
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
                await history.entered.wait()
                chat = ChatRef("websocket", identity)
                await channel.send(chat, OutboundContent("live answer"), final=True)
                history.gate.set()
                frames = [await tab.next() for _ in range(5)]
        finally:
            await runner.cleanup()
    assert [(f["type"], f.get("text"), f.get("seq")) for f in frames] == [
        ("ready", None, 0),
        ("message.user", "stored question", None),
        ("message.completed", "stored answer", None),
        ("message.created", "live answer", 1),
        ("message.completed", "live answer", 2),
    ]


async def test_turns_from_before_the_upgrade_show_their_questions(tmp_path: Path) -> None:
    """A v5 database (no `inbound_messages`) is migrated: its web chat turns keep their
    questions, with the client's id the event id carries; a background result is no question."""
    path, identity = tmp_path / "old.db", "v:visitor-0001"
    key = {"channel": "websocket", "conversation_key": f"websocket:{identity}"}
    with Database(path) as db:
        migrate(db, target=5)
        db["chat_sessions"].insert(
            {"id": "s1", "agent_id": "default", "user_id": identity, "status": "active", **key}
        )
        for turn_id, event_id, question, answer in (
            ("t1", f"ws:{identity}:c1", "old question", "old answer"),
            ("t2", "task:x1", "<task-notification …>", "the task's answer"),
            ("t3", "ws:0f3a", "sent without an id", "third answer"),
        ):
            placeholder = {
                "channel": "websocket",
                "chat_id": identity,
                "message_id": f"m_{turn_id}",
            }
            db["turns"].insert(
                {
                    "id": turn_id,
                    "session_id": "s1",
                    "inbound_event_ids": json.dumps([event_id]),
                    "placeholder": json.dumps(placeholder),
                    "status": "completed",
                    "final_text": answer,
                    **key,
                }
            )
            for role, content in (("user", question), ("assistant", answer)):
                db["messages"].insert(
                    {"session_id": "s1", "turn_id": turn_id, "role": role, "content": content}
                    | {"is_error": 0}
                )
    async with SqliteStore(path) as store:
        recent = await StoreHistory(store, lambda: "default").recent(
            ChatRef("websocket", identity), identity
        )
    assert [(m.role, m.message_id, m.text) for m in recent] == [
        ("user", "c1", "old question"),
        ("assistant", "m_t1", "old answer"),
        ("assistant", "m_t2", "the task's answer"),
        ("user", "c_t3", "sent without an id"),
        ("assistant", "m_t3", "third answer"),
    ]


def frame(kind: str, seq: int) -> str:
    return json.dumps({"type": kind, "message_id": "m", "seq": seq})


@pytest.mark.parametrize(
    ("resume_after", "seq", "replay", "floor", "needed"),
    [
        (None, 9, [], 0, False),  # no resume_after: live frames only
        (0, 0, [], 0, True),  # a page load after a restart
        (0, 9, [frame("message.user", 4)], 3, True),  # frames 1-3 are gone
        (0, 9, [frame("conversation.cleared", 4)], 0, False),  # everything since /new is kept
        (0, 9, [frame("conversation.cleared", 4)], 9, True),  # since /new, let go of when quiet
        (12, 3, [], 0, True),  # the hub forgot (a restart): seq went back
        (9, 9, [], 9, False),  # nothing missed
        (5, 9, [frame("message.user", 6)], 5, False),  # the replay starts right after
        (5, 9, [frame("message.completed", 8)], 0, False),  # 6 and 7 superseded by 8
        (5, 9, [frame("message.completed", 8)], 7, True),  # 6 and 7 are gone
        (5, 9, [], 9, True),  # frames after 5 existed, none is kept
    ],
)
def test_when_the_stored_transcript_is_needed(
    resume_after: int | None, seq: int, replay: list[str], floor: int, needed: bool
) -> None:
    assert falls_short(resume_after, Attached(seq, replay, floor)) is needed
