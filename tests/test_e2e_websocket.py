"""The whole path through a running app with a real web socket client and the scripted model."""

import asyncio
from pathlib import Path

import aiohttp
import pytest

from agent.providers.offline import OfflineProvider
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.delivery import APOLOGY
from bot.pipeline.turn import STOPPED
from tests.conftest import Running, connect, db_rows


async def test_message_gets_placeholder_edits_and_final(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("The answer is forty-two.", chunks=6, delay_s=0.03)])
    app = await running(provider)
    client = await connect(session, app)
    ready = await client.hello()
    assert ready["visitor_id"] == "visitor-0001"
    await client.send(type="message", text="what is the answer?", client_message_id="c1")
    created = await client.until_type("message.created")
    assert created["reply_to"] == "c1"
    completed = await client.until_type("message.completed")
    assert completed["message_id"] == created["message_id"]
    assert completed["text"] == "The answer is forty-two."
    updates = [f for f in client.frames if f["type"] == "message.updated"]
    assert updates, "the placeholder was never edited while the answer streamed"
    assert all(f["message_id"] == created["message_id"] for f in updates)
    seqs = [f["seq"] for f in client.frames if "seq" in f]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert provider.requests[0].messages[-1].content == "what is the answer?"
    await app.gateway.wait_idle()  # the turn row is written just after the final edit
    rows = db_rows(app, "select status, placeholder, final_text from turns")
    assert len(rows) == 1 and rows[0][0] == "completed"
    assert created["message_id"] in rows[0][1] and rows[0][2] == completed["text"]


async def test_history_carries_to_the_next_turn_and_new_starts_fresh(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("one"), Reply("two"), Reply("three")])
    app = await running(provider)
    client = await connect(session, app)
    await client.hello()
    await client.ask("first")
    await client.ask("second")
    assert [m.content for m in provider.requests[1].messages] == ["first", "one", "second"]
    reply = await client.ask("/new")
    assert "new conversation" in reply["text"].lower()
    await client.ask("third")
    assert [m.content for m in provider.requests[2].messages] == ["third"]


async def test_stop_cancels_the_turn_and_queued_messages(
    running: Running, session: aiohttp.ClientSession
) -> None:
    hold = asyncio.Event()
    provider = ScriptedProvider([Reply("never shown", wait=hold), Reply("after stop")])
    app = await running(provider)
    client = await connect(session, app)
    await client.hello()
    await client.send(type="message", text="long job", client_message_id="j1")
    created = await client.until_type("message.created")
    await client.send(type="message", text="queued behind", client_message_id="j2")
    await asyncio.wait_for(provider.wait_requests(1), 5)
    await client.send(type="stop")
    completed = await client.until_type("message.completed")
    assert completed["message_id"] == created["message_id"]
    assert completed["text"] == STOPPED
    hold.set()
    reply = await client.ask("fresh start")
    assert reply["text"] == "after stop"
    assert [r.messages[-1].content for r in provider.requests] == ["long job", "fresh start"]


async def test_messages_during_a_turn_are_coalesced_into_the_next(
    running: Running, session: aiohttp.ClientSession
) -> None:
    hold = asyncio.Event()
    provider = ScriptedProvider([Reply("first answer", wait=hold), Reply("second answer")])
    app = await running(provider)
    client = await connect(session, app)
    await client.hello()
    await client.send(type="message", text="one", client_message_id="a")
    await client.until_type("message.created")
    await client.send(type="message", text="two", client_message_id="b")
    await client.send(type="message", text="three", client_message_id="c")
    await client.send(type="message", text="/help", client_message_id="h")
    await client.until(lambda f: f["type"] == "message.completed" and "/stop" in f["text"])
    hold.set()  # "two" and "three" reached the gateway before /help did, while turn one was held
    await client.until(lambda f: f["type"] == "message.completed" and f["text"] == "first answer")
    second = await client.until_type("message.completed")
    assert second["text"] == "second answer"
    assert provider.requests[1].messages[-1].content == "two\n\nthree"
    assert len(provider.requests) == 2


