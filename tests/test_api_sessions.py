"""The sessions API through a running app: SSE answers, resume, stop, actions, history pages."""

from __future__ import annotations

import asyncio

import aiohttp

from adapters.api.records import ApiMessage
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.turn import STOPPED
from content.texts import t
from tests.api_kit import ApiClient, StartApi, start_api_fixture  # noqa: F401


async def test_a_message_streams_the_websocket_events_and_lands_in_the_history(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider(
        [
            Reply(calls=[("get_current_datetime", {"timezone": "Asia/Tokyo"})]),
            Reply("It is **noon** in Tokyo.", chunks=4, delay_s=0.02),
        ]
    )
    app = await start_api(provider)
    api = ApiClient(session, app)
    sid = await api.new_session(user_id="user-42")
    stream = await api.ask(sid, "time in Tokyo?", client_message_id="c1")
    assert stream.status == 200
    assert stream.headers["Content-Type"].startswith("text/event-stream")
    types = stream.types()
    assert types[0] == "message.created" and types[-1] == "message.completed"
    assert {"tool.started", "tool.finished", "message.updated"} <= set(types)
    created = stream.events[0].data
    assert created["reply_to"] == "c1"
    completed = stream.last("message.completed")
    assert completed["message_id"] == created["message_id"]
    assert completed["text"] == "It is **noon** in Tokyo."
    ids = stream.ids()
    assert ids == sorted(ids) and len(ids) == len(stream.events)  # every event has its seq
    assert all(e.id == e.data["seq"] for e in stream.events)
    assert provider.requests[0].messages[-1].content == "time in Tokyo?"
    status, page = await api.call("GET", f"/sessions/{sid}/messages")
    assert status == 200 and page["has_more"] is False
    shown = [(m["role"], m["id"], m["text"], m["status"]) for m in page["messages"]]
    assert shown == [
        ("user", "c1", "time in Tokyo?", "received"),
        ("assistant", created["message_id"], "It is **noon** in Tokyo.", "completed"),
    ]
    assert page["messages"][1]["reply_to"] == "c1"


async def test_last_event_id_resumes_a_dropped_stream_and_a_resend_is_answered_once(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("one two three four five six", chunks=6, delay_s=0.05)])
    app = await start_api(provider)
    api = ApiClient(session, app)
    sid = await api.new_session()
    first = await api.ask(sid, "count", client_message_id="c1", until=2)  # then the client drops
    seen = first.ids()[-1]
    again = await api.stream(
        "POST",
        f"/sessions/{sid}/messages",
        {"text": "count", "client_message_id": "c1"},
        headers={"Last-Event-ID": str(seen)},
    )
    assert again.status == 200
    assert again.ids() and min(again.ids()) > seen  # nothing the client had seen is sent twice
    assert again.types()[-1] == "message.completed"
    assert again.last("message.completed")["text"] == "one two three four five six"
    await app.gateway.wait_idle()
    assert len(provider.requests) == 1  # the resend was not a second message
    # a plain follower resumes the same way
    follow = await api.stream(
        "GET", f"/sessions/{sid}/events", until=1, headers={"Last-Event-ID": str(seen)}
    )
    assert follow.ids()[0] > seen
    status, page = await api.call("GET", f"/sessions/{sid}/messages")
    assert [m["role"] for m in page["messages"]] == ["user", "assistant"]


async def test_stop_ends_the_answer_in_progress(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    hold = asyncio.Event()
    provider = ScriptedProvider([Reply("never shown", wait=hold), Reply("after the stop")])
    app = await start_api(provider)
    api = ApiClient(session, app)
    sid = await api.new_session()
    answer = asyncio.create_task(api.ask(sid, "a long job", client_message_id="j1"))
    await asyncio.wait_for(provider.wait_requests(1), 5)
    status, body = await api.call("POST", f"/sessions/{sid}/stop")
    assert (status, body) == (202, {"status": "stop_requested"})
    stream = await asyncio.wait_for(answer, 5)
    assert stream.last("message.completed")["text"] == STOPPED
    hold.set()
    after = await api.ask(sid, "fresh start")
    assert after.last("message.completed")["text"] == "after the stop"


async def test_an_action_reaches_the_model_as_a_button_press(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("Confirmed.")])
    app = await start_api(provider)
    api = ApiClient(session, app)
    sid = await api.new_session()
    pressed = {"action_id": "confirm", "value": "yes", "label": "Confirm", "message_id": "m_1"}
    stream = await api.stream("POST", f"/sessions/{sid}/actions", pressed)
    assert stream.status == 200 and stream.last("message.completed")["text"] == "Confirmed."
    told = provider.requests[0].messages[-1].content
    assert "Confirm" in told and "yes" in told
    _, page = await api.call("GET", f"/sessions/{sid}/messages")
    user = page["messages"][0]
    assert user["role"] == "user" and user["action"] == pressed
    assert user["text"] == "Confirm"  # the label, as the web socket's transcript shows it


