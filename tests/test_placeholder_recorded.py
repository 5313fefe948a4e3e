"""Where the gateway makes a placeholder's id itself (the web socket, the sessions API), the turn's
record names that id before the `message.created` frame goes out: a subscriber of the event hub
looks at the store the instant the frame reaches it. (tests/test_kill_placeholder.py kills a
process at that instant.)
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from adapters.api.base import hub_key
from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from tests.api_kit import ApiClient, StartApi, start_api_fixture  # noqa: F401
from tests.conftest import Running, connect, db_rows


class StoreAtCreation:
    """A hub subscriber: at each `message.created`, what the turns' records say."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.seen: list[tuple[str, list[Any]]] = []

    def push(self, frame: str) -> bool:
        decoded = json.loads(frame)
        if decoded["type"] == "message.created":
            rows = db_rows(self.app, "select placeholder from turns where status = 'running'")
            recorded = [json.loads(row[0]).get("message_id") for row in rows]
            self.seen.append((decoded["message_id"], recorded))
        return True


async def test_a_web_socket_placeholder_is_recorded_before_its_frame_goes_out(
    running: Running, session: aiohttp.ClientSession
) -> None:
    app = await running(ScriptedProvider([Reply("hi")]))
    watch = StoreAtCreation(app)
    hub = app.channels["websocket"]._hub  # type: ignore[attr-defined]  # the channel's own hub
    await hub.attach("v:visitor-0001", watch, None)
    tab = await connect(session, app)
    await tab.hello("visitor-0001")
    await tab.ask("hello", client_message_id="c1")
    [(message_id, recorded)] = watch.seen
    assert recorded == [message_id]


async def test_a_sessions_api_placeholder_is_recorded_before_its_event_goes_out(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    app = await start_api(ScriptedProvider([Reply("hi")]))
    api = ApiClient(session, app)
    sid = await api.new_session()
    watch = StoreAtCreation(app)
    await app.channels["api"].hub.attach(hub_key(sid), watch, None)  # type: ignore[attr-defined]
    stream = await api.ask(sid, "hello", client_message_id="c1")
    assert stream.last("message.completed")["text"] == "hi"
    [(message_id, recorded)] = watch.seen
    assert recorded == [message_id]