async def test_resent_client_message_id_is_answered_once(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("only once"), Reply("next")])
    app = await running(provider)
    client = await connect(session, app)
    await client.hello()
    await client.ask("hi", client_message_id="same")
    await client.send(type="message", text="hi", client_message_id="same")
    reply = await client.ask("another", client_message_id="other")
    assert reply["text"] == "next"
    assert len([f for f in client.frames if f["type"] == "message.created"]) == 2
    assert len(provider.requests) == 2


async def test_bad_frames_get_errors_and_nothing_is_lost(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("still here")])
    app = await running(provider)
    client = await connect(session, app)
    await client.hello()
    await client.ws.send_str("{not json")
    assert (await client.until_type("error"))["code"] == "bad_json"
    await client.send(type="teleport")
    assert (await client.until_type("error"))["code"] == "unknown_type"
    await client.send(type="message", text="   ")
    assert (await client.until_type("error"))["code"] == "empty_text"
    reply = await client.ask("ok?")
    assert reply["text"] == "still here"


async def test_foreign_origin_is_refused_before_the_upgrade(
    running: Running, session: aiohttp.ClientSession
) -> None:
    app = await running(ScriptedProvider([]))
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await connect(session, app, origin="https://evil.example")
    assert refused.value.status == 403


async def test_a_one_megabyte_frame_closes_the_socket_and_the_app_lives_on(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("fine")])
    app = await running(provider)
    client = await connect(session, app)
    await client.hello()
    await client.ws.send_str('{"type":"message","text":"' + "x" * 1_000_000 + '"}')
    closing = await client.ws.receive(timeout=5)
    assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    assert client.ws.close_code == 1009
    again = await connect(session, app)
    await again.hello()
    assert (await again.ask("still up?"))["text"] == "fine"


async def test_model_failure_edits_an_apology_into_the_placeholder(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply(error=RuntimeError("model exploded"))])
    app = await running(provider)
    client = await connect(session, app)
    await client.hello()
    reply = await client.ask("hello?")
    assert reply["text"] == APOLOGY


async def test_offline_model_calls_the_clock_tool(
    running: Running, session: aiohttp.ClientSession
) -> None:
    app = await running(OfflineProvider(word_delay_s=0))
    client = await connect(session, app)
    await client.hello()
    reply = await client.ask("What time is it in Asia/Tokyo?")
    assert "It is **" in reply["text"] and "Asia/Tokyo" in reply["text"]
    plain = await client.ask("hello")
    assert "not an LLM" in plain["text"]


async def test_healthz_and_demo_page(running: Running, session: aiohttp.ClientSession) -> None:
    app = await running(ScriptedProvider([]))
    async with session.get(f"{app.url}/healthz") as response:
        assert response.status == 200
        assert (await response.json())["status"] == "ok"
    async with session.get(f"{app.url}/") as response:
        assert response.status == 200
        assert "widget.js" in await response.text()


async def test_offline_model_dispatches_a_specialist(
    running: Running, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    from tests.agents_kit import write_personas

    folder = write_personas(tmp_path / "personas")
    (folder / "specialist-clock.md").write_text(
        "---\nname: specialist-clock\ndescription: Tells the time.\ntools: [get_current_datetime]\n---\nClock.\n"
    )
    app = await running(OfflineProvider(word_delay_s=0), personas={"dirs": [str(folder)]})
    client = await connect(session, app)
    await client.hello()
    reply = await client.ask("@specialist-clock what time is it in Europe/Paris?")
    assert "**Clock** reports" in reply["text"] and "Europe/Paris" in reply["text"]
    assert "specialist-clock" not in reply["text"]  # users see the display name
    assert any(f["type"] == "agent.started" for f in client.frames)
