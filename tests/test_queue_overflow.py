"""A message past a conversation's full queue (`max_queued`, 100 by default; 1 here) is refused in
the client's protocol before it is taken: the web socket answers `queue_full` (and drops it from
every tab's transcript), the sessions API `429` `queue_full`. The queued message still gets its
own answer, never the refusal, and a resend once the queue has room is answered as a first.
Over the real app (gateway, store, scripted model), real web socket and HTTP clients.
"""

from __future__ import annotations

import asyncio

import aiohttp

from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.conversations import LocalConversations
from bot.runtime.app import App
from tests.api_kit import ApiClient, StartApi, start_api_fixture  # noqa: F401
from tests.conftest import Running, connect, eventually

DEADLINE = 10.0  # only reached when something hangs


async def _one_queued(app: App) -> None:
    """Until one message waits behind the running turn."""
    conversations = app.gateway.conversations
    assert isinstance(conversations, LocalConversations)  # embedded: one process
    await eventually(lambda: conversations.waiting() == 1)


async def test_a_web_socket_message_past_a_full_queue_gets_queue_full_and_no_notice(
    running: Running, session: aiohttp.ClientSession
) -> None:
    gate = asyncio.Event()
    provider = ScriptedProvider([Reply("one", wait=gate), Reply("two"), Reply("three")])
    app = await running(provider)
    app.gateway.conversations.max_queued = 1  # type: ignore[attr-defined]
    tab = await connect(session, app)
    await tab.hello("visitor-0001")
    await tab.send(type="message", text="first", client_message_id="c0")
    await asyncio.wait_for(provider.wait_requests(1), DEADLINE)
    await tab.send(type="message", text="second", client_message_id="c1")
    await _one_queued(app)
    await tab.send(type="message", text="third", client_message_id="c2")
    refused = await tab.until(lambda f: f["type"] == "error")
    assert (refused["code"], refused["message_id"]) == ("queue_full", "c2"), refused
    dropped = await tab.until_type("message.dropped")
    assert (dropped["message_id"], dropped["reason"]) == ("c2", "queue_full")
    gate.set()
    await tab.until(lambda f: f["type"] == "message.completed" and f["text"] == "two")
    answers = [f for f in tab.frames if f["type"] == "message.created"]
    assert [f["reply_to"] for f in answers] == ["c0", "c1"]  # no notice replying to c2
    await tab.send(type="message", text="third", client_message_id="c2")  # room again
    taken = await tab.until(lambda f: f["type"] == "message.user" and f["message_id"] == "c2")
    assert "duplicate" not in taken
    assert (await tab.until_type("message.completed"))["text"] == "three"
    completed = [f["text"] for f in tab.frames if f["type"] == "message.completed"]
    assert completed == ["one", "two", "three"]


async def test_an_api_message_past_a_full_queue_is_refused_429_and_the_queued_one_answered(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    gate = asyncio.Event()
    provider = ScriptedProvider([Reply("one", wait=gate), Reply("two"), Reply("three")])
    app = await start_api(provider)
    app.gateway.conversations.max_queued = 1  # type: ignore[attr-defined]
    api = ApiClient(session, app)
    sid = await api.new_session()
    first = asyncio.create_task(api.ask(sid, "first", client_message_id="c0"))
    await asyncio.wait_for(provider.wait_requests(1), DEADLINE)
    second = asyncio.create_task(api.ask(sid, "second", client_message_id="c1"))
    await _one_queued(app)
    refused = await asyncio.wait_for(api.ask(sid, "third", client_message_id="c2"), DEADLINE)
    assert refused.status == 429, refused
    assert refused.events[0].data["error"]["code"] == "queue_full"
    gate.set()
    assert (await asyncio.wait_for(first, DEADLINE)).last("message.completed")["text"] == "one"
    own = await asyncio.wait_for(second, DEADLINE)
    assert own.last("message.completed")["text"] == "two"  # its own answer, not the refusal
    await app.gateway.wait_idle()
    again = await asyncio.wait_for(api.ask(sid, "third", client_message_id="c2"), DEADLINE)
    assert again.status == 200 and again.last("message.completed")["text"] == "three"
    assert len(provider.requests) == 3
