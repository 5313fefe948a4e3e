"""The sessions API and `/stop`: a message the stop dropped from the queue is told so, at once.

Before, such a message's stream waited until `stream_timeout_s`, and a resend of it (same
`client_message_id`) was never answered: its event id stays claimed. Now its stream ends with
`message.dropped`, the history shows it `dropped`, and a resend gets the same outcome at once
(a client that wants it answered sends it with a new `client_message_id`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aiohttp

from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.conversations import LocalConversations
from bot.pipeline.turn import STOPPED
from bot.runtime.app import App
from tests.api_kit import ApiClient, StartApi, Stream, start_api_fixture  # noqa: F401
from tests.conftest import eventually

DEADLINE = 10.0  # far below stream_timeout_s (300 s): only reached when a stream hangs


@dataclass
class HeldQueue:
    """A session whose turn for `j1` is held at the model until `hold` is set, `q1` queued
    behind it."""

    app: App
    api: ApiClient
    provider: ScriptedProvider
    sid: str
    hold: asyncio.Event
    running: asyncio.Task[Stream]
    queued: asyncio.Task[Stream]


async def _queued_behind_a_held_turn(
    start_api: StartApi, session: aiohttp.ClientSession, *later: Reply
) -> HeldQueue:
    """`later`: the model's replies after the held one."""
    hold = asyncio.Event()
    provider = ScriptedProvider([Reply("never shown", wait=hold), *later])
    app = await start_api(provider)
    api = ApiClient(session, app)
    sid = await api.new_session()
    running = asyncio.create_task(api.ask(sid, "a long job", client_message_id="j1"))
    await asyncio.wait_for(provider.wait_requests(1), DEADLINE)
    queued = asyncio.create_task(api.ask(sid, "and then this", client_message_id="q1"))
    conversations = app.gateway.conversations
    assert isinstance(conversations, LocalConversations)  # embedded: one process
    await eventually(lambda: conversations.waiting() == 1)
    return HeldQueue(app, api, provider, sid, hold, running, queued)


async def test_a_message_dropped_by_a_stop_ends_its_stream_with_message_dropped(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    held = await _queued_behind_a_held_turn(start_api, session, Reply("after the stop"))
    api, sid = held.api, held.sid
    assert await api.call("POST", f"/sessions/{sid}/stop") == (202, {"status": "stop_requested"})
    dropped = await asyncio.wait_for(held.queued, DEADLINE)
    assert dropped.types()[-1] == "message.dropped", dropped.events
    last = dropped.events[-1]
    assert last.data["message_id"] == "q1" and last.data["reason"] == "stopped"
    assert last.id == last.data["seq"]  # an event of the session like any other
    stopped = await asyncio.wait_for(held.running, DEADLINE)
    assert stopped.last("message.completed")["text"] == STOPPED
    held.hold.set()
    _, page = await api.call("GET", f"/sessions/{sid}/messages")
    statuses = {m["id"]: m["status"] for m in page["messages"] if m["role"] == "user"}
    assert statuses == {"j1": "received", "q1": "dropped"}  # j1 was answered (stopped)
    after = await asyncio.wait_for(api.ask(sid, "fresh start"), DEADLINE)
    assert after.last("message.completed")["text"] == "after the stop"
    assert len(held.provider.requests) == 2  # q1 never reached the model


async def test_a_resend_of_a_dropped_message_gets_the_same_outcome_at_once(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    held = await _queued_behind_a_held_turn(start_api, session)
    api, sid = held.api, held.sid
    await api.call("POST", f"/sessions/{sid}/stop")
    first = (await asyncio.wait_for(held.queued, DEADLINE)).events[-1]
    await asyncio.wait_for(held.running, DEADLINE)
    held.hold.set()
    again = await asyncio.wait_for(api.ask(sid, "and then this", client_message_id="q1"), DEADLINE)
    assert again.types() == ["message.dropped"]
    assert again.events[0].data == first.data  # the same event, seq and all
    as_json = await asyncio.wait_for(
        api.call(
            "POST",
            f"/sessions/{sid}/messages",
            {"text": "and then this", "client_message_id": "q1"},
            {"Accept": "application/json"},
        ),
        DEADLINE,
    )
    assert as_json[0] == 409 and as_json[1]["error"]["code"] == "dropped"
    await held.app.gateway.wait_idle()
    assert len(held.provider.requests) == 1


async def test_a_stop_sent_as_text_drops_the_queue_the_same_way(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    held = await _queued_behind_a_held_turn(start_api, session)
    stopping = await asyncio.wait_for(
        held.api.ask(held.sid, "/stop", client_message_id="s1"), DEADLINE
    )
    assert stopping.last("message.completed")["text"] == STOPPED
    dropped = await asyncio.wait_for(held.queued, DEADLINE)
    assert dropped.types()[-1] == "message.dropped"
    await asyncio.wait_for(held.running, DEADLINE)
    held.hold.set()


async def test_a_stop_with_nothing_queued_drops_nothing(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("done"), Reply("done again")])
    app = await start_api(provider)
    api = ApiClient(session, app)
    sid = await api.new_session()
    await api.ask(sid, "one", client_message_id="a")
    follower = asyncio.create_task(api.stream("GET", f"/sessions/{sid}/events", until=2))
    await eventually(lambda: app.channels["api"].health()["api_streams"] == 1)  # type: ignore[attr-defined]
    await api.call("POST", f"/sessions/{sid}/stop")  # "Nothing to stop."
    await api.ask(sid, "two", client_message_id="b")
    followed = await asyncio.wait_for(follower, DEADLINE)
    assert "message.dropped" not in followed.types()
    _, page = await api.call("GET", f"/sessions/{sid}/messages")
    assert {m["status"] for m in page["messages"] if m["role"] == "user"} == {"received"}