async def test_a_message_coalesced_into_the_next_turn_streams_until_that_turn_answers(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    hold = asyncio.Event()
    provider = ScriptedProvider([Reply("first answer", wait=hold), Reply("second answer")])
    app = await start_api(provider)
    api = ApiClient(session, app)
    sid = await api.new_session()
    first = asyncio.create_task(api.ask(sid, "one", client_message_id="a"))
    await asyncio.wait_for(provider.wait_requests(1), 5)
    second = asyncio.create_task(api.ask(sid, "two", client_message_id="b"))
    third = asyncio.create_task(api.ask(sid, "three", client_message_id="c"))
    await asyncio.sleep(0.1)  # both are queued behind the held turn
    hold.set()
    streams = await asyncio.wait_for(asyncio.gather(first, second, third), 5)
    finals = [s.last("message.completed")["text"] for s in streams]
    assert finals == ["first answer", "second answer", "second answer"]


async def test_a_resend_after_the_events_are_gone_gets_the_recorded_answer(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("kept in the history")])
    app = await start_api(provider, replay_events=0)  # the hub keeps no frames to replay
    api = ApiClient(session, app)
    sid = await api.new_session()
    first = await api.ask(sid, "hello", client_message_id="c1")
    again = await api.ask(sid, "hello", client_message_id="c1")
    assert again.types() == ["message.completed"]
    assert again.events[0].data["text"] == "kept in the history"
    assert again.events[0].data["message_id"] == first.last("message.completed")["message_id"]
    assert len(provider.requests) == 1


