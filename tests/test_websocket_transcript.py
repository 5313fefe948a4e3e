"""The server's transcript: the user's messages published and replayed, `/new` clearing it, once.

Over the real app (gateway, store, scripted model) and a real web socket client.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from tests.conftest import ORIGIN, Running, connect


def kinds(frames: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(f["type"], f.get("text", "")) for f in frames]


async def replayed(session: aiohttp.ClientSession, app: Any, visitor: str) -> list[dict[str, Any]]:
    """What a fresh page of this visitor gets: ready, then every kept frame."""
    tab = await connect(session, app)
    ready = await tab.hello(visitor, resume_after=0)
    frames: list[dict[str, Any]] = []
    # the replay is pushed right after ready; read until its last frame (seq == ready.seq)
    while not frames or frames[-1]["seq"] < ready["seq"]:
        frames.append(await tab.next())
    await tab.ws.close()
    return frames


async def test_the_users_messages_reach_every_tab_and_the_replay_in_order(
    running: Running, session: aiohttp.ClientSession
) -> None:
    app = await running(ScriptedProvider([Reply("First answer."), Reply("Second answer.")]))
    tab1, tab2 = await connect(session, app), await connect(session, app)
    ready = await tab1.hello("visitor-0001")
    assert ready["max_text_chars"] == 8000
    await tab2.hello("visitor-0001")
    await tab1.ask("first question", client_message_id="c1")
    await tab1.ask("second question", client_message_id="c2")
    echo = await tab2.until_type("message.user")  # the other tab sees the question too
    assert (echo["message_id"], echo["text"]) == ("c1", "first question")
    await app.gateway.wait_idle()

    frames = await replayed(session, app, "visitor-0001")
    shown = [k for k in kinds(frames) if k[0] in {"message.user", "message.completed"}]
    assert shown == [
        ("message.user", "first question"),
        ("message.completed", "First answer."),
        ("message.user", "second question"),
        ("message.completed", "Second answer."),
    ]
    assert [f["message_id"] for f in frames if f["type"] == "message.user"] == ["c1", "c2"]


async def test_a_resent_message_is_answered_and_shown_once(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply("Only once."), Reply("never")])
    app = await running(provider)
    tab, other = await connect(session, app), await connect(session, app)
    await tab.hello("visitor-0002")
    await other.hello("visitor-0002")
    await tab.ask("hello?", client_message_id="c_retry")
    await app.gateway.wait_idle()
    await tab.send(type="message", text="hello?", client_message_id="c_retry")
    again = await tab.until_type("message.user")
    assert again == {
        "type": "message.user",
        "message_id": "c_retry",
        "duplicate": True,
    }  # this socket only, without seq: "that one arrived"
    await app.gateway.wait_idle()
    assert len(provider.requests) == 1
    frames = await replayed(session, app, "visitor-0002")
    assert [f["type"] for f in frames].count("message.user") == 1
    assert [f["type"] for f in frames].count("message.created") == 1
    await other.until_type("message.completed")
    assert not [f for f in other.frames if f.get("duplicate")]


async def test_new_clears_the_transcript_in_every_tab_and_in_the_replay(
    running: Running, session: aiohttp.ClientSession
) -> None:
    app = await running(ScriptedProvider([Reply("Old answer."), Reply("Fresh answer.")]))
    tab1, tab2 = await connect(session, app), await connect(session, app)
    await tab1.hello("visitor-0003")
    await tab2.hello("visitor-0003")
    await tab1.ask("old question", client_message_id="c1")
    await tab1.send(type="message", text="/new", client_message_id="c2")
    cleared = await tab2.until_type("conversation.cleared")
    assert cleared["reason"] == "new"
    await tab1.until(lambda f: f["type"] == "message.completed" and "new" in f["text"].lower())
    await tab1.ask("fresh question", client_message_id="c3")
    await app.gateway.wait_idle()

    frames = await replayed(session, app, "visitor-0003")
    assert frames[0]["type"] == "conversation.cleared"
    texts = " ".join(f.get("text", "") for f in frames)
    assert "old question" not in texts and "Old answer." not in texts
    assert "fresh question" in texts and "Fresh answer." in texts
    assert not [f for f in frames if f["type"] == "message.user" and f["text"] == "/new"]


async def test_a_button_press_is_shown_with_the_button_it_came_from(
    running: Running, session: aiohttp.ClientSession
) -> None:
    app = await running(ScriptedProvider([Reply("Pressed, thanks.")]))
    tab = await connect(session, app)
    await tab.hello("visitor-0004")
    await tab.send(
        type="action", action_id="confirm", value="yes", label="Confirm", message_id="m_1"
    )
    echo = await tab.until_type("message.user")
    assert echo["text"] == "Confirm"
    assert echo["action"] == {
        "action_id": "confirm",
        "label": "Confirm",
        "value": "yes",
        "message_id": "m_1",
    }
    await tab.until_type("message.completed")


async def test_a_resent_button_press_with_its_client_message_id_is_answered_once(
    running: Running, session: aiohttp.ClientSession
) -> None:
    """A widget that reconnects and sends the press again: the same id, one answer."""
    provider = ScriptedProvider([Reply("Pressed, thanks."), Reply("never")])
    app = await running(provider)
    tab = await connect(session, app)
    await tab.hello("visitor-0006")
    press = {"action_id": "confirm", "label": "Confirm", "message_id": "m_1"}
    await tab.send(type="action", client_message_id="c_press", **press)
    echo = await tab.until_type("message.user")
    assert echo["message_id"] == "c_press" and echo["action"]["action_id"] == "confirm"
    created = await tab.until_type("message.created")
    assert created["reply_to"] == "c_press"
    await tab.until_type("message.completed")
    await tab.ws.close()
    again = await connect(session, app)  # the reconnect, resending what it was not sure of
    await again.hello("visitor-0006")
    await again.send(type="action", client_message_id="c_press", **press)
    duplicate = await again.until_type("message.user")
    assert duplicate == {"type": "message.user", "message_id": "c_press", "duplicate": True}
    await app.gateway.wait_idle()
    assert len(provider.requests) == 1
    frames = await replayed(session, app, "visitor-0006")
    assert [f["type"] for f in frames].count("message.created") == 1


async def test_tool_lines_name_the_answer_they_belong_to(
    running: Running, session: aiohttp.ClientSession
) -> None:
    provider = ScriptedProvider([Reply(calls=[("get_current_datetime", {})]), Reply("Noon.")])
    app = await running(provider)
    tab = await connect(session, app)
    await tab.hello("visitor-0005")
    completed = await tab.ask("time?", client_message_id="c1")
    created = await tab.seen(lambda f: f["type"] == "message.created")
    lines = [f for f in tab.frames if f["type"].startswith("tool.")]
    assert [f["type"] for f in lines] == ["tool.started", "tool.finished"]
    assert {f["message_id"] for f in lines} == {created["message_id"], completed["message_id"]}


@pytest.mark.parametrize("allowed", [True, False])
async def test_a_refused_origin_can_be_read_by_the_page_that_was_refused(
    running: Running, session: aiohttp.ClientSession, allowed: bool
) -> None:
    app = await running(ScriptedProvider([]))
    origin = ORIGIN if allowed else "https://elsewhere.example"
    # what the widget's probe does after a failed connect: the socket URL over plain HTTP
    async with session.get(f"{app.url}/ws", headers={"Origin": origin}) as response:
        if allowed:
            assert response.status != 403
        else:
            assert response.status == 403
            assert response.headers["Access-Control-Allow-Origin"] == "*"
            assert "allowed_origins" in await response.text()
