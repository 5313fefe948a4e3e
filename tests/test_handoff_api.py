"""The sessions API during a handoff: its event stream carries `handoff.updated` (mode and the
operator's name) and the operator's replies as answers; the model is not asked meanwhile."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp

from adapters.base import ChatRef
from agent.providers.scripted import Reply, ScriptedProvider
from bot.handoff.model import Operator
from bot.runtime.app import App
from tests.api_kit import ApiClient, Event, api_section, read_events
from tests.conftest import make_config

TOKEN = "admin-api-handoff-token-11"


async def test_the_event_stream_shows_who_answers(tmp_path: Path) -> None:
    provider = ScriptedProvider([Reply("Hi from the bot."), Reply("Back again.")])
    config = make_config(tmp_path, channels=api_section(), admin={"token": TOKEN})
    async with (
        App(config, base_dir=tmp_path, provider=provider) as app,
        aiohttp.ClientSession() as http,
    ):
        assert app.handoff is not None
        client = ApiClient(http, app)
        session_id = await client.new_session(user_id="u1")
        answered = await client.ask(session_id, "hello")
        assert answered.last("message.completed")["text"] == "Hi from the bot."
        seen: list[Event] = []
        done = asyncio.Event()

        async def follow() -> None:
            # from after the answer: what happens before the stream is open is replayed
            after = str(answered.ids()[-1])
            async with http.get(
                f"{client.base}/sessions/{session_id}/events",
                headers=client.headers(**{"Last-Event-ID": after}),
            ) as response:
                async for event in read_events(response):
                    if event is None:
                        continue
                    seen.append(event)
                    if event.type == "handoff.updated" and event.data["mode"] == "bot":
                        done.set()
                        return

        following = asyncio.create_task(follow())
        [conversation] = await app.store.conversations(channel="api")
        chat = await app.store.conversation_chat(conversation.conversation_key)
        assert isinstance(chat, ChatRef)
        desk = app.handoff.desk
        ana = Operator("admin:Ana", "Ana")
        row = await desk.take_over(chat, conversation.user_id, ana, via="test")
        await desk.reply(row.id, ana, "Ana here, how can I help?", event_id="r1", via="test")
        await desk.end(row.id, ana, "release", via="test")
        async with asyncio.timeout(30):
            await done.wait()
        await following  # it returns once it saw the bot back
    changes = [e.data for e in seen if e.type == "handoff.updated"]
    assert [(c["mode"], c["operator"]) for c in changes] == [("human", "Ana"), ("bot", None)]
    assert changes[-1]["status"] == "released" and all(isinstance(c["seq"], int) for c in changes)
    texts = [e.data["text"] for e in seen if e.type == "message.completed"]
    assert any("Ana here, how can I help?" in t for t in texts)
    assert len(provider.requests) == 1  # the model was not asked while Ana had it