async def test_stop_sent_as_text_ends_with_the_stopped_answer(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    hold = asyncio.Event()
    provider = ScriptedProvider([Reply("never shown", wait=hold)])
    app = await start_api(provider)
    api = ApiClient(session, app)
    sid = await api.new_session()
    answer = asyncio.create_task(api.ask(sid, "a long job"))
    await asyncio.wait_for(provider.wait_requests(1), 5)
    stopping = await asyncio.wait_for(api.ask(sid, "/stop", client_message_id="s1"), 5)
    assert stopping.last("message.completed")["text"] == STOPPED
    assert (await asyncio.wait_for(answer, 5)).last("message.completed")["text"] == STOPPED
    again = await asyncio.wait_for(api.ask(sid, "/stop", client_message_id="s1"), 5)
    assert again.last("message.completed")["text"] == STOPPED  # a resent /stop ends as well
    hold.set()


async def test_open_streams_end_when_the_server_stops(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    app = await start_api(ScriptedProvider([]))
    api = ApiClient(session, app)
    sid = await api.new_session()
    follower = asyncio.create_task(api.stream("GET", f"/sessions/{sid}/events"))

    async def streams() -> int:
        async with session.get(f"{app.url}/healthz") as response:
            return int((await response.json())["api_streams"])

    while await streams() == 0:  # noqa: ASYNC110 (the follower attaches over HTTP)
        await asyncio.sleep(0.01)
    started = asyncio.get_running_loop().time()
    await app.stop()
    stream = await asyncio.wait_for(follower, 5)
    assert stream.status == 200 and stream.events == []
    assert asyncio.get_running_loop().time() - started < 2  # not the 5 s shutdown timeout


async def test_after_a_restart_sessions_history_and_resends_carry_on(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    first = await start_api(ScriptedProvider([Reply("before the restart")]))
    api = ApiClient(session, first)
    sid = await api.new_session()
    asked = await api.ask(sid, "hello", client_message_id="c1")
    await first.gateway.wait_idle()
    await first.stop()
    provider = ScriptedProvider([Reply("after the restart")])
    second = await start_api(provider)  # the same database; the event hub starts empty
    api = ApiClient(session, second)
    last_seen = str(asked.ids()[-1])
    again = await api.stream(
        "POST",
        f"/sessions/{sid}/messages",
        {"text": "hello", "client_message_id": "c1"},
        headers={"Last-Event-ID": last_seen},
    )
    assert [e.data["text"] for e in again.events] == ["before the restart"]
    assert provider.requests == []  # answered once, before the restart
    follow_up = await api.ask(sid, "and now?", headers={"Last-Event-ID": last_seen})
    assert follow_up.last("message.completed")["text"] == "after the restart"
    assert follow_up.types()[0] == "message.created"  # the new seqs are not taken as seen
    _, page = await api.call("GET", f"/sessions/{sid}/messages")
    texts = [m["text"] for m in page["messages"]]
    assert texts == ["hello", "before the restart", "and now?", "after the restart"]


async def test_a_resend_of_a_message_recorded_but_never_handed_over_is_answered(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    first = await start_api(ScriptedProvider([]))
    api = ApiClient(session, first)
    sid = await api.new_session()
    # what a process that stopped between recording a message and handing it over leaves
    await first.store.add_api_message(ApiMessage(sid, "c1", "user", "still there?", "received"))
    await first.stop()
    provider = ScriptedProvider([Reply("Yes, answered now.")])
    second = await start_api(provider, stream_timeout_s=5)
    again = await ApiClient(session, second).ask(sid, "still there?", client_message_id="c1")
    assert again.last("message.completed")["text"] == "Yes, answered now."
    assert provider.requests[0].messages[-1].content == "still there?"
    twice = await ApiClient(session, second).ask(sid, "still there?", client_message_id="c1")
    assert twice.last("message.completed")["text"] == "Yes, answered now."
    assert len(provider.requests) == 1  # answered once


async def test_a_client_that_accepts_only_json_gets_the_answer_without_a_stream(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("Plain JSON.", chunks=3)])
    app = await start_api(provider)
    api = ApiClient(session, app)
    sid = await api.new_session()
    body = {"text": "server to server", "client_message_id": "c1"}
    json_only = {"Accept": "application/json"}
    status, answer = await api.call("POST", f"/sessions/{sid}/messages", body, json_only)
    assert status == 200
    assert answer["type"] == "message.completed" and answer["text"] == "Plain JSON."
    again = await api.call("POST", f"/sessions/{sid}/messages", body, json_only)
    assert again == (200, answer)  # a resend waits on the same answer
    assert len(provider.requests) == 1


async def test_an_answer_slower_than_the_stream_timeout_ends_the_wait_with_an_error(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    hold = asyncio.Event()
    provider = ScriptedProvider([Reply("late", wait=hold)])
    app = await start_api(provider, stream_timeout_s=0.3, keepalive_s=0.1)
    api = ApiClient(session, app)
    sid = await api.new_session()
    stream = await api.ask(sid, "slow one", client_message_id="c1")
    assert stream.types() == ["message.created", "error"] and stream.comments >= 1
    assert stream.events[-1].data["code"] == "stream_timeout" and stream.events[-1].id is None
    body = {"text": "slow one", "client_message_id": "c1"}
    status, error = await api.call(
        "POST", f"/sessions/{sid}/messages", body, {"Accept": "application/json"}
    )
    assert status == 504 and error["error"]["code"] == "stream_timeout"
    hold.set()
    resumed = await api.ask(sid, "slow one", client_message_id="c1")
    assert resumed.last("message.completed")["text"] == "late"


async def test_the_gateways_own_texts_follow_accept_language(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    app = await start_api(ScriptedProvider([]))
    api = ApiClient(session, app)
    sid = await api.new_session()
    header = {"Accept-Language": "ja, de-AT;q=0.8, en;q=0.5"}  # no Japanese here: German
    first = await api.stream("POST", f"/sessions/{sid}/messages", {"text": "/new"}, headers=header)
    assert first.last("message.completed")["text"] == t("de", "command.started_new")
    # kept for the session: the next message without the header is answered in German too
    again = await api.ask(sid, "/new")
    assert again.last("message.completed")["text"] == t("de", "command.started_new")


async def test_a_resend_with_a_malformed_attachment_is_refused_not_replayed(
    start_api: StartApi, session: aiohttp.ClientSession
) -> None:
    """The same client_message_id replays its answer, but only for a well-formed body: the
    attachment is checked before the id is looked up."""
    app = await start_api(ScriptedProvider([Reply("hello")]))
    api = ApiClient(session, app)
    sid = await api.new_session()
    first = await api.ask(sid, "hi", client_message_id="c1")
    assert first.last("message.completed")["text"] == "hello"
    forged = {"type": "file", "blob_id": "x", "mime_type": "a/b", "size": 0, "ref": None}
    body = {"text": "hi", "client_message_id": "c1", "attachments": [forged]}
    status, refused = await api.call("POST", f"/sessions/{sid}/messages", body)
    assert 400 <= status < 500 and refused["error"]["code"] == "attachment_invalid"
